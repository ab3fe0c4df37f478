"""`opscope steps`: wall, GPU busy, kernel, memcpy, communication and idle time per ProfilerStep."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    emit,
    load_trace,
)

NAME = "steps"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_selection_args(parser, steps=True)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.attribution.steps import StepOptions, step_stats
    from opscope.report.steps_view import steps_document

    trace = load_trace(args)
    options = StepOptions(devices=args.device, streams=args.stream, steps=args.steps)
    emit(steps_document(step_stats(trace, options)), args)
    return 0
