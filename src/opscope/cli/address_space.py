"""Running under an address-space limit (`ulimit -v`, RLIMIT_AS: common on CI runners and HPC login nodes).

The limit counts address space reserved, not memory used, and opscope's libraries reserve much more than they
use: pyarrow's mimalloc pool maps 1 GiB at its first allocation, glibc gives each thread that allocates an arena
of up to 64 MiB, and polars, rayon, pyarrow and the native reader each start a thread per core, each with its
stack. `analyze` of a 15 MB trace reserved 2.4 GB on 2 cores (~0.25 GB resident); on more cores, more. An
allocation that then fails in Rust code (polars, the native reader) aborts the process with SIGABRT and a
"memory allocation of N bytes failed" line, which Python cannot catch (issue 32: several commands aborted at
3-4 GB). So when the limit is set, `prepare` reserves less before any of those libraries starts: one thread
per GiB of the limit (at most one per core) for polars, rayon, pyarrow and the native reader, pyarrow's
allocations from the system allocator, glibc's arenas capped to the threads (about 0.6-0.8 GB reserved for the
commands above). A limit below `MINIMUM_BYTES` is refused with one line; allocation failures that Python sees
are one line too (`failure_message`). Without a limit nothing changes. docs/security.md ("Memory").
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

from opscope.analysis.base.parallel import address_limit
from opscope.errors import OutOfMemory

MINIMUM_BYTES = 1 << 30  # the libraries alone reserve ~0.5 GB before a trace is read
THREAD_SHARE_BYTES = 1 << 30  # one thread per GiB of the limit
M_ARENA_MAX = -8  # glibc's <malloc.h>
# Thread pools sized from the environment when they start: polars (read at its import), rayon, pyarrow's
# I/O pool, the native reader's decoding threads.
POOL_VARIABLES = ("POLARS_MAX_THREADS", "RAYON_NUM_THREADS", "ARROW_IO_THREADS", "OPSCOPE_WORKERS")
# How Rust's io::Error for ENOMEM reads once pyo3 made it an OSError (without its errno)
_RUST_ENOMEM = f"(os error {errno.ENOMEM})"


def prepare(runs_user_code: bool = False) -> None:
    """Reserve less under an address-space limit (the module's comment); a no-op without one. Called before
    polars, pyarrow or the native reader start. `runs_user_code`: the command runs the user's script or model,
    whose OpenMP threads (torch) are left alone."""
    limit = address_limit()
    if limit is None:
        return
    if limit < MINIMUM_BYTES:
        raise OutOfMemory(
            f"the address-space limit (ulimit -v) is {limit >> 20} MiB; opscope needs at least "
            f"{MINIMUM_BYTES >> 20} MiB"
        )
    threads = max(1, min(os.cpu_count() or 1, limit // THREAD_SHARE_BYTES))
    for name in POOL_VARIABLES:
        os.environ.setdefault(name, str(threads))
    if not runs_user_code:
        os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # pyarrow's CPU pool reads it
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    _cap_malloc_arenas(max(2, threads))


def _cap_malloc_arenas(arenas: int) -> None:
    """glibc's M_ARENA_MAX through mallopt(3), for the threads started from now on ($MALLOC_ARENA_MAX is read
    once, when the process starts: too late here). Nothing on other C libraries."""
    if not sys.platform.startswith("linux"):
        return
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas)
    except (AttributeError, OSError, ValueError):
        return


def failure_message(exc: BaseException) -> str | None:
    """The one-line message when `exc` is a failure to allocate memory (or to start a thread for want of it);
    None for anything else."""
    enomem = isinstance(exc, OSError) and (exc.errno == errno.ENOMEM or _RUST_ENOMEM in str(exc))
    if isinstance(exc, MemoryError) or enomem:
        what = "an allocation failed"
    elif type(exc).__name__ == "PanicException" and "failed to spawn thread" in str(exc):
        what = "a thread could not be started"  # a Rust thread's stack, under the limit
    else:
        return None
    return str(OutOfMemory(f"out of memory: {what}{_limit_text()}"))


def _limit_text() -> str:
    limit = address_limit()
    if limit is None:
        return ""
    return (
        f" under the address-space limit of {limit >> 20} MiB (ulimit -v); raise it or read a smaller trace"
    )
