"""`opscope history add | list | show | prune | export`: parse, call `opscope.History`, render, write."""

from __future__ import annotations

import argparse
import contextlib
import logging
from typing import TYPE_CHECKING

from opscope.cli.common import add_output_args, announce_written, check_output, emit
from opscope.cli.validity import note
from opscope.errors import OpscopeError, OutputError, UsageError
from opscope.untrusted import visible

if TYPE_CHECKING:
    from opscope.history.api import History
    from opscope.report.document import Document

log = logging.getLogger("opscope")


def tag_pairs(items: list[str] | None) -> dict[str, str]:
    """`--tag k=v` options as a dict (the last value of a key wins)."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


def guard_output(args: argparse.Namespace, history: History, *inputs: str) -> None:
    """-o must never overwrite an input: a trace, or the history database itself."""
    if getattr(args, "output", None):
        check_output(args.output, "-o", (*inputs, history.url))


def _tag_arg(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--tag", action="append", default=None, metavar="KEY=VALUE", help=text)


def _last_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--last", type=int, default=None, metavar="N", help="only the newest N runs")


def prepare_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE", help="trace files to add")
    _tag_arg(parser, "tag every added run (repeatable); commit, branch and dirty are added in a git checkout")
    parser.add_argument(
        "--no-git", action="store_true", help="do not add the git commit / branch / dirty tags"
    )
    parser.add_argument("--no-cache", action="store_true", help="parse afresh and write no cache file")
    add_output_args(parser)


def run_add(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.history.store import HistoryError
    from opscope.report.history_view import added_document

    tags = tag_pairs(args.tag)
    failed: list[str] = []
    with History(args.db) as history:
        guard_output(args, history, *args.traces)
        added = []
        for number, trace in enumerate(args.traces, 1):
            # One trace that cannot be read (or stored) costs only itself: the others are still added. A
            # database that cannot be opened or written is another matter (HistoryError): it ends the command.
            try:
                with _trace_stages(number, len(args.traces)):
                    done = history.add(trace, tags, git=not args.no_git, cache=not args.no_cache)
                added.append(done)
                if done.validity is not None:
                    note(args, str(trace), done.validity)
            except HistoryError:
                raise
            except OpscopeError as exc:
                log.error("not added: %s", visible(str(exc)))
                failed.append(str(trace))
    emit(added_document(history.url_for_display, added), args)
    if failed:
        log.error("%d of %d traces not added: %s", len(failed), len(args.traces), visible(", ".join(failed)))
        return 1
    return 0


def _trace_stages(number: int, total: int) -> contextlib.AbstractContextManager[None]:
    """With several traces, each one's stages on the progress line as "trace 2 of 3: linking ..."."""
    from opscope.analysis.base.stages import current_listener, relaying

    if total == 1:
        return contextlib.nullcontext()
    return relaying(current_listener(), number, total)


def prepare_list(parser: argparse.ArgumentParser) -> None:
    _tag_arg(parser, "only runs with this tag (repeatable; gpu, host and format match the run's own facts)")
    _last_arg(parser)
    add_output_args(parser)


def run_list(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.report.history_view import runs_document

    with History(args.db) as history:
        guard_output(args, history)
        runs = history.runs(tag_pairs(args.tag), args.last)
    emit(runs_document(history.url_for_display, runs), args)
    return 0


def prepare_show(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--kernel", metavar="REGEX", help="kernels whose key or name matches")
    which.add_argument("--op", metavar="REGEX", help="operators whose name matches")
    which.add_argument("--category", metavar="NAME", help="one kernel category (gemm, attention, ...)")
    which.add_argument(
        "--global",
        dest="global_metric",
        metavar="METRIC",
        help="a run-wide figure: gpu_time_us, step_time_us, gpu_time_per_step_us, utilization, ...",
    )
    which.add_argument(
        "--predictions",
        action="store_true",
        help="each advice rule's record: the savings its findings predicted against what the fixes realised",
    )
    parser.add_argument(
        "--metric",
        default=None,
        help="per_step_us, per_s_us, calls, total_us, mean_us, share, ... (default per_step_us: GPU time per "
        "step, or per_s_us, per second of window, for runs without steps)",
    )
    _tag_arg(parser, "only runs with this tag (repeatable)")
    _last_arg(parser)
    add_output_args(parser)


def run_show(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.report.history_view import predictions_document, series_document

    if args.predictions:
        with History(args.db) as history:
            guard_output(args, history)
            found = history.predictions()
        emit(predictions_document(history.url_for_display, found), args)
        return 0
    if args.global_metric is not None:
        scope, pattern, metric = "global", None, args.global_metric
    elif args.category is not None:
        scope, pattern, metric = "category", args.category, args.metric
    else:
        scope, pattern, metric = (
            ("kernel", args.kernel, args.metric) if args.kernel is not None else ("op", args.op, args.metric)
        )
    with History(args.db) as history:
        guard_output(args, history)
        if metric is None:  # what `check` judges: per step, else per second of window (issue 28)
            metric = "per_step_us"
            frame = history.series(scope, pattern, metric, last=args.last, tags=tag_pairs(args.tag))
            if frame.is_empty():
                metric = "per_s_us"
        frame = history.series(scope, pattern, metric, last=args.last, tags=tag_pairs(args.tag))
    emit(series_document(history.url_for_display, scope, metric, frame), args)
    return 0


def prepare_prune(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep", type=int, required=True, metavar="N", help="keep the newest N runs")
    add_output_args(parser)


def run_prune(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.report.history_view import pruned_document

    with History(args.db) as history:
        guard_output(args, history)
        removed = history.prune(args.keep)
        kept = len(history.runs())
    emit(pruned_document(history.url_for_display, removed, kept), args)
    return 0


def add_format_arg(parser: argparse.ArgumentParser) -> None:
    """--format (and the table options) for a command whose output proper is a file: what it wrote."""
    from opscope.report import FORMATS

    parser.add_argument("--format", choices=tuple(FORMATS), default="table", help="output format")
    parser.add_argument("--wide", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-color", action="store_true", help="no colours, even on a terminal")
    parser.add_argument("--width", type=int, default=None, help="table width (default: the terminal's)")


def emit_written(args: argparse.Namespace, document: Document) -> None:
    """Print `document` to standard output in --format (`-o` of these commands is the file they write)."""
    emit(document, argparse.Namespace(**{**vars(args), "output": None}))


def prepare_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--parquet", required=True, metavar="FILE", help="write the Parquet file here")
    add_format_arg(parser)


def run_export(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.report.history_view import written_document

    with History(args.db) as history:
        check_output(args.parquet, "--parquet", (history.url,))
        frame = history.frame()
    try:
        frame.write_parquet(args.parquet)
        announce_written(args.parquet)
    except OSError as exc:
        raise OutputError(f"{args.parquet}: cannot write: {exc.strerror or exc}") from None
    facts = {"rows": frame.height, "runs": frame["run_id"].n_unique()}
    emit_written(args, written_document("export", history.url_for_display, args.parquet, facts))
    return 0
