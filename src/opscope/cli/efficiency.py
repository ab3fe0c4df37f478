"""`opscope efficiency`: per operator (and input shape), FLOP/s, bytes/s and percent of the GPU's peak."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    add_top_arg,
    check_top,
    emit,
    load_trace,
)
from opscope.errors import UsageError

NAME = "efficiency"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--by-shape",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="one row per (op, Input Dims) (default); --no-by-shape: one row per op",
    )
    add_top_arg(parser)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        metavar="TFLOPS",
        help="peak compute to compare with, instead of the peak table's (every dtype)",
    )
    parser.add_argument(
        "--peak-tbps",
        type=float,
        default=None,
        metavar="TBPS",
        help="peak memory bandwidth in TB/s, instead of the peak table's",
    )
    add_selection_args(parser)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
    from opscope.report.efficiency_view import efficiency_document

    check_top(args)
    for flag, value in (("--peak-tflops", args.peak_tflops), ("--peak-tbps", args.peak_tbps)):
        if value is not None and not (value > 0 and value < float("inf")):
            raise UsageError(f"{flag} must be a positive number")
    trace = load_trace(args)
    options = EfficiencyOptions(
        by_shape=args.by_shape,
        top=args.top,
        peak_tflops=args.peak_tflops,
        peak_tbps=args.peak_tbps,
        devices=args.device,
        streams=args.stream,
    )
    emit(efficiency_document(efficiency(trace, options)), args)
    return 0
