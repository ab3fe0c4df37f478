"""`opscope export`: folded stacks for flame-graph tools, or a trimmed trace for Perfetto / chrome://tracing."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import polars as pl

from opscope.analysis.stacks import StackOptions, gpu_stacks
from opscope.cli.common import add_input_args, add_selection_args, load_trace, write_text
from opscope.errors import UsageError
from opscope.ingest import resolve_input
from opscope.model.schema import Col
from opscope.report.chrome_export import trim_spec, trim_trace
from opscope.report.folded import UNITS, folded_text

NAME = "export"
HELP = "export folded op -> kernel stacks (--folded) or a trimmed trace (-o FILE.json[.gz]) for Perfetto"
log = logging.getLogger("opscope")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    parser.add_argument("--folded", action="store_true",
                        help="folded stacks `op;op;kernel weight` (GPU time) for flamegraph.pl / speedscope")
    parser.add_argument("--unit", choices=tuple(UNITS), default="ns", help="weight unit of --folded (default ns)")
    parser.add_argument("--steps", default=None, metavar="N[-M][,...]", help="only these ProfilerStep#N")
    parser.add_argument("--window", default=None, metavar="START:END",
                        help="only this time window, microseconds from the start of the trace's analysed window")
    add_selection_args(parser)
    parser.add_argument("-o", "--output", default=None, help="output file (.json or .json.gz for a trace)")


def run(args: argparse.Namespace) -> int:
    if not args.folded and args.output is None:
        raise UsageError("export needs --folded (stacks to standard output or -o) or -o FILE.json[.gz] (trace)")
    trace = load_trace(args)
    spec = trim_spec(trace, args.steps, args.window, args.device, args.stream)
    if args.folded:
        stacks = gpu_stacks(trace, StackOptions(devices=args.device, streams=args.stream))
        if spec.windows is not None:
            inside = pl.lit(False)
            for lo, hi in spec.windows:
                inside = inside | pl.col(Col.TS_NS).is_between(lo, hi, closed="left")
            stacks = stacks.only(inside)
        write_text(folded_text(stacks.folded(), args.unit), args.output)
        return 0
    source = resolve_input(args.trace)
    target = Path(args.output)
    if target.resolve() == source.resolve():
        raise UsageError(f"{args.output}: would overwrite the trace being read")
    result = trim_trace(source, target, spec, str(args.trace))
    log.info("kept %d of %d events", result.events_out, result.events_in)
    return 0
