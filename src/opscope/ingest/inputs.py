"""Which file to read: a path, the newest trace in a folder, or the default log folder."""

from __future__ import annotations

import os
from pathlib import Path

from opscope.errors import InputError

TRACE_SUFFIXES = (".json", ".json.gz", ".sqlite", ".csv", ".csv.gz", ".json.xz", ".xplane.pb")
DEFAULT_DIR = "trace_logs"


def default_dir() -> Path:
    env = os.environ.get("PROFILER_LOG_DIR")
    return Path(env) if env else Path(DEFAULT_DIR)


def trace_files(folder: Path) -> list[Path]:
    files = []
    for entry in folder.iterdir():
        name = entry.name.lower()
        if entry.is_file() and not name.startswith(".") and name.endswith(TRACE_SUFFIXES):
            files.append(entry)
    return files


def newest_trace(folder: Path) -> Path:
    files = trace_files(folder)
    if not files:
        raise InputError(f"{folder}: no trace files ({', '.join('*' + s for s in TRACE_SUFFIXES[:3])}) in this folder")
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def resolve_input(path: str | os.PathLike[str] | None) -> Path:
    """A file as given; a folder's newest trace; with no argument, $PROFILER_LOG_DIR or ./trace_logs."""
    if path is None or str(path) == "":
        folder = default_dir()
        if not folder.is_dir():
            raise InputError(f"no trace given and no trace folder at {folder} (set $PROFILER_LOG_DIR or pass a path)")
        return newest_trace(folder)
    candidate = Path(path)
    if candidate.is_dir():
        return newest_trace(candidate)
    if not candidate.exists():
        raise InputError(f"{candidate}: no such file or folder")
    if not candidate.is_file():
        raise InputError(f"{candidate}: not a regular file")
    return candidate
