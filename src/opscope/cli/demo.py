"""`opscope demo`: profile a built-in tiny diffusion denoiser (first 3 steps) and print summary and diagnosis."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from opscope.cli.common import add_output_args, announce_written, emit

NAME = "demo"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda[:N]")
    parser.add_argument("--denoise-steps", type=int, default=10, help="denoising steps to run (default 10)")
    # `--steps` names step numbers in the analysing commands: refused here, with the new names (issue 28)
    parser.add_argument("--steps", dest="old_steps", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile-steps", type=int, default=3, help="steps to profile, from the first (default 3)"
    )
    parser.add_argument("--top", type=int, default=15, help="rows to show (0 = all; default 15)")
    parser.add_argument(
        "--log-dir", default=None, help="trace folder (default: $PROFILER_LOG_DIR or ./trace_logs)"
    )
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.capture.demo import run_demo
    from opscope.cli.validity import note_file
    from opscope.errors import UsageError
    from opscope.report.capture_view import demo_document

    if args.old_steps is not None:
        raise UsageError(
            "--steps is --denoise-steps N here (denoising steps to run; --profile-steps N: how many to "
            "profile); --steps names step numbers in the analysing commands"
        )
    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    result = run_demo(
        device=args.device,
        total_steps=args.denoise_steps,
        profiled_steps=args.profile_steps,
        log_dir=args.log_dir,
        top=args.top,
    )
    announce_written(result.summary.trace_path)
    note_file(args, result.summary.trace_path)
    report = _html_report(result.summary.trace_path, result.diagnosis)
    if report is not None:
        announce_written(report)
    emit(demo_document(replace(result, report_path=report)), args)
    return 0


def _html_report(trace_path: str, diagnosis: tuple[str, ...] = ()) -> str | None:
    """Write the self-contained HTML report of the demo's trace next to it, with the diagnosis the terminal
    printed (on a CPU-only run the page shows the CPU operators, not empty GPU panels); None when jinja2 (the
    `html` extra) is missing, so the demo still runs on a minimal install."""
    try:
        from opscope.report.html.page import render_html
    except ImportError:
        return None
    from opscope.analysis.bundle import trace_bundle
    from opscope.ingest import load
    from opscope.report.html.trace_report import ReportOptions, trace_report

    try:
        data = trace_report(trace_bundle(load(trace_path)), ReportOptions())
        data["diagnosis"] = list(diagnosis)
        page = render_html(data, title="opscope demo report")
    except ImportError:
        return None
    target = Path(trace_path).with_name("opscope-demo-report.html")
    target.write_text(page, encoding="utf-8")
    return str(target)
