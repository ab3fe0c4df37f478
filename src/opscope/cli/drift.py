"""`opscope drift RUN_FOLDER | SAMPLING_RUN`: across the windows of one sampled run, what moved, from which window,
how fast and what carries it (docs/drift.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from opscope.cli.common import add_html_arg, add_output_args, emit, write_html

NAME = "drift"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run",
        help="a sampling run's folder (holding sampling.json; a log folder: its newest run), or a sampling run "
        "id in the history (--db)",
    )
    parser.add_argument(
        "--db",
        default=None,
        help="the run history (default: the run's own, else $OPSCOPE_HISTORY or .opscope/history.sqlite)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=1.10,
        help="a change must exceed this ratio of the baseline (default 1.10)",
    )
    parser.add_argument(
        "--z", type=float, default=3.0, help="and this many standard deviations of its noise (default 3)"
    )
    parser.add_argument(
        "--fail-on-drift", action="store_true", help="exit 1 when a figure moved the worse way"
    )
    add_html_arg(parser)
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.compare.drift import drift
    from opscope.capture.sampling import find_run_folder, overhead_summary, read_manifest
    from opscope.errors import UsageError
    from opscope.history.windows import from_folder, from_history
    from opscope.report.drift_view import drift_data, drift_document

    if not args.threshold > 1.0 or not args.z > 0:
        raise UsageError("--threshold must be greater than 1 and --z positive")
    path = Path(args.run)
    source: dict[str, Any]
    if path.exists():
        folder = find_run_folder(path)
        manifest = read_manifest(folder)
        windows = from_folder(folder, manifest, args.db)
        source = {
            "sampling_run": manifest.run_id,
            "folder": str(folder),
            "history": args.db or manifest.history,
            "command": manifest.command,
            "plan": manifest.plan,
            "overhead": overhead_summary(manifest.windows, manifest.finish_s),
        }
    else:
        windows = from_history(args.db, args.run)
        source = {
            "sampling_run": args.run,
            "folder": None,
            "history": args.db,
            "command": None,
            "plan": None,
            "overhead": None,
        }
    result = drift(windows, threshold=args.threshold, z=args.z)
    if args.html:
        write_html(
            drift_data(result, source), "drift", f"opscope drift: {source['sampling_run']}", args.html, args
        )
    emit(drift_document(result, source), args)
    if args.fail_on_drift and any(c.worse for c in result.changes):
        return 1
    return 0
