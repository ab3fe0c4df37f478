"""`opscope.load`, the public way in: `ingest.load` behind the API boundary.

Every failure of `load` is an `OpscopeError` (an `InputError` unless the reader raised a more specific one), so
a caller catches one type and the CLI prints one line: operating-system errors (permissions, a file where a
folder should be), decoding errors (`UnicodeError`), nesting too deep to decode (`RecursionError`) and whatever
else a reader raises (a polars, pyarrow, sqlite3 or msgspec error) are turned into `InputError`s that name the
path; only `MemoryError` and `KeyboardInterrupt` pass through. An empty path is an error, not a request for the default folder (that is
`None`). Numeric warnings from numpy while decoding (`RuntimeWarning: invalid value encountered in cast` for
out-of-range times) are never shown as Python warnings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.errors import InputError, OpscopeError
from opscope.ingest.inputs import resolve_input

if TYPE_CHECKING:
    from opscope.ingest.progress import ProgressCallback
    from opscope.model.trace import Trace


def load(
    path: str | os.PathLike[str] | None = None,
    *,
    cache: bool = True,
    strict: bool = False,
    progress: ProgressCallback | None = None,
) -> Trace:
    """Read a trace (a file, a folder's newest trace, or with `None` the default log folder: $PROFILER_LOG_DIR,
    else ./trace_logs) into a `Trace`.

    With `cache=True` the columnar table is kept in the cache folder and reused while the file is unchanged.
    Warnings (salvaged truncation, replaced bad UTF-8, ...) are logged and kept in `trace.meta.warnings`; with
    `strict=True` the first of them is raised as an `InputError` instead. `progress(done, total)` is called
    while the file is parsed. Raises `OpscopeError` (normally its subclass `InputError`) and nothing else but
    `KeyboardInterrupt` and `MemoryError`.
    """
    _check_path(path)
    if path is not None and str(os.fspath(path)) == "":
        raise InputError(
            "empty trace path (pass a file or a folder; None means $PROFILER_LOG_DIR or ./trace_logs)"
        )
    with input_errors(path):  # numpy's RuntimeWarnings are silenced where a reader parses (ingest.loader)
        return _ingest_load(path, cache=cache, strict=strict, progress=progress)


def _ingest_load(path: str | os.PathLike[str] | None, **options: Any) -> Trace:
    from opscope.ingest.loader import load as ingest_load

    return ingest_load(path, **options)


def _check_path(path: object) -> None:
    """`load(5)` is a usage slip, said in one line (it raised os.fspath's TypeError)."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise InputError(f"a trace path must be a string or a path, not {type(path).__name__}")


def resolve(path: str | os.PathLike[str] | None) -> Path:
    """The file `load(path)` would read (`ingest.resolve_input`), with the same errors as `load`."""
    _check_path(path)
    if path is not None and str(os.fspath(path)) == "":
        raise InputError("empty trace path (pass a file or a folder)")
    with input_errors(path):
        return resolve_input(path)


@contextmanager
def input_errors(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Turn what reading `path` may raise besides `OpscopeError` into an `InputError` naming the path."""
    where = "the default trace folder" if path is None else str(os.fspath(path))
    try:
        yield
    except (OpscopeError, MemoryError):
        raise
    except RecursionError:
        raise InputError(f"{where}: nested too deeply to read (a hostile or damaged trace?)") from None
    except UnicodeError as exc:
        raise InputError(f"{where}: cannot read: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{_os_error_path(exc, where)}: cannot read: {exc.strerror or exc}") from None
    except Exception as exc:
        # A reader met input it did not expect (polars, pyarrow, sqlite3, msgspec errors...): still the input,
        # not the caller's code. The cause stays chained for whoever debugs it from Python.
        text = " ".join(str(exc).split())
        raise InputError(f"{where}: cannot read this trace ({type(exc).__name__}: {text})") from exc


def _os_error_path(exc: OSError, where: str) -> str:
    name = exc.filename
    if name is None:
        return where
    return str(Path(os.fsdecode(name))) if isinstance(name, (str, bytes, os.PathLike)) else where
