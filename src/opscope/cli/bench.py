"""`opscope bench MODULE:FUNCTION`: baseline vs named variants (compile, bf16, channels_last, ...) over batch sizes."""

from __future__ import annotations

import argparse

from opscope.cli.common import _int_list, add_output_args, announce_written, emit

NAME = "bench"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "entry",
        metavar="MODULE:FUNCTION",
        help="FUNCTION(batch_size) -> (model, inputs); MODULE may be a dotted name or a .py file",
    )
    parser.add_argument(
        "--variants",
        default=None,
        metavar="NAME[,NAME...]",
        help="built-in strategies: compile, bf16, fp16, channels_last "
        "(default: compile,bf16,channels_last on a GPU; bf16,channels_last on the CPU)",
    )
    parser.add_argument(
        "--batch-sizes",
        type=_int_list,
        default=(1,),
        metavar="N[,N...]",
        help="batch sizes to run (default 1)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per variant (default 5)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls before timing (default 2)")
    parser.add_argument("--trace-steps", type=int, default=3, help="profiled calls per variant (default 3)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu or cuda[:N]")
    parser.add_argument(
        "--log-dir",
        default=None,
        help="trace folder (default: $PROFILER_LOG_DIR or ./trace_logs); traces go to its bench/ subfolder",
    )
    add_output_args(parser, formats=("table", "json", "markdown"))


def run(args: argparse.Namespace) -> int:
    from opscope.capture._torch import require_torch
    from opscope.capture.compare import compare_strategies, load_entry
    from opscope.report.bench_view import bench_document

    require_torch()
    setup = load_entry(args.entry)
    variants = (
        [v.strip() for v in args.variants.split(",") if v.strip()] if args.variants is not None else None
    )
    result = compare_strategies(
        setup,
        variants,
        args.batch_sizes,
        repeats=args.repeats,
        warmup=args.warmup,
        trace_steps=args.trace_steps,
        device=args.device,
        log_dir=args.log_dir,
    )
    for run_ in result.runs:  # each variant's trace, named like every file a command writes
        if run_.trace_path:
            announce_written(run_.trace_path)
    emit(bench_document(result), args)
    return 0
