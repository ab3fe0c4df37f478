"""A trimmed copy of a Chrome-trace / Kineto JSON file (some steps, devices, streams or a time window) that
Perfetto and chrome://tracing open, for sharing the interesting part of a multi-GB trace.

The source is streamed again through the reference reader's scanner (ingest/pyscan.py: whole events, bounded
memory, the same rules as the readers) and every kept event is copied byte for byte, so nothing the profiler
wrote is reformatted or lost; the other top-level values (deviceProperties, distributedInfo, ...) are copied
as they were, after the events array. Rules (docs/reports.md, "export"):

- metadata events (ph "M": process and thread names) are always kept;
- an event with a duration is kept when it overlaps one of the windows (ts < end and ts + dur > start; a
  zero-length one when start <= ts < end), an event without one when its ts lies in a window; overlapping
  events are kept whole, not cut;
- GPU activity (kernel, memcpy, memset, GPU annotation) on a device or stream not selected is dropped;
- flow events (ph s / t / f: launch arrows, forward -> backward links) are kept only when every event of
  the flow (same cat, name and id) is kept on its own and none sits on a process/thread that only holds
  dropped GPU activity, so no arrow points into nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import polars as pl

from opscope.analysis.base.window import trace_window
from opscope.analysis.base.windows import select_windows
from opscope.errors import OutputError, UsageError
from opscope.ingest.pyreader import BATCH_BYTES
from opscope.ingest.pyscan import Scanner
from opscope.ingest.source import ChunkReader
from opscope.model.schema import CATEGORY_KINDS, Col, Kind
from opscope.model.trace import Trace

GPU_EVENT_KINDS = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_ANNOTATION)
FLOW_PHASES = ("s", "t", "f")

try:
    from isal import igzip as _gzip
except ImportError:  # pragma: no cover
    import gzip as _gzip  # type: ignore[no-redef]  # level 2 is also valid for zlib


@dataclass(frozen=True)
class TrimSpec:
    windows: tuple[tuple[int, int], ...] | None = (
        None  # [start_ns, end_ns) pieces on the trace clock; None = all
    )
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    dropped_places: frozenset[tuple[str, str]] = field(
        default_factory=frozenset
    )  # (pid, tid) of dropped GPU work


@dataclass(frozen=True)
class TrimResult:
    events_in: int
    events_out: int
    flows_dropped: int  # flow events left out because another event of their flow was
    text_replaced: int = 0  # events kept with invalid UTF-8 replaced by U+FFFD (as the readers read them)


class _Placement(msgspec.Struct, gc=False):
    device: Any = None
    stream: Any = None


class LooseEvent(msgspec.Struct, gc=False):
    """The fields the filter looks at, every one untyped: it must accept whatever the file holds."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: msgspec.Raw = msgspec.Raw()


_LIGHT = msgspec.json.Decoder(list[LooseEvent], float_hook=str)
_ONE = msgspec.json.Decoder(LooseEvent, float_hook=str)
_PLACEMENT = msgspec.json.Decoder(_Placement)


def _decode(texts: list[bytes]) -> tuple[list[tuple[bytes, LooseEvent]], int]:
    """The events among `texts` (whole elements from the scanner) and how many had invalid UTF-8: such an
    element is kept with its bad bytes replaced by U+FFFD (the readers read it so, and the copy stays valid
    JSON); an element that does not decode otherwise is left out, as the readers leave it out."""
    try:
        return list(zip(texts, _LIGHT.decode(b"[" + b",".join(texts) + b"]"))), 0
    except (msgspec.DecodeError, RecursionError):
        pass
    out = []
    replaced = 0
    for text in texts:
        try:
            out.append((text, _ONE.decode(text)))
            continue
        except (msgspec.DecodeError, RecursionError):
            pass
        fixed = text.decode("utf-8", "replace").encode("utf-8")
        if fixed == text:
            continue
        try:
            out.append((fixed, _ONE.decode(fixed)))
            replaced += 1
        except (msgspec.DecodeError, RecursionError):
            continue
    return out, replaced


