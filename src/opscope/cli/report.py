"""`opscope report`: a self-contained interactive HTML report of one trace (or its tables as Markdown, JSON...)."""

from __future__ import annotations

import argparse
from pathlib import Path

from opscope.cli.common import (
    add_input_args,
    add_output_args,
    add_selection_args,
    emit,
    load_trace,
    write_text,
)
from opscope.errors import UsageError
from opscope.report import FORMATS
from opscope.report.trace_report import ReportOptions, trace_report
from opscope.report.trace_view import report_document

NAME = "report"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_input_args(parser)
    add_selection_args(parser)
    add_output_args(parser, formats=("html", *FORMATS))
    parser.set_defaults(format="html")
    parser.add_argument("--max-events", type=int, default=200_000, metavar="N",
                        help="timeline rectangles embedded in the page (default 200000; beyond, the longest)")


def run(args: argparse.Namespace) -> int:
    if args.max_events < 1:
        raise UsageError("--max-events must be a positive number")
    trace = load_trace(args)
    data = trace_report(trace, ReportOptions(devices=args.device, streams=args.stream, max_events=args.max_events))
    if args.format != "html":
        emit(report_document(data), args)
        return 0
    from opscope.report.html import render_html

    write_text(render_html(data, title=f"opscope report: {Path(trace.path).name}"), args.output)
    return 0
