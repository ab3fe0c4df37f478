"""`opscope compare T1 T2 T3...`: the same model on three or more GPUs (or frameworks), one column per trace,
matched operator by operator and input shapes, then by kernel category (analysis/compare/hardware.py)."""

from __future__ import annotations

import argparse

from opscope.cli.common import add_cache_args, add_output_args, check_outputs, emit
from opscope.cli.fanout import add_parallel_args, file_tasks, run_tasks
from opscope.errors import UsageError

NAME = "compare"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="two or more traces of one model")
    add_cache_args(parser)
    parser.add_argument("--top", type=int, default=30, help="rows to show (0 = all; default 30)")
    add_parallel_args(parser)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from opscope.analysis.compare.hardware import hardware_compare
    from opscope.report.hardware_view import compare_document
    from opscope.scale.memory_tasks import hardware_side_file

    if len(args.traces) < 2:
        raise UsageError("compare needs two or more traces")
    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    check_outputs(args, *(Path(t) for t in args.traces))
    if args.jobs is None and args.scheduler is None:
        args.jobs = 1  # one trace after the other: the memory of one trace's analysis at a time
    sides = run_tasks(hardware_side_file, file_tasks(list(args.traces), args, False), args)
    emit(compare_document(hardware_compare(list(sides)), args.top), args)
    return 0
