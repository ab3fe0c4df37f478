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


def jax_run(folder: Path) -> Path | None:
    """The newest run of a JAX / TensorBoard profile folder: `folder/plugins/profile/<run>` (or `<run>` of
    `folder` itself when it is a `plugins/profile` folder); runs are named by their start time
    (YYYY_MM_DD_HH_MM_SS), so the newest is the greatest name. None for any other folder."""
    profile = folder / "plugins" / "profile"
    if not profile.is_dir():
        if folder.name != "profile" or folder.parent.name != "plugins":
            return None
        profile = folder
    runs = [entry for entry in profile.iterdir() if entry.is_dir() and not entry.name.startswith(".")]
    return max(runs, key=lambda p: (p.name, p.stat().st_mtime_ns)) if runs else None


def trace_files(folder: Path) -> list[Path]:
    """The traces in `folder` (in the newest run of a JAX profile folder). Where `.xplane.pb` files are present
    (a JAX run: one per host, beside the same events as `trace.json.gz`), only they are taken."""
    folder = jax_run(folder) or folder
    files = []
    for entry in folder.iterdir():
        name = entry.name.lower()
        if entry.is_file() and not name.startswith(".") and name.endswith(TRACE_SUFFIXES):
            files.append(entry)
    xplanes = [f for f in files if f.name.lower().endswith(".xplane.pb")]
    return xplanes or files


def newest_trace(folder: Path) -> Path:
    files = trace_files(folder)
    if not files:
        raise InputError(
            f"{folder}: no trace files ({', '.join('*' + s for s in TRACE_SUFFIXES[:3])}) in this folder"
        )
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.name))


def resolve_input(path: str | os.PathLike[str] | None) -> Path:
    """A file as given; a folder's newest trace; with no argument, $PROFILER_LOG_DIR or ./trace_logs."""
    if path is None or str(path) == "":
        folder = default_dir()
        if not folder.is_dir():
            raise InputError(
                f"no trace given and no trace folder at {folder} (set $PROFILER_LOG_DIR or pass a path)"
            )
        return newest_trace(folder)
    candidate = Path(path)
    if candidate.is_dir():
        return newest_trace(candidate)
    if not candidate.exists():
        raise InputError(f"{candidate}: no such file or folder")
    if not candidate.is_file():
        raise InputError(f"{candidate}: not a regular file")
    return candidate
