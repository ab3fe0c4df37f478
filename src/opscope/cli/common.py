"""Options and helpers shared by subcommands: input selection, output format, writing the result."""

from __future__ import annotations

import argparse
import io
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.cli.progress import parse_progress
from opscope.cli.validity import add_repair_arg, banners, checked, repairs, validity_data, with_validity
from opscope.errors import OutputError, UsageError
from opscope.report import FORMATS, Document, RenderOptions, render
from opscope.untrusted import visible

if TYPE_CHECKING:
    from opscope.model.ncu import NcuMetrics
    from opscope.model.trace import Trace


def add_input_args(parser: argparse.ArgumentParser, nargs: str = "?") -> None:
    parser.add_argument(
        "trace",
        nargs=nargs,
        default=None,
        help="trace file, or a folder (its newest trace); default: $PROFILER_LOG_DIR or ./trace_logs",
    )
    add_cache_args(parser)


def add_cache_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-cache", action="store_true", help="parse afresh and write no cache file")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="treat a damaged trace (cut off, bad UTF-8, oversized integers) as an error, and exit 1 after "
        "the output when an error-level validity check fires (docs/validity.md)",
    )
    add_repair_arg(parser)


def add_subcommands(
    parser: argparse.ArgumentParser, dest: str, commands: dict[str, str]
) -> list[tuple[str, argparse.ArgumentParser]]:
    """The required subcommands of a command (`history add`, `cache info`): name -> one-line help, each
    with its parser, in order, for the caller to give them their options."""
    sub = parser.add_subparsers(dest=dest, metavar="SUBCOMMAND", required=True)
    return [(name, sub.add_parser(name, help=text, description=text)) for name, text in commands.items()]


def add_selection_args(parser: argparse.ArgumentParser, steps: bool = False) -> None:
    """--device and --stream; with steps=True also --steps (`add_steps_arg`)."""
    parser.add_argument("--device", type=_int_list, default=None, metavar="N[,N...]", help="only these GPUs")
    parser.add_argument(
        "--stream", type=_int_list, default=None, metavar="N[,N...]", help="only these streams"
    )
    if steps:
        add_steps_arg(parser)


def add_steps_arg(parser: argparse.ArgumentParser) -> None:
    """`--steps 3-5`: restrict to those ProfilerStep#N windows (see `analysis.base.select.by_steps`)."""
    parser.add_argument(
        "--steps",
        default=None,
        metavar="SPEC",
        help="only these ProfilerStep numbers: 3, 3-5 or 2,4 (default: the whole trace)",
    )


def add_top_arg(parser: argparse.ArgumentParser, default: int = 30) -> None:
    parser.add_argument("--top", type=int, default=default, help=f"rows to show (0 = all; default {default})")


def check_top(args: argparse.Namespace) -> None:
    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")


def add_output_args(
    parser: argparse.ArgumentParser, formats: tuple[str, ...] | None = None, output_help: str | None = None
) -> None:
    parser.add_argument("--format", choices=formats or tuple(FORMATS), default="table", help="output format")
    parser.add_argument(
        "-o",
        "--output",
        default=None,
        help=output_help
        or "write to this file (its path is said on standard error); default: standard output",
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="full kernel names, one line each (default: shortened by structure, kept distinct)",
    )
    parser.add_argument("--no-color", action="store_true", help="no colours, even on a terminal")
    parser.add_argument(
        "--width",
        type=int,
        default=None,
        help="table width (default: $COLUMNS, else the terminal's, else 100)",
    )


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None


OUTPUT_OPTIONS = (("output", "-o"), ("html", "--html"))


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether two paths are the same file (device and inode: through links, `..`, hard links); False when
    either does not exist."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_outputs(args: argparse.Namespace, *inputs: str | os.PathLike[str]) -> None:
    """Refuse (before any work) to write an output over one of the command's inputs: `-o trace.json` must never
    destroy the trace. Called wherever a subcommand learns which files it reads."""
    for attribute, flag in OUTPUT_OPTIONS:
        output = getattr(args, attribute, None)
        if output is not None:
            check_output(output, flag, inputs)


def check_output(
    output: str | os.PathLike[str], flag: str, inputs: tuple[str | os.PathLike[str], ...]
) -> None:
    for source in inputs:
        if same_file(output, source):
            raise UsageError(
                f"{flag} {output}: is an input of this command ({source}); refusing to overwrite it"
            )


