"""`opscope brief`: a trace in at most 15 plain-language lines (report/brief_view.py), no language model."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    add_steps_arg,
    emit,
    load_trace,
)

NAME = "brief"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_selection_args(parser)
    add_steps_arg(parser)
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules.advise import advise
    from opscope.report.brief_view import brief_data, brief_document

    trace = load_trace(args)
    options = AnalyzeOptions(devices=args.device, streams=args.stream, steps=args.steps, predict=True)
    emit(brief_document(brief_data(advise(trace, options), trace.meta)), args)
    return 0
