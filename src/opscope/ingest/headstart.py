"""A head start for the native reader while Python imports.

A command that reads one trace spends its first ~0.3 s importing polars, pyarrow and its analysis modules
before it asks for the first batch, on one core, while the others idle. `begin(path)`, called by the CLI as soon
as the arguments are parsed, starts the native Kineto reader on the file then, so that its threads decompress,
scan and decode the beginning of the trace during the imports; `take(path)` hands it to the Kineto reader when
that asks for the same file, unchanged; `cancel()` drops one nobody took (its threads stop at their next
hand-over). It starts nothing where the head start could not be used: another reader chosen
(`$OPSCOPE_READER`), a cached trace, a file that is not Kineto JSON, or `$OPSCOPE_HEADSTART=0`.

Only light modules are imported here (the point is to run before the heavy ones), and nothing here raises: a
file that cannot be read is left to the normal path, which reports it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_Key = tuple[str, int, int, int]
_started: tuple[_Key, Any] | None = None


def _key(path: Path) -> _Key | None:
    try:
        st = path.stat()
        return (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    except OSError:
        return None


def enabled() -> bool:
    """Not switched off, and the native reader in use (a wrong `$OPSCOPE_READER` is the normal path's error)."""
    from opscope.errors import InputError
    from opscope.ingest.registry import reader_name

    if os.environ.get("OPSCOPE_HEADSTART", "").strip() == "0":
        return False
    try:
        return reader_name() == "native"
    except InputError:
        return False


def workers() -> int | None:
    """`$OPSCOPE_WORKERS` when it is a positive number (the native reader's decoding threads), else None."""
    value = os.environ.get("OPSCOPE_WORKERS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def begin(path: str | os.PathLike[str] | None, cache: bool = True) -> None:
    """Start reading `path` now if the Kineto reader will read it (see the module's comment)."""
    global _started
    cancel()
    if path is None or not enabled():
        return
    source = Path(path)
    key = _key(source)
    if key is None or not source.is_file():
        return
    try:
        from opscope.ingest.cache import cache_path
        from opscope.ingest.registry import kineto_head
        from opscope.ingest.source import head_bytes

        if cache and cache_path(source).is_file():
            return  # most likely a cache hit: no parsing at all
        if not kineto_head(head_bytes(source)):
            return
        from opscope import _native

        _started = (key, _native.Reader(str(source), None, workers()))
    except Exception:  # the normal path reads the file again and reports what is wrong
        return


def take(path: Path) -> Any | None:
    """The reader started on `path` if the file is the one it was started on; None otherwise."""
    global _started
    started, _started = _started, None
    if started is None:
        return None
    if started[0] == _key(path):
        return started[1]
    return None


def cancel() -> None:
    """Drop a reader nobody took."""
    global _started
    _started = None
