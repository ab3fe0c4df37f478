"""Under an address-space limit, the command runs in a child process that this one watches (issue 32 item 6).

An allocation that fails inside Rust code (polars, the native reader) calls Rust's allocation-error handler,
which prints "memory allocation of N bytes failed" and aborts the process (SIGABRT): no Python code runs, so
the CLI's one-line error and exit code 2 cannot come from the process that failed. When `ulimit -v` is set
(where such failures happen: without a limit the kernel's OOM killer acts instead), `entry` re-runs the same
command line in a child with `CHILD_VARIABLE` set and waits. The child inherits the terminal (stdin, stdout,
stderr: progress lines and colours behave as before) and the process group (Ctrl-C reaches it directly); the
parent ignores SIGINT while it waits and passes SIGTERM and SIGHUP on. A child that aborted ends with the
usual `opscope: error: out of memory: ...` line and exit 2; any other exit status passes through (a signal N
as 128 + N, as the shell reports it). Without a limit nothing changes: the command runs in this process.

The parent imports nothing heavy (no polars, no native reader), so it reserves little of the limit itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import FrameType

from opscope.analysis.base.parallel import address_limit
from opscope.errors import OutOfMemory

CHILD_VARIABLE = "OPSCOPE_SUPERVISED"  # set in the child: run the command, do not supervise again


def wanted() -> bool:
    """Whether this process should run the command in a watched child: an address-space limit is set, this is
    not already the child, and the platform has fork/exec semantics (POSIX)."""
    return os.name == "posix" and not os.environ.get(CHILD_VARIABLE) and address_limit() is not None


def child_command() -> list[str]:
    """This process's own command line (the console script, `python -m opscope` or `python -c ...`), run by
    the same interpreter."""
    return [sys.executable, *sys.orig_argv[1:]]


def run(command: list[str] | None = None) -> int:
    """Run `command` (default: this process's command line) as the watched child; its exit code for ours."""
    env = {**os.environ, CHILD_VARIABLE: "1"}
    if not env.get("OPSCOPE_DEBUG"):
        env.pop("RUST_BACKTRACE", None)  # the abort's backtrace is noise above the one-line error
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    child = subprocess.Popen(command or child_command(), env=env)  # our own command line

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends Ctrl-C to the child too
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGHUP, forward)
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return exit_code(code)


def exit_code(code: int) -> int:
    """The parent's exit code for the child's return code (`Popen.returncode`: -N for a signal N)."""
    if code == -signal.SIGABRT:
        print(f"opscope: error: {abort_message()}", file=sys.stderr, flush=True)
        return OutOfMemory.exit_code
    return 128 - code if code < 0 else code


def abort_message() -> str:
    limit = address_limit()
    where = f" under the address-space limit of {limit >> 20} MiB (ulimit -v)" if limit is not None else ""
    return str(
        OutOfMemory(
            f"out of memory: an allocation failed in the native code{where}; raise the limit or read a "
            "smaller trace"
        )
    )
