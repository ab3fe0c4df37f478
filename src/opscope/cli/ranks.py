"""`opscope ranks DIR|FILES...`: one trace per rank of a multi-GPU job, compared rank by rank."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from opscope.cli.common import add_cache_args, add_html_arg, add_output_args, emit, write_html
from opscope.cli.fanout import add_parallel_args, file_tasks, run_tasks
from opscope.errors import InputError, UsageError

NAME = "ranks"
log = logging.getLogger("opscope")


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="DIR|FILE", help="trace files, or folders of them (all traces in each)"
    )
    add_cache_args(parser)
    parser.add_argument(
        "--top", type=int, default=10, help="kernels and operators compared across ranks (0 = all)"
    )
    parser.add_argument(
        "--threshold",
        default="30%",
        metavar="PCT",
        help="flag a worst rank this far above the median (default 30%%)",
    )
    add_parallel_args(parser)
    add_output_args(parser)
    add_html_arg(parser)


def _files(paths: list[str]) -> list[Path]:
    from opscope.ingest.inputs import trace_files
    from opscope.loading import input_errors

    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            with input_errors(path):  # an unreadable folder is one line, exit 2
                found = sorted(trace_files(path))
            if not found:
                raise InputError(f"{path}: no trace files in this folder")
            files.extend(found)
        else:
            files.append(path)
    return files


def run(args: argparse.Namespace) -> int:
    from opscope.analysis.compare.gates import parse_pct
    from opscope.analysis.compare.ranks import RanksOptions, compare_ranks
    from opscope.cli.memory_diff import rank_peaks
    from opscope.report.ranks_view import ranks_data, ranks_document
    from opscope.scale.memory_tasks import rank_and_peaks_file

    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    options = RanksOptions(top=args.top, threshold=parse_pct(args.threshold, "--threshold") / 100.0)
    tasks = file_tasks(_files(args.paths), args)
    results = run_tasks(rank_and_peaks_file, tasks, args)  # one read per trace for both
    report = compare_ranks([partial for partial, _ in results], options)
    for warning in report.warnings:
        log.warning(warning)
    peaks = {task.label: peaks for task, (_, peaks) in zip(tasks, results, strict=True)}
    emit(rank_peaks(ranks_document(report), peaks), args)
    if args.html:
        write_html(ranks_data(report), "ranks", f"opscope ranks: {len(report.ranks)} ranks", args.html, args)
    return 0
