"""`opscope export`: folded stacks for flame-graph tools, a trimmed trace for Perfetto / chrome://tracing, or the
event table as Parquet."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from opscope.analysis.attribution import MODULE_MODES
from opscope.cli.common import add_input_args, add_selection_args, announce_written, load_trace, write_text
from opscope.cli.validity import warn_banners
from opscope.errors import UsageError
from opscope.export.folded import UNITS, folded_stacks, folded_text

NAME = "export"
CHROME_JSON_FORMATS = ("kineto",)  # the reader of Chrome-trace JSON files (trimmed byte for byte)
log = logging.getLogger("opscope")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument(
        "--folded",
        action="store_true",
        help="folded stacks `op;op;kernel weight` (GPU time) for flamegraph.pl / speedscope",
    )
    parser.add_argument(
        "--parquet",
        action="store_true",
        help="the event table as Parquet (one row per event, the columns of docs/readers.md) to -o FILE",
    )
    parser.add_argument(
        "--unit", choices=tuple(UNITS), default="ns", help="weight unit of --folded (default ns)"
    )
    parser.add_argument(
        "--modules",
        choices=MODULE_MODES,
        default="types",
        help="--folded: merge module instances by type (default) or one frame per instance",
    )
    parser.add_argument(
        "--window",
        default=None,
        metavar="START:END",
        help="only this time window, microseconds from the start of the trace's analysed window",
    )
    add_selection_args(parser, steps=True)
    parser.add_argument("-o", "--output", default=None, help="output file (.json or .json.gz for a trace)")


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.attribution.tree import TreeOptions, op_tree
    from opscope.export.chrome import trim_spec, trim_trace
    from opscope.loading import resolve

    if args.parquet:
        return _parquet(args)
    if not args.folded and args.output is None:
        raise UsageError(
            "export needs --folded (stacks to standard output or -o) or -o FILE.json[.gz] (trace)"
        )
    if args.folded and args.window:
        raise UsageError("--window applies to trimmed traces; with --folded, choose steps with --steps")
    trace = load_trace(args)  # refuses an -o that is the trace itself
    warn_banners(args)
    if args.folded:
        options = TreeOptions(
            depth=0,
            min_share=0.0,
            devices=args.device,
            streams=args.stream,
            steps=args.steps,
            modules=args.modules,
            max_levels=None,  # every level: a folded line is as long as its stack, never longer
        )
        write_text(folded_text(folded_stacks(op_tree(trace, options).root), args.unit), args.output)
        return 0
    if trace.meta.format not in CHROME_JSON_FORMATS:
        # the trimmed copy is the source's own events, byte for byte: only a Chrome-trace JSON source has them
        raise UsageError(
            f"export -o copies events of a Chrome-trace JSON file; this is a {trace.meta.format} trace "
            "(use --folded, or --parquet for its event table)"
        )
    spec = trim_spec(trace, args.steps, args.window, args.device, args.stream)
    result = trim_trace(resolve(args.trace), Path(args.output), spec, str(args.trace))
    announce_written(args.output)
    log.info("kept %d of %d events", result.events_out, result.events_in)
    if result.text_replaced:
        n = result.text_replaced
        log.warning(
            f"{n:,} {'event' if n == 1 else 'events'} with invalid UTF-8 kept, the bad bytes replaced with "
            "U+FFFD (as opscope reads them)"
        )
    return 0


def _parquet(args: argparse.Namespace) -> int:
    from opscope.export.parquet import write_parquet

    if args.output is None or args.output == "-":
        raise UsageError("export --parquet needs -o FILE.parquet")
    if args.folded or args.window or args.steps or args.device or args.stream:
        raise UsageError(
            "--parquet writes the whole event table; it takes no --folded, --window or selection"
        )
    trace = load_trace(args)  # refuses an -o that is the trace itself
    warn_banners(args)
    rows = write_parquet(trace, Path(args.output))
    announce_written(args.output)
    log.info("wrote %d events to %s", rows, args.output)
    return 0
