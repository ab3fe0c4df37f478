"""`opscope kernels`: per-kernel launch configuration, theoretical occupancy and (with --metrics) ncu metrics."""

from __future__ import annotations

import argparse
import logging

from opscope.cli.common import add_input_args, add_output_args, emit, load_trace, read_metrics
from opscope.errors import UsageError
from opscope.untrusted import visible

NAME = "kernels"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--metrics",
        default=None,
        metavar="NCU_CSV",
        help="Nsight Compute export (ncu --csv --page raw or --page details) to join by kernel "
        "name and launch order",
    )
    parser.add_argument("--top", type=int, default=30, help="rows to show (0 = all; default 30)")
    parser.add_argument(
        "--filter", default=None, metavar="REGEX", help="only kernel names matching this regex"
    )
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.kernels.launch_config import LaunchOptions, launch_config
    from opscope.analysis.kernels.metrics import join_metrics
    from opscope.report.kernels_view import kernels_document, no_match_line

    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    metrics = read_metrics(args)
    trace = load_trace(args)
    report = launch_config(trace, LaunchOptions(top=args.top, name_filter=args.filter))
    join = join_metrics(trace, metrics) if metrics is not None else None
    if join is not None and join.matched_launches == 0:
        logging.getLogger("opscope").warning(visible(no_match_line(join)))
    emit(kernels_document(report, join), args)
    return 0
