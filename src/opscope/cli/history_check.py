"""`opscope history check` (exit 0 ok / insufficient data, 1 regression, 2 bad input) and `opscope history report`
(the HTML trend page)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from opscope.cli.common import add_output_args, emit
from opscope.cli.history_commands import add_format_arg, emit_written, guard_output
from opscope.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

    from opscope.history.policy import CheckOptions

# The report's charts: (title, scope, metric); kernels are cut to the --top largest of the newest run.
# GPU times per step (per second of window for runs without steps): what `check` judges (issue 28).
CHARTS = (
    ("Top kernels: GPU time per step", "kernel", "per_step_us"),
    ("Top kernels: GPU time per second of window (runs without steps)", "kernel", "per_s_us"),
    ("Categories: GPU time per step", "category", "per_step_us"),
    ("Categories: GPU time per second of window (runs without steps)", "category", "per_s_us"),
    ("Step time (median over the trace's steps)", "global", "step_time_us"),
    ("GPU time per step (median)", "global", "gpu_time_per_step_us"),
    ("GPU time per step (mean over the step windows)", "global", "gpu_time_per_step_mean_us"),
    ("GPU time per second of window (runs without steps)", "global", "gpu_time_per_s_us"),
    ("GPU utilisation", "global", "utilization"),
)


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _add_check_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recent", type=int, default=2, help="the newest N runs are judged (default 2)")
    parser.add_argument(
        "--baseline", type=int, default=10, help="against up to N runs before them (default 10)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=1.10,
        help="threshold policy: worse than this x the baseline median (default 1.10)",
    )
    parser.add_argument(
        "--policy", choices=("threshold", "zscore"), default="threshold", help="default threshold"
    )
    parser.add_argument("--z", type=float, default=3.0, help="zscore policy: standard deviations (default 3)")
    parser.add_argument(
        "--match-tags",
        type=_names,
        default=(),
        metavar="K[,K...]",
        help="only runs whose tags (or gpu, host, format) equal the newest run's",
    )
    parser.add_argument(
        "--scope",
        type=_names,
        default=("kernel", "op", "category", "global"),
        metavar="S[,S...]",
        help="kernel, op, category, step, global (default all but step)",
    )
    parser.add_argument(
        "--min-share",
        type=float,
        default=0.01,
        help="ignore kernels / ops / categories under this share of GPU time (default 0.01)",
    )


def _options(args: argparse.Namespace) -> CheckOptions:
    from opscope.history.policy import CheckOptions

    return CheckOptions(
        recent=args.recent,
        baseline=args.baseline,
        threshold=args.threshold,
        policy=args.policy,
        z=args.z,
        match_tags=args.match_tags,
        scopes=args.scope,
        min_share=args.min_share,
    )


def prepare_check(parser: argparse.ArgumentParser) -> None:
    _add_check_args(parser)
    parser.add_argument("--strict", action="store_true", help="insufficient data is an error (exit 2)")
    add_output_args(parser)


def run_check(args: argparse.Namespace) -> int:
    from opscope.history.api import History
    from opscope.report.history_view import check_document

    with History(args.db) as history:
        guard_output(args, history)
        result = history.check(_options(args))
        names = history.names()
        predictions = history.predictions()
    emit(check_document(result, names, history.url_for_display, predictions), args)
    if result.status == "insufficient_data" and args.strict:
        raise UsageError(f"insufficient data: {result.reason}")
    return 1 if result.status == "regression" else 0


def prepare_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--top", type=int, default=8, help="kernels charted (default 8)")
    parser.add_argument("--last", type=int, default=None, metavar="N", help="only the newest N runs")
    _add_check_args(parser)
    add_format_arg(parser)


def run_report(args: argparse.Namespace) -> int:
    from opscope.cli.common import write_html
    from opscope.history.api import History
    from opscope.report.history_view import written_document
    from opscope.report.html.history_html import history_report_data

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    with History(args.db) as history:
        guard_output(args, history)
        result = history.check(_options(args))
        charts = [
            (title, scope, metric, _top(history.series(scope, None, metric, last=args.last), args.top))
            for title, scope, metric in CHARTS
        ]
        runs, names = history.runs(last=args.last), history.names()
    data = history_report_data(history.url_for_display, runs, charts, result, names)
    write_html(data, "history", "opscope history", args.output)
    facts = {"runs": len(runs), "charts": len(data["charts"]), "status": result.status}
    emit_written(args, written_document("report", history.url_for_display, args.output, facts))
    return 0


def _top(frame: pl.DataFrame, top: int) -> pl.DataFrame:
    """The `top` keys with the most value in the newest run they appear in (all keys but kernels are few)."""
    if frame.height == 0 or frame["scope"][0] != "kernel":
        return frame
    newest = frame.sort("run_id").group_by("key").last().sort(["value", "key"], descending=[True, False])
    return frame.filter(frame["key"].is_in(newest["key"].head(top).to_list()))
