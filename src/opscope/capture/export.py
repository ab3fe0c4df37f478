"""Writing a finished profiling cycle to disk as `*.pt.trace.json.gz`, atomically.

torch exports Chrome-trace JSON; we export into a hidden temporary file in the log folder, gzip it (ISA-L) into
a hidden partial file and rename that into place, so a reader never sees a half-written trace and a crash during
the export leaves no file that looks complete. The name follows `tensorboard_trace_handler`
(`<host>_<pid>.<time_ns>.pt.trace.json.gz`), which TensorBoard and HolisticTraceAnalysis also recognise.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from isal import igzip

from opscope.errors import UsageError
from opscope.ingest.inputs import default_dir

SUFFIX = ".pt.trace.json.gz"


def log_dir(path: str | os.PathLike[str] | None) -> Path:
    """The folder traces go to: `path`, else $PROFILER_LOG_DIR, else ./trace_logs (created if missing)."""
    folder = (Path(path) if path is not None else default_dir()).absolute()  # the code may chdir later
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot create the trace folder: {exc.strerror or exc}") from None
    return folder


def worker_name() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


def write_trace(profiler: Any, folder: Path, worker: str | None = None) -> Path:
    """Export `profiler` (a stopped `torch.profiler.profile` cycle) to `folder`; returns the trace's path."""
    final = folder / f"{worker or worker_name()}.{time.time_ns()}{SUFFIX}"
    partial = folder / f".{final.name}.partial"
    fd, raw = tempfile.mkstemp(prefix=".opscope-export-", suffix=".json", dir=folder)
    os.close(fd)
    try:
        profiler.export_chrome_trace(raw)
        with open(raw, "rb") as src, igzip.open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(partial, final)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot write the trace: {exc.strerror or exc}") from None
    finally:
        for leftover in (raw, partial):
            Path(leftover).unlink(missing_ok=True)
    return final
