"""`opscope analyze`: one-page diagnosis: busy / idle and why, categories, top kernels and ops, launch delay,
synchronisations and memory copies."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    add_steps_arg,
    add_top_arg,
    check_top,
    emit,
    load_trace,
)

NAME = "analyze"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_top_arg(parser, default=10)
    add_selection_args(parser)
    add_steps_arg(parser)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules.advise import advise
    from opscope.report.analyze_view import analyze_document
    from opscope.report.memory_brief import with_peaks

    check_top(args)
    trace = load_trace(args)
    options = AnalyzeOptions(devices=args.device, streams=args.stream, steps=args.steps, top=args.top)
    result = advise(trace, options)
    emit(with_peaks(analyze_document(result), result.memory_peaks), args)
    return 0
