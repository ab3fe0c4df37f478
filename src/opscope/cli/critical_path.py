"""`opscope critical-path`: the chain of dependent work that bounds each step, its breakdown, and what-ifs."""

from __future__ import annotations

import argparse

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_steps_arg,
    add_top_arg,
    check_top,
    emit,
    load_trace,
)

NAME = "critical-path"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_steps_arg(parser)
    parser.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="REGEX:FACTOR",
        help="rescale the events whose name matches REGEX by FACTOR (0 removes them) and print the "
        "predicted step time; repeatable, e.g. 'gemm|cutlass:0.5' 'aten::copy_:0'",
    )
    add_top_arg(parser, default=10)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.base.linking import link
    from opscope.analysis.critical_path.host_frames import with_host_frames
    from opscope.analysis.critical_path.path import WhatIf
    from opscope.analysis.critical_path.stats import critical_path_stats
    from opscope.report.critical_path_view import critical_path_document

    check_top(args)
    rules = [WhatIf.parse(spec) for spec in args.what_if]
    trace = load_trace(args)
    stats = critical_path_stats(trace, args.steps, rules, top=args.top, keep=True)
    emit(critical_path_document(with_host_frames(trace, link(trace), stats)), args)
    return 0
