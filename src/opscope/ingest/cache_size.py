"""The cache folder's size bound: the least recently used traces' tables go first.

Each trace read through the cache leaves an entry in the cache folder (`ingest/cache.py`): its table
(`<digest>.parquet`, about a sixth of the trace's JSON), the table's `.crc` and the analysis results kept beside
it (`<digest>.parquet.derived/`, up to as much again). Without a bound the folder only grows: every trace ever
opened stays, a moved or deleted one included. So after a new table is written, entries are removed, least
recently used first, until the folder holds at most `max_bytes()` ($OPSCOPE_CACHE_MAX, default 10 GB), as
ccache and sccache bound theirs. An entry's last use is the modification time of its `.crc` file, which every
cache hit touches (the table's own times key the analysis results beside it: they are never touched).

Entries used in the last `IN_USE_S` seconds are never removed, whatever the bound: another command may be
reading that table (its queries open the file again and again), so the folder may stay above the bound for that
long. Only the files this cache writes are ever removed (names that `_ENTRY` matches): a cache folder pointed at
a folder that holds other files loses none of them. Everything here is best effort: a file that cannot be
removed is left, never an error.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from opscope.ingest.derived import derived_folder, remove_derived

DEFAULT_MAX = "10G"
ENV = "OPSCOPE_CACHE_MAX"
IN_USE_S = 3600  # an entry used within the last hour is never removed (another command may be reading it)
PRUNE_EVERY_S = 60  # a cache folder is measured and pruned at most this often (`prune_to_bound`)
PRUNED = ".pruned"  # the file whose time says when the folder was last pruned
_ENTRY = re.compile(r"[0-9a-f]{24}\.parquet")  # `cache.cache_path`: the first 24 hex digits of a SHA-256
_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_NO_BOUND = frozenset({"none", "off", "unlimited"})


@dataclass(frozen=True)
class Entry:
    """One trace's files in the cache folder."""

    table: Path  # <digest>.parquet (it may be gone: the results of a removed table, left behind)
    table_bytes: int  # the table and its .crc
    derived_bytes: int  # the analysis results kept beside it
    last_used: float  # seconds since the epoch

    @property
    def bytes(self) -> int:
        return self.table_bytes + self.derived_bytes


def parse_size(text: str) -> int | None:
    """Bytes from `10G`, `500M`, `2.5GB`, `8GiB`, `1000000` (K/M/G/T: powers of 1000; Ki/Mi/Gi/Ti: of 1024);
    None for `none`, `off` or `unlimited` (no bound). ValueError for anything else."""
    clean = text.strip().lower()
    if clean in _NO_BOUND:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)b?", clean)
    if match is None or (match.group(3) and not match.group(2)):
        raise ValueError(f"{text!r} is not a size: use e.g. 10G, 500M, 8GiB or none")
    number, unit, binary = match.groups()
    scale = 1024 ** " kmgt".index(unit) if binary else _UNITS[unit]
    return int(float(number) * scale)


def max_bytes() -> int | None:
    """The bound: $OPSCOPE_CACHE_MAX, else DEFAULT_MAX; None: no bound. ValueError for a setting that is not a
    size."""
    setting = os.environ.get(ENV, "").strip()
    try:
        return parse_size(setting or DEFAULT_MAX)
    except ValueError as exc:
        raise ValueError(f"{ENV}: {exc}") from None


def touch(table: Path) -> None:
    """Mark the entry of `table` as used now (a cache hit)."""
    with contextlib.suppress(OSError):
        os.utime(crc_path(table))


def entries(folder: Path) -> list[Entry]:
    """The entries of the cache folder, least recently used first."""
    try:
        names = {p.name for p in folder.iterdir()}
    except OSError:
        return []
    tables = {n for n in names if _ENTRY.fullmatch(n)}
    # results whose table is gone (removed by hand, or a process killed between the two removals)
    tables |= {n.removesuffix(".derived") for n in names if _ENTRY.fullmatch(n.removesuffix(".derived"))}
    found = [_entry(folder / name) for name in tables]
    return sorted(found, key=lambda e: (e.last_used, e.table.name))


def prune(folder: Path, limit: int, keep: Iterable[Path] = (), now: float | None = None) -> list[Entry]:
    """Remove entries, least recently used first, until the folder holds at most `limit` bytes; never those
    in `keep` nor those used in the last IN_USE_S seconds. The removed entries."""
    now = time.time() if now is None else now
    kept = {Path(p).name for p in keep}
    found = entries(folder)
    total = sum(e.bytes for e in found)
    removed = []
    for entry in found:
        if total <= limit:
            break
        if entry.table.name in kept or now - entry.last_used < IN_USE_S:
            continue
        remove_table(entry.table)
        total -= entry.bytes
        removed.append(entry)
    return removed


def prune_to_bound(folder: Path, keep: Path, now: float | None = None) -> list[Entry]:
    """`prune` to the configured bound (nothing without one, or with a setting that is not a size: reading
    a trace never fails for the cache's sake), at most once per PRUNE_EVERY_S in a folder: measuring it
    reads every entry, so `history add` of a thousand new traces would otherwise read the folder a thousand
    times (quadratic); between two prunes it may pass its bound by what a minute adds."""
    try:
        limit = max_bytes()
    except ValueError:
        return []
    if limit is None:
        return []
    now = time.time() if now is None else now
    marker = folder / PRUNED
    try:
        if now - marker.stat().st_mtime < PRUNE_EVERY_S:
            return []
    except OSError:  # never pruned (or the marker cannot be read): prune
        pass
    with contextlib.suppress(OSError):
        marker.touch()
        os.utime(marker, (now, now))
    return prune(folder, limit, keep=(keep,), now=now)


def remove_table(table: Path) -> None:
    """Remove a cache table, its .crc and the results kept beside it (whichever are there); best effort."""
    for path in (table, crc_path(table)):
        with contextlib.suppress(OSError):
            path.unlink()
    remove_derived(table)


def _entry(table: Path) -> Entry:
    table_bytes, times = 0, []
    for path in (crc_path(table), table):  # the .crc's time first: the last use (`touch`)
        try:
            stat = path.stat()
        except OSError:
            continue
        table_bytes += stat.st_size
        times.append(stat.st_mtime)
    derived_bytes, written = 0, 0.0
    for root, _, files in os.walk(derived_folder(table)):
        for name in files:
            with contextlib.suppress(OSError):
                stat = os.stat(os.path.join(root, name))
                derived_bytes += stat.st_size
                written = max(written, stat.st_mtime)
    # without a table, the results' own times say when they were last written
    return Entry(table, table_bytes, derived_bytes, times[0] if times else written)


def crc_path(table: Path) -> Path:
    """The file beside a table that holds its CRC-32 (`cache.read_cached` checks it); its time: the last use."""
    return table.with_name(table.name + ".crc")
