"""Analysis results kept beside the trace cache: frames that depend on the events alone (the link table), so a
second command on the same trace reads them instead of recomputing them (issue 25).

A `DerivedStore` belongs to one cache file (`<digest>.parquet`); its results live in `<digest>.parquet.derived/
<key>/` as one Parquet file per frame plus a `stamp`: the cache file's size, modification time and inode and the
store's version. The cache file is rewritten whenever the trace changes, so a stamp that no longer matches means
the results are stale and they are recomputed. Everything here is best effort: a result that cannot be read or
written is simply computed (never an error), and files are written under a temporary name (one per save: two
saves of one key at once never share one) and renamed into place, so a reader never sees half of one. The
analysis that owns a key puts a tag of its own code into the key (analysis/base/linking.py), so results of
other code are not read either; saving a result removes those of other code under the same name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from opscope._version import __version__

if TYPE_CHECKING:  # polars is imported when a result is read or written, not when a trace is opened
    import polars as pl

STORE_VERSION = 1
_PENDING: list[tuple[Path, threading.Thread]] = []  # the saves under way: (the key's folder, the writer)
_LOCK = threading.Lock()
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")


def derived_folder(parquet: Path) -> Path:
    return parquet.with_name(parquet.name + ".derived")


class DerivedStore:
    """Frames of named results beside one cache file (see the module doc)."""

    def __init__(self, parquet: Path) -> None:
        self.parquet = parquet
        self.folder = derived_folder(parquet)

    def _stamp(self) -> str:
        stat = self.parquet.stat()
        return f"{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}|v{STORE_VERSION}|{__version__}"

    def _key_folder(self, key: str) -> Path:
        if not key or not set(key) <= _NAME_OK:
            raise ValueError(f"derived key {key!r}: lower-case letters, digits, '-', '_', '.' only")
        return self.folder / key

    def load(self, key: str) -> dict[str, pl.DataFrame] | None:
        """The frames stored under `key` for the cache file as it is now, or None (after any save of the same
        key under way in this process: other keys' saves go on)."""
        try:
            where = self._key_folder(key)
            wait_for_saves(where)
            if (where / "stamp").read_text(encoding="utf-8") != self._stamp():
                return None
            import polars as pl

            return {part.stem: pl.read_parquet(part) for part in sorted(where.glob("*.parquet"))}
        except Exception:  # missing, stale, damaged: computed afresh
            return None

    def save(self, key: str, frames: dict[str, pl.DataFrame]) -> None:
        """Store `frames` under `key` (best effort: a full disk or a read-only cache folder is no error). The
        files are written on a thread of their own while the command goes on (polars writes without the GIL);
        the interpreter waits for it before it exits, and `load` waits for it first."""
        thread = threading.Thread(target=self._save, args=(key, frames), name="opscope-derived-save")
        with _LOCK:
            _PENDING.append((self.folder / key, thread))
        thread.start()

    def _save(self, key: str, frames: dict[str, pl.DataFrame]) -> None:
        try:
            where = self._key_folder(key)
            stamp = self._stamp()
        except (OSError, ValueError):
            return
        # one temporary folder per save: two saves of one key at once (`diff A A`: each trace's task keeps its
        # advice) would otherwise write into, and remove, the same folder
        tmp = self.folder / f".tmp-{os.getpid()}-{threading.get_ident()}-{key}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for name, frame in frames.items():
                frame.write_parquet(tmp / f"{name}.parquet", compression="lz4", statistics=False)
            (tmp / "stamp").write_text(stamp, encoding="utf-8")
            shutil.rmtree(where, ignore_errors=True)
            os.replace(tmp, where)
        # BaseException: Ctrl-C stops polars' queries in every thread, this one's write included (a
        # KeyboardInterrupt here). The main thread says "interrupted"; this one only gives up the result
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            return
        self._drop_other_tags(key)

    def _drop_other_tags(self, key: str) -> None:
        """Remove the results stored under the same name by other code (`<name>-<tag>` with another tag): this
        code never reads them, and each is as large as the result (a link table: ~120 MB for the 1 GB benchmark
        trace), so every change of the analysis code would otherwise leave one more behind."""
        name, dash, _ = key.rpartition("-")
        if not dash:
            return
        for other in self.folder.glob(f"{name}-*"):
            if other.name != key and other.name.rpartition("-")[0] == name and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)


def wait_for_saves(where: Path | None = None) -> None:
    """Block until every result being written (only those of the key folder `where`, when given) has been
    written (or given up)."""
    with _LOCK:
        pending = [thread for folder, thread in _PENDING if where is None or folder == where]
        _PENDING[:] = [(folder, thread) for folder, thread in _PENDING if thread not in pending]
    for thread in pending:
        thread.join()


def remove_derived(parquet: Path) -> None:
    """Drop every result kept beside `parquet` (the cache file is being removed)."""
    with contextlib.suppress(OSError):
        shutil.rmtree(derived_folder(parquet))
