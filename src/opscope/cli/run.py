"""`opscope run [options] -- python SCRIPT.py ARGS...`: profile an unmodified script and print its summary."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

from opscope.cli.common import add_output_args, announce_written, check_outputs, emit

if TYPE_CHECKING:
    from opscope.capture.sampling import Sampling

NAME = "run"
log = logging.getLogger("opscope")


# `--steps` means step numbers (3, 3-5) in every analysing command; here the number of steps to profile has
# its own name, and the old spelling is refused with the new one (issue 28).
OLD_STEPS = "--steps is --profile-steps N here (profile the first N steps); --steps names step numbers in the analysing commands"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile-steps",
        type=int,
        default=None,
        metavar="N",
        help="trace only the first N steps (marked by opscope.step() or optimizer steps); "
        "default: the whole run",
    )
    parser.add_argument("--steps", dest="old_steps", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--skip-first", type=int, default=0, metavar="N", help="with --profile-steps: skip N steps first"
    )
    parser.add_argument(
        "--every",
        type=int,
        default=None,
        metavar="M",
        help="sample a long run: a window of --profile-steps N steps every M steps, each its own trace "
        "(docs/drift.md; read them with opscope drift)",
    )
    parser.add_argument(
        "--every-seconds",
        type=float,
        default=None,
        metavar="S",
        help="sample a long run: a window every S seconds (at the next step boundary)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=None,
        metavar="K",
        help="with --every: keep the newest K window traces on disk; older ones go into the history, then are "
        "deleted (default: keep all)",
    )
    parser.add_argument(
        "--history",
        default=None,
        metavar="DB",
        help="with --every: the run history every window goes into (default: $OPSCOPE_HISTORY or "
        ".opscope/history.sqlite)",
    )
    parser.add_argument("--record-shapes", action="store_true", help="record operator input shapes")
    parser.add_argument("--with-stack", action="store_true", help="record Python source locations")
    parser.add_argument("--profile-memory", action="store_true", help="record tensor allocations")
    parser.add_argument("--nvtx", action="store_true", help="NVTX ranges per step (for Nsight Systems)")
    parser.add_argument(
        "--log-dir", default=None, help="trace folder (default: $PROFILER_LOG_DIR or ./trace_logs)"
    )
    parser.add_argument("--top", type=int, default=30, help="rows to show (0 = all; default 30)")
    parser.add_argument(
        "--overhead",
        action="store_true",
        help="first measure the tracing overhead: the script runs untraced and traced, repeatedly",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="with --overhead: traced/untraced pairs (default 3)"
    )
    parser.add_argument(
        "--jax",
        action="store_true",
        help="profile with jax.profiler (default for a script that imports jax); reads the "
        "script's own JAX profile folder when it records one",
    )
    add_output_args(parser, formats=("table", "json", "markdown"))
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- python SCRIPT.py ARGS...",
        help="the script and its arguments (python -m MODULE also works)",
    )


def _sampling(args: argparse.Namespace) -> Sampling | None:
    """`--every M` / `--every-seconds S` with `--profile-steps N`: the sampling plan; the options that need it
    refused without it."""
    from opscope.capture.sampling import Sampling
    from opscope.errors import UsageError

    if args.every is None and args.every_seconds is None:
        if args.keep is not None or args.history is not None:
            raise UsageError("--keep and --history belong to sampling: give --every M or --every-seconds S")
        return None
    if args.every is not None and args.every_seconds is not None:
        raise UsageError("give --every M or --every-seconds S, not both")
    if args.profile_steps is None:
        raise UsageError("--every needs --profile-steps N: the steps each window records")
    return Sampling(
        steps=args.profile_steps,
        every=args.every,
        every_seconds=args.every_seconds,
        keep=args.keep,
        skip_first=args.skip_first,
        history=args.history,
    )


def run(args: argparse.Namespace) -> int:
    from opscope.capture import ProfileOptions, Schedule, measure_overhead
    from opscope.capture.runner import execute, optimizer_step_marks, parse_command, run_script
    from opscope.capture.summary import summarize
    from opscope.cli.validity import note_file
    from opscope.errors import ScriptFailed, UsageError
    from opscope.report.capture_view import run_document

    if args.old_steps is not None:
        raise UsageError(OLD_STEPS)
    if args.profile_steps is not None and args.profile_steps < 1:
        raise UsageError(f"--profile-steps must be a positive number of steps, got {args.profile_steps}")
    if args.top < 0 or args.repeats < 1:
        raise UsageError("--top must be 0 or more and --repeats at least 1")
    command = parse_command(args.command)
    if not command.is_module:
        check_outputs(args, command.target)  # `-o train.py` must not replace the script with its summary
    sampling = _sampling(args)
    options = ProfileOptions(
        schedule=Schedule.build(
            args.profile_steps if sampling is None else None, skip_first=0 if sampling else args.skip_first
        ),
        sampling=sampling,
        record_shapes=args.record_shapes,
        with_stack=args.with_stack,
        profile_memory=args.profile_memory,
        nvtx=args.nvtx,
        log_dir=args.log_dir,
    )
    overhead = None
    from opscope.capture.jax_profile import is_jax_script, run_jax_script

    jax_mode = args.jax or is_jax_script(command)
    if jax_mode and (args.overhead or args.profile_steps is not None):
        raise UsageError(
            "--overhead, --profile-steps and --every profile with torch.profiler; not available for a JAX script"
        )
    if sampling is not None and args.overhead:
        raise UsageError(
            "--every measures its own overhead (traced against untraced steps): leave out --overhead"
        )
    if args.overhead:
        try:
            overhead = measure_overhead(
                lambda: execute(command),
                repeats=args.repeats,
                options=options,
                step_marks=optimizer_step_marks,
            )
        except (Exception, SystemExit) as exc:
            code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
            raise ScriptFailed(
                f"{command.display} failed during the overhead runs ({type(exc).__name__}: {exc})", code
            ) from None
    result = run_jax_script(command, args.log_dir) if jax_mode else run_script(command, options)
    summary = summarize(result.trace_path, device=result.device, top=args.top) if result.trace_path else None
    if result.trace_path:
        announce_written(result.trace_path)
        if summary is not None:
            note_file(args, result.trace_path)
    if summary is not None or result.exit_status != 0:
        emit(run_document(result, summary, overhead), args)
    for warning in result.warnings:
        log.warning(warning)
    if result.exit_status != 0:
        if result.script_traceback:
            sys.stderr.write(result.script_traceback)
        raise ScriptFailed(f"{command.display} {result.error}; {result.crash_note}", result.exit_status)
    if summary is None:
        raise UsageError(
            f"no trace was captured ({result.warnings[-1] if result.warnings else 'nothing recorded'})"
        )
    return 0
