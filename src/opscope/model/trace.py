"""`Trace`: the event table of one trace plus its metadata.

The table may live in memory or in a Parquet file (the cache) that is scanned lazily, so that a multi-GB trace
never has to be resident all at once: analyses ask for `lazy()` and select only the columns they need.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, TypeVar, cast

import polars as pl

from opscope.model.meta import TraceMeta
from opscope.model.schema import COLUMNS, GPU_KINDS, Col

T = TypeVar("T")


class DerivedFrames(Protocol):
    """Frames kept between commands under a key (implemented beside the cache: ingest/derived.py)."""

    def load(self, key: str) -> dict[str, pl.DataFrame] | None: ...

    def save(self, key: str, frames: dict[str, pl.DataFrame]) -> None: ...


def gpu_activity() -> pl.Expr:
    """The rows that are GPU activity: kernels, memcpys and memsets with a duration (docs/metrics.md)."""
    return pl.col(Col.KIND).is_in(list(GPU_KINDS)) & pl.col(Col.DUR_NS).is_not_null()


@dataclass
class Trace:
    """One trace. Build it with `opscope.load(path)`; read it with `events`, `lazy()` or `to_pandas()`."""

    meta: TraceMeta
    _frame: pl.DataFrame | None = None
    _parquet: Path | None = None
    _keepalive: object | None = field(default=None, repr=False)  # owns a temporary file when uncached
    # Results that depend on the events alone (the link table, step windows, synchronising calls), computed
    # once per Trace and shared by every analysis of one command (`derived`).
    _derived: dict[str, object] = field(default_factory=dict, repr=False, compare=False)
    # One lock per key of `_derived`: two threads asking for the same result compute it once
    _computing: dict[str, threading.RLock] = field(default_factory=dict, repr=False, compare=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    # Where results of `persisted` survive the command: beside the trace cache (ingest/derived.py); None for a
    # trace read without the cache.
    _store: DerivedFrames | None = field(default=None, repr=False, compare=False)
    # `with_durations`: (row, dur_ns) read in place of those rows' recorded durations, and the trace as
    # recorded (what the validity checks read)
    _durations: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    _recorded: Trace | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict[str, object]:
        """Pickled without its locks (they cannot be; a copy gets its own)."""
        state = dict(self.__dict__)
        state.pop("_computing", None)
        state.pop("_guard", None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.__dict__["_computing"] = {}
        self.__dict__["_guard"] = threading.Lock()

    @classmethod
    def from_frame(cls, meta: TraceMeta, frame: pl.DataFrame) -> Trace:
        return cls(meta=meta, _frame=frame)

    @classmethod
    def from_parquet(
        cls, meta: TraceMeta, path: Path, keepalive: object | None = None, store: DerivedFrames | None = None
    ) -> Trace:
        return cls(meta=meta, _parquet=path, _keepalive=keepalive, _store=store)

    def lazy(self) -> pl.LazyFrame:
        """The events as a LazyFrame (columns are read on demand). Device work of a category opscope does not
        know (`meta.device_like`) reads as kernels."""
        if self._frame is not None:
            return self._frame.lazy()
        assert self._parquet is not None
        frame = pl.scan_parquet(self._parquet)
        if self.meta.device_like:
            from opscope.model.device_work import as_device_work

            frame = as_device_work(frame, self.meta.device_like)
        if self._durations is not None:
            frame = _replace_durations(frame, self._durations)
        return frame

    def with_durations(self, durations: pl.DataFrame, repair: str, note: str) -> Trace:
        """This trace read with `durations` (columns row, dur_ns: a row's position in the event table) in place
        of those rows' recorded durations: a repaired reading (`--repair overlaps`). `repair` names it (the
        results kept beside the cache are kept apart under that name: lower-case letters, digits, '.', '-',
        '_'); `note` says what changed, in `meta.repairs` and `meta.warnings`. `recorded` is the trace as
        recorded."""
        frame = None
        if self._frame is not None:
            frame = _replace_durations(self._frame.lazy(), durations).collect()
        return Trace(
            meta=replace(
                self.meta,
                repairs=(*self.meta.repairs, note),
                warnings=(*self.meta.warnings, note),
            ),
            _frame=frame,
            _parquet=self._parquet if frame is None else None,
            _keepalive=self._keepalive,
            _store=None if self._store is None else _Prefixed(self._store, f"{repair}."),
            _durations=None if frame is not None else durations,
            _recorded=self.recorded,
        )

    @property
    def recorded(self) -> Trace:
        """The trace as recorded: itself, or for a repaired reading (`with_durations`) the trace it repairs."""
        return self._recorded if self._recorded is not None else self

    def derived(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()` the first time `key` is asked for on this trace, the same result after that: for the
        primitives every analysis reads (the link table, step windows, synchronising calls), which depend on
        the events alone, so that one command computes each once however many analyses it runs. Thread-safe:
        a thread asking for a result another thread is computing waits for it (the report's critical path
        runs beside its advice, and both read the step windows). Results depend on each other without cycles,
        so threads that wait for each other's keys cannot deadlock."""
        if key in self._derived:
            return cast(T, self._derived[key])
        with self._guard:
            lock = self._computing.setdefault(key, threading.RLock())
        with lock:
            if key not in self._derived:
                self._derived[key] = compute()
        return cast(T, self._derived[key])

    def has_derived(self, key: str) -> bool:
        """Whether `derived(key, ...)` has been computed on this trace."""
        return key in self._derived

    def persisted(
        self,
        key: str,
        compute: Callable[[], T],
        encode: Callable[[T], dict[str, pl.DataFrame]],
        decode: Callable[[dict[str, pl.DataFrame]], T],
    ) -> T:
        """As `derived`, and kept beside the trace cache between commands: read from there when a result for
        this cache file exists (`decode`), else computed and stored (`encode`). Without a store (a trace read
        without the cache), or when a stored result cannot be decoded, it is computed; a result `encode`
        refuses (raises) is not stored."""

        def load_or_compute() -> T:
            if self._store is not None:
                frames = self._store.load(key)
                if frames is not None:
                    try:
                        return decode(frames)
                    except Exception:  # an older or damaged result: computed again below
                        pass
            value = compute()
            if self._store is not None:
                try:
                    frames = encode(value)
                except Exception:  # a value that cannot be kept (`encode` refuses it): computed each time
                    return value
                self._store.save(key, frames)
            return value

        return self.derived(key, load_or_compute)

    def persisted_frame(self, key: str, compute: Callable[[], pl.DataFrame]) -> pl.DataFrame:
        """`persisted` for a result that is one frame."""
        return self.persisted(key, compute, lambda frame: {"frame": frame}, lambda frames: frames["frame"])

    @property
    def events(self) -> pl.DataFrame:
        """All events as a polars DataFrame (materialised on first use)."""
        if self._frame is None:
            self._frame = self.lazy().collect()
        return self._frame

    def to_pandas(self):  # type: ignore[no-untyped-def]
        """All events as a pandas DataFrame (needs pandas: the `pandas` extra)."""
        from opscope.tables import polars_to_pandas

        return polars_to_pandas(self.events)

    @property
    def path(self) -> str:
        return self.meta.path

    def gpu_events(self) -> pl.LazyFrame:
        """Kernels, memcpys and memsets with a duration."""
        return self.lazy().filter(gpu_activity())

    def count(self) -> int:
        if self._frame is not None:
            return self._frame.height
        return int(self.lazy().select(pl.len()).collect().item())

    @property
    def columns(self) -> list[str]:
        return list(COLUMNS)


_ROW = "__opscope_row"


def _replace_durations(frame: pl.LazyFrame, durations: pl.DataFrame) -> pl.LazyFrame:
    """`frame` with the durations of the rows in `durations` (row, dur_ns) replaced: one lookup per row."""
    if durations.height == 0:
        return frame
    return (
        frame.with_row_index(_ROW)
        .with_columns(
            pl.col(_ROW)
            .cast(pl.Int64)
            .replace_strict(
                durations["row"].cast(pl.Int64),
                durations[Col.DUR_NS].cast(pl.Int64),
                default=pl.col(Col.DUR_NS),
                return_dtype=pl.Int64,
            )
            .alias(Col.DUR_NS)
        )
        .drop(_ROW)
    )


@dataclass(frozen=True)
class _Prefixed:
    """A store of derived frames whose keys all start with `prefix` (a repaired reading's results apart from
    the recorded trace's)."""

    store: DerivedFrames
    prefix: str

    def load(self, key: str) -> dict[str, pl.DataFrame] | None:
        return self.store.load(self.prefix + key)

    def save(self, key: str, frames: dict[str, pl.DataFrame]) -> None:
        self.store.save(self.prefix + key, frames)
