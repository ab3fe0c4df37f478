"""`opscope` entry point: parse arguments, run one subcommand, turn errors into exit codes (only here)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from opscope.analysis.base.stages import stage
from opscope.cli import address_space, allocator, memory_guard, native_noise
from opscope.cli.parser import OneLineParser, grouped_commands
from opscope.cli.progress import stage_progress
from opscope.errors import OpscopeError, OutOfMemory
from opscope.ingest import headstart
from opscope.untrusted import visible

# Subcommands, in the order `--help` lists them: name -> one-line help. Each lives in `opscope.cli.<name>`
# (NAME, prepare_parser(parser), run(args) -> int) and is imported only when it runs, so that `--help`,
# `formats` and argument errors start fast (no polars, no pyarrow).
COMMANDS: dict[str, str] = {
    "brief": "a plain-language summary in at most 15 lines: the capture, where the GPU time goes, the top fixes",
    "summary": "per-kernel GPU time table (calls, total, mean, min, max, median, share)",
    "analyze": "one-page diagnosis: GPU busy/idle and why, kernel categories, launch delay, syncs, memcpy",
    "advise": "what to fix first: findings (rules with evidence and advice) sorted by GPU time at stake",
    "compile-check": "torch.compile: compiled regions per step, graph breaks, recompiles, fused Triton kernels",
    "kernels": "per-kernel launch configuration, occupancy and limiter; --metrics joins an Nsight Compute CSV",
    "ncu": "an Nsight Compute CSV on its own: per-kernel SM/memory throughput, occupancy, findings, ncu's rules",
    "ops": "per operator: calls, CPU total/self time, GPU time of the kernels it launched (inclusive and self)",
    "efficiency": "per operator and shape: FLOP/s, bytes/s, percent of the GPU's peak, compute or memory bound",
    "tree": "GPU time by nn.Module / annotation / op / kernel, as a tree",
    "lines": "GPU time by the line of your Python code that launched it (with_stack traces)",
    "steps": "per ProfilerStep: wall, GPU busy, kernel, memcpy, communication and idle time; slowest step marked",
    "critical-path": "the chain of dependent work that bounds each step, its breakdown by kind, and what-ifs",
    "diff": "compare two traces (NEW - BASE): headline figures, kernels, operators; regression gates for CI",
    "ranks": "compare the per-rank traces of a multi-GPU job: time per rank, spread, straggler, collective skew",
    "compare": "the same model on three or more GPUs or frameworks: operators and shapes side by side, the fastest",
    "memory": "memory per device from profile_memory traces or allocator snapshots: peak, who allocates, live at end",
    "report": "self-contained HTML report: timeline, kernels, categories, steps, ops -> kernels, launch delay, memcpy",
    "history": "run history in SQLite / PostgreSQL: add traces, list, show trends, check for regressions, report",
    "drift": "a long run sampled in windows (opscope run --every): what drifted, from which window, how fast",
    "export": "export folded op -> kernel stacks (--folded) or a trimmed trace (-o FILE.json[.gz]) for Perfetto",
    "run": "profile an unmodified Python script (in this process) and print where the time went",
    "bench": "compare strategies (torch.compile, autocast, channels_last) for a model: latency, key op, utilization",
    "demo": "the main job on a built-in example: profile a tiny diffusion denoiser, print summary and diagnosis",
    "formats": "list the trace formats opscope reads",
    "cache": "the trace cache: what it holds and its size bound (info), removing it (prune, clear)",
    "mcp": "serve these commands to coding agents over the Model Context Protocol (stdio; needs opscope[mcp])",
}

# `opscope --help` lists the commands in these groups, in this order (issue 30), each command under the group
# its name maps to, in COMMANDS order. Every command needs a group (tests/test_cli_help.py); a name may come
# before its command exists and is listed only once it does.
GROUP_TITLES: dict[str, str] = {
    "read": "read & explain a trace",
    "compare": "compare & monitor",
    "capture": "capture: profile your code (needs the torch or jax extra)",
    "output": "output: reports, exports, agents",
}
GROUP: dict[str, str] = {
    "brief": "read",
    "summary": "read",
    "analyze": "read",
    "advise": "read",
    "lines": "read",
    "compile-check": "read",
    "kernels": "read",
    "ncu": "read",
    "ops": "read",
    "efficiency": "read",
    "tree": "read",
    "steps": "read",
    "critical-path": "read",
    "memory": "read",
    "formats": "read",
    "cache": "read",
    "diff": "compare",
    "ranks": "compare",
    "compare": "compare",
    "history": "compare",
    "drift": "compare",
    "run": "capture",
    "bench": "capture",
    "demo": "capture",
    "report": "output",
    "export": "output",
    "mcp": "output",
}
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("opscope demo", "profile a tiny model on this machine: summary, diagnosis and an HTML report"),
    ("opscope summary trace.pt.trace.json.gz", "GPU time by kernel"),
    ("opscope advise ./trace_logs", "what to fix first, in the newest trace of a folder"),
    ("opscope report trace.json.gz", "a self-contained HTML report, written beside the trace"),
    ("opscope diff base.json.gz new.json.gz", "what changed between two runs"),
    ("opscope run train.py", "profile a script as it is, then say where the time went"),
    ("opscope COMMAND --help", "the options of one command"),
)


def command_module(name: str) -> ModuleType:
    return importlib.import_module(f"opscope.cli.{name.replace('-', '_')}")


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"opscope: {record.levelname.lower()}: {record.getMessage()}"


def _setup_logging(quiet: bool) -> None:
    logger = logging.getLogger("opscope")
    logger.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR if quiet else logging.WARNING)
    logger.propagate = False


class VersionAction(argparse.Action):
    """`--version`: `version_info.version_text()`, computed only when asked (it reads the native core's file)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object
    ) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=str(kwargs.get("help", ""))
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from opscope.version_info import version_text

        sys.stdout.write(version_text() + "\n")
        parser.exit()


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in `argv` (if any) is imported and given its options."""
    parser = OneLineParser(
        prog="opscope",
        description="Where does the GPU time go? Operator by operator, kernel by kernel.",
        epilog=grouped_commands(COMMANDS, GROUP, GROUP_TITLES, EXAMPLES),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version",
        action=VersionAction,
        help="the version, the native core's build, the Python and the extras installed (for bug reports)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no warnings on standard error")
    sub = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        help="one of the commands below; opscope COMMAND --help: its options",
    )
    wanted = _command_in(argv)
    parser.help_for = f"opscope {wanted}" if wanted else None
    for name, text in COMMANDS.items():
        # no help=: argparse would list every command flat; the epilog lists them by group
        child = sub.add_parser(name, description=text)
        if name == wanted:
            module = command_module(name)
            module.prepare_parser(child)
            child.set_defaults(_run=module.run, _command=name)
    return parser


def _command_in(argv: Sequence[str] | None) -> str | None:
    """The subcommand argparse will pick: the first argument that is not a global option."""
    for arg in sys.argv[1:] if argv is None else argv:
        if arg in COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse prints its own one-line usage error
        return int(exc.code or 0)
    _setup_logging(getattr(args, "quiet", False))
    _single_threaded_blas(getattr(args, "_command", None))  # `args.command` is the script of `run`
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    previous = _on_sigterm()
    guard = None
    try:
        # before polars, pyarrow or the reader's threads start: they size their pools and arenas then
        address_space.prepare(runs_user_code=getattr(args, "_command", None) in RUNS_USER_CODE)
        allocator.prepare()
        guard = _memory_guard(args)
        _head_start(args)
        with stage_progress(args, f"opscope {getattr(args, '_command', None) or 'command'}"):
            code = int(args._run(args))
        if code == 0:
            from opscope.cli.validity import strict_failure

            strict_failure(args)  # --strict: an error-level validity check fails the command after its output
        return code
    except Terminated:
        print("opscope: terminated", file=sys.stderr)
        return 143
    except OpscopeError as exc:
        print(f"opscope: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opscope: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug (or memory ran out): still one line, with a way to get the traceback
        return _failed(exc)
    except BaseException as exc:  # a Rust panic that crossed into Python (pyo3's PanicException)
        if type(exc).__name__ != "PanicException":
            raise
        return _failed(exc)
    finally:
        if guard is not None:
            guard.stop()
        headstart.cancel()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _failed(exc: BaseException) -> int:
    """One line for an exception no `OpscopeError` explains: out of memory (exit 2), else a bug (exit 3)."""
    out_of_memory = address_space.failure_message(exc)
    if out_of_memory is not None:
        print(f"opscope: error: {out_of_memory}", file=sys.stderr)
        return OutOfMemory.exit_code
    if os.environ.get("OPSCOPE_DEBUG"):
        raise exc
    print(
        f"opscope: internal error: {type(exc).__name__}: {visible(str(exc))} (set OPSCOPE_DEBUG=1 for the "
        "traceback)",
        file=sys.stderr,
    )
    return 3


GUARDED: list[bool] = []  # set by `entry`: a command of the console script runs under the memory guard


def _memory_guard(args: argparse.Namespace) -> memory_guard.Guard | None:
    """The memory guard of a command run from the console script (`cli/memory_guard.py`), started; None for
    a `main` called in-process (a test, a notebook: `os._exit` would end the caller too) or a command that
    runs the user's code (its memory is the user's)."""
    if not GUARDED or getattr(args, "_command", None) in RUNS_USER_CODE:
        return None
    names = [getattr(args, n, None) for n in ("trace", "traces", "base", "new")]
    paths = [p for n in names for p in (n if isinstance(n, list) else [n]) if isinstance(p, str) and p]
    guard = memory_guard.Guard(lambda: memory_guard.describe_traces([p for p in paths if os.path.isfile(p)]))
    stage("starting")  # what the guard names until the command announces a stage of its own
    guard.start()
    return guard


def _head_start(args: argparse.Namespace) -> None:
    """Start the native reader on the command's one trace while the command imports (`ingest.headstart`)."""
    trace = getattr(args, "trace", None)
    if isinstance(trace, list):
        trace = trace[0] if len(trace) == 1 else None
    if isinstance(trace, str) and trace:
        headstart.begin(trace, cache=not getattr(args, "no_cache", False))


# Commands that run the user's code (a script, a model), whose numpy may need its BLAS threads.
RUNS_USER_CODE = frozenset({"run", "bench", "demo"})


def _single_threaded_blas(command: str | None) -> None:
    """opscope does no linear algebra, but numpy's OpenBLAS starts a thread per core at import that spins
    for a while: ~3% of the CPU of a cold `summary` on 2 cores, taken from the reader's threads. Asked for
    one thread unless the user set it, numpy is already loaded (too late), or the command runs user code."""
    if command is None or command in RUNS_USER_CODE or "numpy" in sys.modules:
        return
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that every cleanup runs (a cache file being written is removed)."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def _on_sigterm() -> Any:
    """Install the SIGTERM handler for the run (main thread only); returns the previous one to restore."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def entry() -> None:
    """The console script (and `python -m opscope`): under `ulimit -v` the command runs in a watched child, so
    an allocation that aborts inside Rust still ends with one line and exit 2 (`cli/supervise.py`)."""
    from opscope.cli import supervise

    if supervise.wanted():
        sys.exit(supervise.run())
    GUARDED.append(True)
    with native_noise.filtered():
        code = main()
    sys.exit(code)