def to_ns(value: Any) -> int | None:
    """A JSON microsecond value (int, or float text as decoded here) to integer nanoseconds."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int((Decimal(value) * 1000).to_integral_value(ROUND_HALF_EVEN))
    except (InvalidOperation, ValueError, TypeError):
        return None


def _int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


class _Filter:
    def __init__(self, spec: TrimSpec) -> None:
        self.spec = spec

    def placed_out(self, ev: LooseEvent) -> bool:
        """GPU activity on a device or stream that is not selected."""
        spec = self.spec
        if not (spec.devices or spec.streams) or CATEGORY_KINDS.get(ev.cat) not in GPU_EVENT_KINDS:
            return False
        try:
            place = _PLACEMENT.decode(ev.args) if len(ev.args) else _Placement()
        except (msgspec.DecodeError, msgspec.ValidationError):
            place = _Placement()
        device = _int(place.device) if place.device is not None else _int(ev.pid)
        stream = _int(place.stream) if place.stream is not None else _int(ev.tid)
        return bool(
            (spec.devices and device not in spec.devices) or (spec.streams and stream not in spec.streams)
        )

    def in_window(self, ev: LooseEvent) -> bool:
        if self.spec.windows is None:
            return True
        ts = to_ns(ev.ts)
        if ts is None:
            return True
        dur = to_ns(ev.dur)
        for lo, hi in self.spec.windows:
            if dur is not None and dur > 0:
                if ts < hi and ts + dur > lo:
                    return True
            elif lo <= ts < hi:
                return True
        return False

    def keep(self, ev: LooseEvent) -> bool:
        if ev.ph == "M":
            return True
        if self.placed_out(ev):
            return False
        if ev.ph in FLOW_PHASES and (str(ev.pid), str(ev.tid)) in self.spec.dropped_places:
            return False
        return self.in_window(ev)


def _open_output(target: Path) -> BinaryIO:
    try:
        if target.name.endswith(".gz"):
            return _gzip.open(target, "wb", compresslevel=2)  # type: ignore[return-value]
        return open(target, "wb")
    except OSError as exc:
        raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from None


def trim_trace(source: Path, target: Path, spec: TrimSpec, display: str | None = None) -> TrimResult:
    """Write the events of `source` that `spec` keeps to `target` (gzip when it ends in .gz)."""
    scanner = Scanner(BATCH_BYTES)
    keep = _Filter(spec)
    flows: dict[tuple[Any, Any, Any], list[tuple[bytes, bool]]] = {}
    events_in = events_out = text_replaced = 0

    def batches() -> Any:
        for chunk in ChunkReader(source, report_progress=False):
            scanner.feed(chunk)
            yield from scanner.take_batches()
            if scanner.done():
                break
        scanner.finish()
        yield from scanner.take_batches()

    with _open_output(target) as raw_out:
        out = _Checked(raw_out, target)
        writer = _EventWriter(out)
        for batch in batches():
            decoded, replaced = _decode([text for text, flags in batch.elements if not flags])
            text_replaced += replaced
            for raw, ev in decoded:
                events_in += 1
                if ev.ph in FLOW_PHASES:
                    flows.setdefault((ev.cat, ev.name, ev.id), []).append((raw, keep.keep(ev)))
                elif keep.keep(ev):
                    writer.write(raw)
                    events_out += 1
        dropped = 0
        for members in flows.values():
            if all(kept for _, kept in members):
                for raw, _ in members:
                    writer.write(raw)
                events_out += len(members)
            else:
                dropped += sum(1 for _, kept in members if kept)
        writer.finish(scanner.outline.members)
        out.close()
    return TrimResult(
        events_in=events_in, events_out=events_out, flows_dropped=dropped, text_replaced=text_replaced
    )


class _Checked:
    """The output file, whose write errors (a full disk, /dev/full) are `OutputError`s naming it."""

    def __init__(self, out: BinaryIO, target: Path) -> None:
        self.out = out
        self.target = target

    def write(self, data: bytes | bytearray) -> int:
        try:
            return self.out.write(data)
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write: {exc.strerror or exc}") from None

    def close(self) -> None:
        """Close (flush what is buffered, write gzip's trailer) here, where an error is still an OutputError."""
        try:
            self.out.close()
        except OSError as exc:
            raise OutputError(f"{self.target}: cannot write: {exc.strerror or exc}") from None


class _EventWriter:
    """Writes the output document; buffers small writes (each event is a few hundred bytes)."""

    def __init__(self, out: _Checked) -> None:
        self.out = out
        self.buffer = bytearray(b'{"traceEvents": [')
        self.first = True

    def _put(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= 1 << 20:
            self.out.write(self.buffer)
            self.buffer.clear()

    def write(self, raw: bytes) -> None:
        if not self.first:
            self._put(b",\n")
        self._put(raw)
        self.first = False

    def finish(self, members: list[tuple[bytes, bytes]]) -> None:
        """Close the array, then the other top-level values of the source, each key and value as written."""
        self._put(b"]")
        for key, value in members:
            if key != b"traceEvents":
                self._put(b',\n"' + key + b'": ' + value)
        self._put(b"}")
        self.out.write(self.buffer)
        self.buffer.clear()


def windows_from_steps(spans: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, merged [start, end) pieces."""
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


MAX_WINDOW_US = 1e15  # about 31 years: any bound beyond is a typo, and 1e308 overflowed the arithmetic


def parse_window(spec: str, origin_ns: int, end_ns: int) -> tuple[int, int]:
    """`START:END` in microseconds relative to `origin_ns` (either side may be empty) -> absolute ns. The bounds
    are checked (finite, within MAX_WINDOW_US) before any arithmetic."""
    lo, sep, hi = spec.partition(":")

    def micros(text: str) -> float | None:
        if not text.strip():
            return None
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--window: expected START:END in microseconds, got {spec!r}") from None
        if not math.isfinite(value) or abs(value) > MAX_WINDOW_US:
            raise UsageError(
                f"--window: {text.strip()!r} is not a time within {MAX_WINDOW_US:g} microseconds"
            )
        return value

    first, last = micros(lo), micros(hi)
    start = origin_ns + round(first * 1000) if first is not None else origin_ns
    stop = origin_ns + round(last * 1000) if last is not None else end_ns
    if not sep or stop <= start:
        raise UsageError(f"--window: expected START:END with START < END (microseconds), got {spec!r}")
    return start, stop


def trim_spec(
    trace: Trace,
    steps: str | None = None,
    window: str | None = None,
    devices: tuple[int, ...] | None = None,
    streams: tuple[int, ...] | None = None,
) -> TrimSpec:
    """What to keep, decided on the event table: the windows of the chosen steps (analysis/base/windows.py) or of
    `START:END` (us from the analysed window's start, docs/reports.md), and the (pid, tid) places that hold
    only dropped GPU work."""
    if steps and window:
        raise UsageError("--steps and --window cannot be combined; pick one")
    windows: tuple[tuple[int, int], ...] | None = None
    if steps:
        windows = windows_from_steps([(w.start_ns, w.end_ns) for w in select_windows(trace, steps)])
    elif window:
        span = trace_window(trace)
        if span.start_ns is None or span.end_ns is None:
            raise UsageError("--window: this trace has no timed events")
        windows = (parse_window(window, span.start_ns, span.end_ns),)
    dropped: frozenset[tuple[str, str]] = frozenset()
    if devices or streams:
        gpu = (
            trace.lazy()
            .filter(pl.col(Col.KIND).is_in(list(GPU_EVENT_KINDS)))
            .select(pl.col(Col.PID).cast(pl.String), pl.col(Col.TID).cast(pl.String), Col.DEVICE, Col.STREAM)
            .collect()
        )
        chosen = pl.lit(True)
        if devices:
            chosen = chosen & pl.col(Col.DEVICE).is_in(list(devices))
        if streams:
            chosen = chosen & pl.col(Col.STREAM).is_in(list(streams))
        places = gpu.group_by(Col.PID, Col.TID).agg(chosen.fill_null(False).any().alias("kept"))
        dropped = frozenset((p, t) for p, t, kept in places.iter_rows() if not kept)
    return TrimSpec(windows=windows, devices=devices, streams=streams, dropped_places=dropped)
