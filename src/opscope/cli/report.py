"""`opscope report`: a self-contained interactive HTML report of one trace (or its tables as Markdown, JSON...)."""

from __future__ import annotations

import argparse
import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    check_output,
    emit,
    html_data,
    load_trace,
    read_metrics,
    write_text,
)
from opscope.errors import UsageError
from opscope.report import FORMATS, render
from opscope.untrusted import visible

if TYPE_CHECKING:
    from opscope.ingest.ncu import NcuMetrics
    from opscope.model.trace import Trace

NAME = "report"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_selection_args(parser)
    add_output_args(
        parser,
        formats=("html", *FORMATS),
        output_help="write to this file; default for html: <trace>.opscope.html beside the trace (in the current "
        "folder when that one is read-only), for the other formats standard output; - is standard output. The "
        "path written is said on standard error",
    )
    parser.set_defaults(format="html")
    # -o: the page's path; without it, HTML goes to <trace>.opscope.html beside the trace (its path is printed)
    # and the other formats to standard output; -o - writes the page to standard output.
    parser.add_argument(
        "--metrics",
        default=None,
        metavar="NCU_CSV",
        help="Nsight Compute export to join to the kernels table by name and launch order (as kernels --metrics)",
    )
    parser.add_argument(
        "--max-events",
        type=int,
        default=200_000,
        metavar="N",
        help="timeline rectangles embedded in the page (default 200000; beyond, the longest)",
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=5_000,
        metavar="N",
        help="kernel-table rows embedded in the page (default 5000; beyond, the heaviest, and every "
        "row in OUTPUT.kernels.csv / .json beside the page)",
    )


def run(args: argparse.Namespace) -> int:
    if args.max_events < 1 or args.max_rows < 1:
        raise UsageError("--max-events and --max-rows must be positive numbers")
    to_stdout = args.output == "-"
    if to_stdout:
        args.output = None
    metrics = read_metrics(args)
    trace = load_trace(args)
    data = page_data(trace, args, metrics)
    if args.format != "html":
        from opscope.report.trace_view import report_document

        emit(report_document(data), args)
        return 0
    from opscope.report.html.page import render_html

    announce = args.output is None and not to_stdout  # 1.7 MB of HTML is not for a terminal: a file, named
    if announce:
        args.output = str(default_page(Path(trace.path)))
        check_output(args.output, "-o", (trace.path,))
    if data["kernels"]["rest"] is not None and args.output is not None:
        data["kernels"]["full"] = _write_full_kernels(trace, args)
    write_text(
        render_html(html_data(data, args), title=f"opscope report: {Path(trace.path).name}"), args.output
    )
    return 0


def page_data(trace: Trace, args: argparse.Namespace, metrics: NcuMetrics | None) -> dict[str, Any]:
    """The report's data (`trace_report` of the trace's `trace_bundle`). That of the whole trace without Nsight
    Compute metrics is kept beside the trace cache (`stored.kept_document`, keyed by the code of the analyses,
    the event model, the data tables and the report, and by --max-events / --max-rows): a second report of the
    same trace, in any format, reads it back without importing or running an analysis (issue 25)."""

    def compute() -> dict[str, Any]:
        from opscope.analysis.bundle import BundleOptions, trace_bundle
        from opscope.report.html.trace_report import ReportOptions, trace_report
        from opscope.report.kernels_view import no_match_line

        options = BundleOptions(devices=args.device, streams=args.stream, kernel_rows=args.max_rows)
        bundle = trace_bundle(trace, options, metrics)
        if bundle.ncu is not None and bundle.ncu.matched_launches == 0:
            logging.getLogger("opscope").warning(visible(no_match_line(bundle.ncu)))
        return trace_report(bundle, ReportOptions(max_events=args.max_events, max_rows=args.max_rows))

    if metrics is not None or args.device or args.stream:
        return compute()
    from opscope.analysis.base.codetag import analysis_tag
    from opscope.analysis.base.stored import kept_document

    tag = analysis_tag("opscope.report")
    return kept_document(trace, f"report_page-{args.max_events}-{args.max_rows}", tag, compute)


SUFFIXES = (".gz", ".json", ".sqlite", ".csv", ".pb")  # dropped from the trace's name, last first


def default_page(trace: Path) -> Path:
    """`<trace>.opscope.html` beside the trace (its name without .json.gz and the like), or in the current
    folder when the trace's folder is not writable."""
    name = trace.name
    for suffix in SUFFIXES:
        name = name.removesuffix(suffix)
    page = f"{name or 'trace'}.opscope.html"
    folder = trace.parent
    return (folder if _writable(folder) else Path.cwd()) / page


def _writable(folder: Path) -> bool:
    """The folder lets us write, and is not marked read-only (root passes `os.access` on a read-only folder: a
    shared, read-only trace collection must not collect reports)."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return False
    return os.access(folder, os.W_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _write_full_kernels(trace: Trace, args: argparse.Namespace) -> list[str]:
    """Every kernel-table row, as `opscope summary --top 0` writes them (CSV and JSON), beside the page; their
    names relative to it, for the page's links."""
    from opscope.analysis.kernels.summary import SummaryOptions, kernel_summary
    from opscope.report.summary_view import summary_document

    page = Path(args.output)
    doc = summary_document(
        kernel_summary(trace, SummaryOptions(top=0, devices=args.device, streams=args.stream))
    )
    names = []
    for fmt, suffix in (("csv", ".kernels.csv"), ("json", ".kernels.json")):
        target = page.with_name(page.stem + suffix)
        check_output(target, "-o", (trace.path,))
        write_text(render(doc, fmt), str(target))
        names.append(target.name)
    return names