def load_trace(args: argparse.Namespace, path: str | None = None) -> Trace:
    """Load the trace named on the command line, with a progress bar for long parses on a terminal."""
    from opscope.analysis.base.stages import stage
    from opscope.loading import load, resolve  # here, not at import time: polars and pyarrow only to read

    target = path if path is not None else args.trace
    stage("reading the trace")
    check_outputs(args, resolve(target))
    repairs(args)  # a bad --repair fails before the trace is read
    with parse_progress(args, f"reading {Path(str(target)).name if target else 'trace'}") as progress:
        trace = load(
            target, cache=not args.no_cache, strict=getattr(args, "strict", False), progress=progress
        )
    stage("checking the trace")
    return checked(args, trace)


def read_metrics(args: argparse.Namespace) -> NcuMetrics | None:
    """The Nsight Compute export named by `--metrics`, read before the trace (a bad file fails fast)."""
    if getattr(args, "metrics", None) is None:
        return None
    from opscope.errors import InputError
    from opscope.ingest.ncu import read_ncu_csv

    path = Path(args.metrics)
    if not path.is_file():
        raise InputError(f"{path}: no such file (--metrics)")
    check_outputs(args, path)
    return read_ncu_csv(path, args.metrics)


MIN_WIDTH = 20  # narrower, a table is one character per line


def _columns_env() -> int | None:
    """`COLUMNS` (set by shells, CI runners and users: `COLUMNS=160 opscope ... | less`), when it is a width."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) >= MIN_WIDTH else None


def render_options(args: argparse.Namespace, to_terminal: bool) -> RenderOptions:
    if args.width is not None and args.width < MIN_WIDTH:
        raise UsageError(f"--width must be at least {MIN_WIDTH} columns, got {args.width}")
    color = to_terminal and not args.no_color and "NO_COLOR" not in os.environ
    width = (
        args.width or _columns_env() or (shutil.get_terminal_size((100, 24)).columns if to_terminal else 100)
    )
    # a pipe without --width gets free text one logical line per line (an agent or a script reads lines, and a
    # path cut in two cannot be copied back); tables keep the width
    wrap = to_terminal or args.width is not None or _columns_env() is not None
    return RenderOptions(width=width, wide=args.wide, color=color, wrap_prose=wrap)


def emit(doc: Document, args: argparse.Namespace) -> None:
    """Render `doc` in the chosen format to standard output or to `--output`."""
    to_file = args.output is not None
    to_terminal = not to_file and sys.stdout.isatty()
    text = render(with_validity(doc, args), args.format, render_options(args, to_terminal))
    write_text(text, args.output)


def announce_written(path: str | os.PathLike[str]) -> None:
    """Say on standard error which file a command wrote (every command that writes one says so; -q: silent),
    so that `report T`, `report T -o F`, `diff --html F` and the others all tell where their output went."""
    if logging.getLogger("opscope").isEnabledFor(logging.WARNING):  # -q sets it to errors only
        print(f"opscope: wrote {visible(os.fspath(path))}", file=sys.stderr)


def write_text(text: str, output: str | None) -> None:
    """Write `text` to the file `output` (and say so on standard error), or to standard output when it is
    None. A destination that cannot take it (a full disk, /dev/full, a read-only file) is an `OutputError`:
    one line, exit 2."""
    if output is not None:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OutputError(f"{output}: cannot write: {exc.strerror or exc}") from None
        announce_written(output)
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        raise
    except OSError as exc:
        _discard_stdout()
        raise OutputError(f"cannot write to standard output: {exc.strerror or exc}") from None


def _discard_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush of what is still buffered
    neither fails again nor prints "Exception ignored" on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real file (tests capture it): nothing is flushed at exit


def add_html_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--html",
        default=None,
        metavar="FILE",
        help="also write a self-contained interactive HTML report to FILE (needs opscope[html])",
    )


def write_html(
    data: dict[str, Any], kind: str, title: str, path: str | None, args: argparse.Namespace | None = None
) -> None:
    """Write the HTML report of `kind` (trace, diff, ranks, history) for `data` to `path`; with the command's
    `args`, what the validity checks found on its traces goes on the page (`validity`, and `banners` above
    everything else)."""
    from opscope.report.html.page import render_html  # jinja2 is an extra: import only when asked for HTML

    write_text(render_html(html_data(data, args), title, kind), path)


def html_data(data: dict[str, Any], args: argparse.Namespace | None) -> dict[str, Any]:
    """`data` with the validity list and banners of the traces the command read (docs/validity.md)."""
    if args is None:
        return data
    return {**data, "validity": validity_data(args), "banners": list(banners(args))}  # the page's own key
