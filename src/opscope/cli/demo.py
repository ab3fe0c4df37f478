"""`opscope demo`: profile a built-in tiny diffusion denoiser (first 3 steps) and print summary and diagnosis."""

from __future__ import annotations

import argparse

from opscope.cli.common import add_output_args, emit

NAME = "demo"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda[:N]")
    parser.add_argument("--steps", type=int, default=10, help="denoising steps to run (default 10)")
    parser.add_argument("--profile-steps", type=int, default=3, help="steps to profile, from the first (default 3)")
    parser.add_argument("--top", type=int, default=15, help="rows to show (0 = all; default 15)")
    parser.add_argument("--log-dir", default=None, help="trace folder (default: $PROFILER_LOG_DIR or ./trace_logs)")
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.capture.demo import run_demo
    from opscope.errors import UsageError
    from opscope.report.capture_view import demo_document

    if args.top < 0:
        raise UsageError("--top must be 0 (all rows) or a positive number")
    result = run_demo(device=args.device, total_steps=args.steps, profiled_steps=args.profile_steps,
                      log_dir=args.log_dir, top=args.top)
    emit(demo_document(result), args)
    return 0
