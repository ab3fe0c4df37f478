"""`opscope memory`: peak, timeline, who allocates and what stays live, from a trace recorded with
profile_memory=True, or the state of the caching allocator from a `torch.cuda.memory._dump_snapshot` file."""

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
from opscope.errors import UsageError

NAME = "memory"
FORMATS = ("table", "json", "csv", "markdown")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--device",
        default=None,
        metavar="NAME[,NAME...]",
        help="only these devices: cuda:0, hip:1, cpu, or a bare GPU index (default: all)",
    )
    add_steps_arg(parser)
    add_top_arg(parser, default=20)
    add_output_args(parser, FORMATS)


def run(args: argparse.Namespace) -> int:
    from opscope.ingest.snapshot import is_snapshot

    check_top(args)
    devices = tuple(d.strip() for d in args.device.split(",") if d.strip()) if args.device else None
    if args.trace is not None and is_snapshot(args.trace):
        from opscope.analysis.memory.snapshot import snapshot_stats
        from opscope.cli.common import check_outputs
        from opscope.ingest.snapshot import read_snapshot
        from opscope.report.snapshot_view import snapshot_document

        check_outputs(args, args.trace)
        if args.steps is not None:
            raise UsageError(
                "--steps: a memory snapshot has no steps (it is the allocator's state at one moment)"
            )
        emit(
            snapshot_document(snapshot_stats(read_snapshot(args.trace), args.trace, devices, args.top)), args
        )
        return 0
    from opscope.analysis.memory.summary import MemoryOptions, memory_stats
    from opscope.report.memory_view import memory_document

    trace = load_trace(args)
    emit(memory_document(memory_stats(trace, MemoryOptions(devices, args.steps, args.top))), args)
    return 0
