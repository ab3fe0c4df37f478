"""`opscope tree`: GPU time rolled up the module / annotation / op / kernel hierarchy."""

from __future__ import annotations

import argparse

from opscope.analysis.attribution import MODULE_MODES, PYTHON_MODES
from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    emit,
    load_trace,
)
from opscope.errors import UsageError

NAME = "tree"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument("--depth", type=int, default=4, help="levels to show (0 = all; default 4)")
    parser.add_argument(
        "--min-share",
        type=float,
        default=0.05,
        metavar="FRACTION",
        help="fold nodes under this share of GPU time (default 0.05 = 5%%)",
    )
    parser.add_argument(
        "--python",
        choices=PYTHON_MODES,
        default="modules",
        help="Python frames shown: nn.Module frames only (default), all, none, or user: your own code's "
        "frames, framework frames (torch, stdlib, built-ins, Inductor/Triton) collapsed",
    )
    parser.add_argument(
        "--modules",
        choices=MODULE_MODES,
        default="types",
        help="merge the instances of a module type into one node (default: Layer x24), or one "
        "node per instance",
    )
    parser.add_argument(
        "--no-hot-path",
        dest="hot_path",
        action="store_false",
        help="stop at --depth (default: below it, follow every child above --min-share down to its kernel)",
    )
    add_selection_args(parser, steps=True)
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.attribution.tree import TreeOptions, op_tree
    from opscope.report.tree_view import tree_document

    if args.depth < 0:
        raise UsageError("--depth must be 0 (all levels) or a positive number")
    if not 0 <= args.min_share <= 1:
        raise UsageError("--min-share must be between 0 and 1 (a fraction, e.g. 0.01)")
    trace = load_trace(args)
    options = TreeOptions(
        depth=args.depth,
        min_share=args.min_share,
        python=args.python,
        devices=args.device,
        streams=args.stream,
        steps=args.steps,
        modules=args.modules,
        hot_path=args.hot_path,
    )
    emit(tree_document(op_tree(trace, options)), args)
    return 0
