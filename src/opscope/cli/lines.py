"""`opscope lines`: GPU time by the line of the user's Python code that launched it (with_stack traces)."""

from __future__ import annotations

import argparse

from opscope.analysis.attribution import FRAME_GROUPS
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

NAME = "lines"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--depth",
        type=int,
        default=1,
        metavar="N",
        help="a row is the N innermost frames of your code, a short call path (default 1)",
    )
    parser.add_argument(
        "--skip-prefix",
        action="append",
        default=[],
        metavar="PREFIX",
        help="also skip frames whose file starts with PREFIX, e.g. transformers/ (repeatable)",
    )
    parser.add_argument(
        "--keep",
        action="append",
        choices=FRAME_GROUPS,
        default=[],
        help="count this framework's frames as your code (repeatable; default: all four skipped)",
    )
    add_top_arg(parser)
    add_selection_args(parser, steps=True)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.attribution.frames import FrameFilter
    from opscope.analysis.attribution.lines import LineOptions, source_lines
    from opscope.report.lines_view import lines_document

    check_top(args)
    if args.depth < 1:
        raise UsageError("--depth must be 1 or more (frames of your code per row)")
    if any(not p for p in args.skip_prefix):
        raise UsageError("--skip-prefix needs a non-empty prefix")
    trace = load_trace(args)
    frames = FrameFilter(
        keep=tuple(g for g in FRAME_GROUPS if g in args.keep), skip_prefixes=tuple(args.skip_prefix)
    )
    options = LineOptions(
        top=args.top,
        depth=args.depth,
        frames=frames,
        devices=args.device,
        streams=args.stream,
        steps=args.steps,
    )
    emit(lines_document(source_lines(trace, options)), args)
    return 0
