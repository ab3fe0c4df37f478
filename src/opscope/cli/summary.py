"""`opscope summary`: where GPU time went, one row per kernel / memcpy / memset."""

from __future__ import annotations

import argparse
import dataclasses

from opscope.cli.common import add_input_args, add_output_args, add_selection_args, emit, load_trace
from opscope.cli.fanout import add_parallel_args, check_parallel_args, file_tasks, run_tasks
from opscope.errors import UsageError
from opscope.model.kinds import GPU_KINDS

NAME = "summary"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser, nargs="*")
    parser.add_argument("--top", type=int, default=30, help="rows to show (0 = all; default 30)")
    parser.add_argument(
        "--kind",
        choices=GPU_KINDS,
        action="append",
        default=None,
        help="only this kind of GPU activity (repeatable; default: all three)",
    )
    parser.add_argument("--filter", default=None, metavar="REGEX", help="only names matching this regex")
    add_selection_args(parser, steps=True)
    add_parallel_args(parser)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
    from opscope.report.summary_view import summary_document

    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    options = SummaryOptions(
        top=args.top,
        kinds=tuple(args.kind) if args.kind else GPU_KINDS,
        name_filter=args.filter,
        devices=args.device,
        streams=args.stream,
        steps=args.steps,
    )
    paths = list(args.trace or [])
    check_parallel_args(args, len(paths), spread=len(paths) > 1)
    if len(paths) <= 1:
        args.trace = paths[0] if paths else None
        trace = load_trace(args)
        emit(summary_document(kernel_summary(trace, options)), args)
        return 0
    # Several traces: one table over all of them, each trace reduced on its own (threads, processes or Dask).
    from opscope.analysis.kernels.merge import merge_summaries  # mergeable partials: numpy, only needed here
    from opscope.scale.tasks import summary_file

    tasks = [dataclasses.replace(t, summary=options) for t in file_tasks(paths, args)]
    emit(summary_document(merge_summaries(run_tasks(summary_file, tasks, args), options)), args)
    return 0
