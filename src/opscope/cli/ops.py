"""`opscope ops`: per operator (aten op, user annotation), CPU time and the GPU time of the kernels it launched."""

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

NAME = "ops"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--by-shape", action="store_true", help="one row per (op, Input Dims) (record_shapes)"
    )
    parser.add_argument(
        "--efficiency", action="store_true", help="add TFLOP/s, %% of peak and bound (opscope efficiency)"
    )
    parser.add_argument(
        "--sort",
        choices=("self", "total"),
        default="self",
        help="rank by GPU self time, then CPU self (default: wrappers such as ProfilerStep#* do "
        "not top the table), or by GPU total, then CPU total",
    )
    add_top_arg(parser)
    add_selection_args(parser, steps=True)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.attribution.ops import OpOptions, op_stats
    from opscope.report.ops_view import ops_document

    check_top(args)
    trace = load_trace(args)
    options = OpOptions(
        by_shape=args.by_shape,
        top=args.top,
        devices=args.device,
        streams=args.stream,
        steps=args.steps,
        sort=args.sort,
    )
    doc = ops_document(op_stats(trace, options))
    if args.efficiency:
        from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency
        from opscope.report.ops_efficiency_view import with_efficiency

        eff = EfficiencyOptions(by_shape=args.by_shape, top=0, devices=args.device, streams=args.stream)
        doc = with_efficiency(doc, efficiency(trace, eff))
    emit(doc, args)
    return 0
