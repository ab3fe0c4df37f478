"""Build a large Kineto trace by tiling a real one end to end, for the `opscope summary` benchmark.

The source trace (a real recording from ../shared/traces) is cut into three byte ranges: the document head up
to the first event of `traceEvents`, the events themselves, and the tail (the rest of the array and the
metadata after it). The output is the head, N copies of the events joined with the source's own separator,
and the tail, so every event keeps its original textual layout and the `{"traceEvents": [...], metadata}`
document shape (deviceProperties, distributedInfo, ...) is unchanged. Copy k is patched in two ways only:
every event's `ts` is moved later by k * (source span + gap), a whole number of microseconds so that the
fractional digits of nanosecond-resolution timestamps stay exactly as they were; and every positive id
(`ID_KEYS`: flow ids, correlation, External id, Python ids, ...) is raised by k * a power of ten above the
largest id in the source, so ids of different copies never collide while links inside a copy (a flow's id
equal to its kernel's correlation) are kept. Zero and negative ids are "no id" sentinels and stay as they
are. The output is written copy by copy through a gzip writer, so memory stays at a few copies of the
source whatever the target size.

    python bench/make_big_trace.py --size-mb 1000            # -> bench/out/<source>.x<N>.pt.trace.json.gz
    python bench/make_big_trace.py --copies 3 --plain        # also the uncompressed .json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from isal import igzip, igzip_threaded

BENCH = Path(__file__).resolve().parent
OUT_DIR = BENCH / "out"
TRACES = Path(os.environ.get("OPSCOPE_TRACES", BENCH.parent.parent / "shared" / "traces"))
# A 2024 V100 training step with nanosecond timestamps (the harder number format to decode), the current
# category set (cpu_op, cuda_runtime, kernel, gpu_memcpy/memset, ac2g and fwdbwd flows), NCCL args and
# distributedInfo, which HolisticTraceAnalysis needs to load a trace without renaming tricks.
DEFAULT_SOURCE = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
# Integer-valued keys, at any depth of an event, that name an identity and must not collide across copies.
ID_KEYS = (
    "id",
    "correlation",
    "External id",
    "Sequence number",
    "Ev Idx",
    "Record function id",
    "Python id",
    "Python parent id",
)
# Keys whose 0 is a real value (an index), not the "no id" sentinel that 0 means for the other keys.
ZERO_BASED_KEYS = ("Ev Idx",)
GAP_US = 1000

_STEP = re.compile(rb"ProfilerStep#(\d+)")
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_SLOT = re.compile(
    rb'(?<!\\)"(ts|'
    + b"|".join(re.escape(k.encode()) for k in ID_KEYS)
    + rb')"\s*:\s*(-?\d+)(\.\d+)?([eE][-+]?\d+)?'
)


@dataclass(frozen=True)
class TiledTrace:
    """What `make_big_trace` wrote (also stored next to the output as `<path>.meta.json`)."""

    path: str
    plain_path: str | None
    source: str
    copies: int
    events_per_copy: int
    shift_us: int
    id_stride: int
    uncompressed_bytes: int
    compressed_bytes: int
    seconds: float


class Template:
    """The source trace cut into head / events / tail, with the numbers to patch in each copy."""

    def __init__(self, text: bytes, gap_us: int = GAP_US, distinct_steps: bool = False) -> None:
        if gap_us < 1:
            raise ValueError("gap must be at least 1 us so that copies never overlap")
        head_end, first_end, second_start, tail_start, events = _locate_events(text)
        self.head = text[:head_end]
        self.body = text[head_end:tail_start]
        self.tail = text[tail_start:]
        self.separator = text[first_end:second_start] if second_start else b",\n"
        self.events = events
        self._pieces, values, keys = _slots(self.body)
        starts, ends, timed = _time_range(text)
        self.shift_us = math.ceil(max(ends) - min(starts)) + gap_us
        self.id_stride = 10 ** len(
            str(max([v for v, key in zip(values, keys, strict=True) if key != "ts"], default=0))
        )
        zero_based = ("ts", *ZERO_BASED_KEYS)
        self._values = values
        # With distinct_steps, copy k's `ProfilerStep#N` is renamed `ProfilerStep#(N + k * stride)`, so the tiled
        # trace reads as one longer capture (the steps of every copy distinct) rather than N repeats of a few.
        numbers = [int(n) for n in _STEP.findall(self.body)]
        self.step_stride = 10 ** len(str(max(numbers))) if distinct_steps and numbers else 0
        self._steps = [
            self.shift_us if key == "ts" else self.id_stride if v > 0 or (v == 0 and key in zero_based) else 0
            for v, key in zip(values, keys, strict=True)
        ]
        if keys.count("ts") != timed:
            raise ValueError(
                f"found {keys.count('ts')} numeric `ts` fields in the text but "
                f"{timed} events with a numeric ts; cannot shift them all"
            )

    def copy(self, k: int) -> bytes:
        """The events text of copy k (k = 0 is the source's text unchanged)."""
        numbers = [b"%d" % (v + k * step) for v, step in zip(self._values, self._steps, strict=True)]
        parts: list[bytes] = [b""] * (2 * len(numbers) + 1)
        parts[0::2] = self._pieces
        parts[1::2] = numbers
        text = b"".join(parts)
        if k and self.step_stride:
            text = _STEP.sub(lambda m: b"ProfilerStep#%d" % (int(m.group(1)) + k * self.step_stride), text)
        return text

    def copies_for(self, size_bytes: int) -> int:
        """How many copies make a document of about `size_bytes` (ids get longer in later copies)."""
        fixed = len(self.head) + len(self.tail) - len(self.separator)
        guess = max(1, round((size_bytes - fixed) / (len(self.body) + len(self.separator))))
        typical = len(self.copy(guess // 2)) + len(self.separator)
        return max(1, round((size_bytes - fixed) / typical))

    def chunks(self, copies: int) -> Iterator[bytes]:
        yield self.head
        for k in range(copies):
            if k:
                yield self.separator
            yield self.copy(k)
        yield self.tail


def _locate_events(text: bytes) -> tuple[int, int, int, int, int]:
    """Offsets of the first event, the end of the first event, the start of the second (0 if none), the end
    of the last event, and the event count, found with a string-aware bracket scan."""
    depth = 0
    array_depth = -1
    first_start = first_end = second_start = last_end = events = 0
    previous = b""
    for match in _TOKEN.finditer(text):
        token = match.group()
        if array_depth < 0:
            if token == b"[" and (depth == 0 or (depth == 1 and previous == b'"traceEvents"')):
                array_depth = depth + 1
            previous = token
        if token in (b"{", b"["):
            depth += 1
            if token == b"{" and depth == array_depth + 1 and array_depth > 0:
                events += 1
                if events == 1:
                    first_start = match.start()
                elif events == 2:
                    second_start = match.start()
        elif token in (b"}", b"]"):
            depth -= 1
            if array_depth > 0 and depth == array_depth and token == b"}":
                last_end = match.end()
                if events == 1:
                    first_end = last_end
            elif array_depth > 0 and depth == array_depth - 1:
                break
    if array_depth < 0 or events == 0:
        raise ValueError("no traceEvents array with events found in the source trace")
    return first_start, first_end, second_start, last_end, events


def _slots(body: bytes) -> tuple[list[bytes], list[int], list[str]]:
    """The body cut around the integer part of every ts and id: literal pieces, values, and keys."""
    pieces: list[bytes] = []
    values: list[int] = []
    keys: list[str] = []
    position = 0
    for match in _SLOT.finditer(body):
        if match.group(4):
            raise ValueError(f"unsupported number format in {match.group().decode(errors='replace')!r}")
        key = match.group(1).decode()
        if match.group(3) and key != "ts":
            continue  # a fractional id is not an id we know how to shift; leave it
        pieces.append(body[position : match.start(2)])
        values.append(int(match.group(2)))
        keys.append(key)
        position = match.end(2)
    pieces.append(body[position:])
    return pieces, values, keys


def _time_range(text: bytes) -> tuple[list[float], list[float], int]:
    """Start and end (us) of every non-metadata event, and how many events (metadata too) have a numeric ts."""
    document = json.loads(text)
    events = document["traceEvents"] if isinstance(document, dict) else document
    starts: list[float] = []
    ends: list[float] = []
    timed = 0
    for event in events:
        ts = event.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            continue
        timed += 1
        if event.get("ph") == "M":
            continue
        dur = event.get("dur", 0)
        starts.append(float(ts))
        ends.append(float(ts) + (float(dur) if isinstance(dur, (int, float)) else 0.0))
    if not starts:
        raise ValueError("the source trace has no timed events")
    return starts, ends, timed


def read_source(path: Path) -> bytes:
    with open(path, "rb") as handle:
        gz = handle.read(2) == b"\x1f\x8b"
    if gz:
        with igzip.open(path, "rb") as reader:
            return reader.read()
    return path.read_bytes()


def default_output(source: Path, copies: int, distinct_steps: bool = False) -> Path:
    stem = source.name.split(".")[0]
    return OUT_DIR / f"{stem}.x{copies}{'.steps' if distinct_steps else ''}.pt.trace.json.gz"


def make_big_trace(
    source: Path,
    out: Path | None = None,
    *,
    size_mb: float | None = 1000,
    copies: int | None = None,
    gap_us: int = GAP_US,
    level: int = 1,
    plain: bool = False,
    reuse: bool = False,
    template: Template | None = None,
    distinct_steps: bool = False,
) -> TiledTrace:
    """Write `source` tiled `copies` times (or to about `size_mb` MB uncompressed) as .json.gz (+ .json)."""
    started = time.perf_counter()
    template = template or Template(read_source(source), gap_us, distinct_steps)
    if copies is None:
        copies = template.copies_for(int((size_mb or 1000) * 1e6))
    out = out or default_output(source, copies, distinct_steps)
    plain_path = out.with_name(out.name.removesuffix(".gz")) if plain else None
    meta_path = out.with_name(out.name + ".meta.json")
    if reuse and out.exists() and meta_path.exists() and (plain_path is None or plain_path.exists()):
        previous = TiledTrace(**json.loads(meta_path.read_text()))
        if (
            previous.source == str(source)
            and previous.copies == copies
            and previous.shift_us == template.shift_us
        ):
            return previous
    out.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with ExitStack() as stack:
        tmp_gz = out.with_name(f".tmp-{out.name}")
        gz: BinaryIO = stack.enter_context(igzip_threaded.open(tmp_gz, "wb", compresslevel=level, threads=1))
        raw: BinaryIO | None = None
        if plain_path is not None:
            raw = stack.enter_context(open(plain_path.with_name(f".tmp-{plain_path.name}"), "wb"))
        for chunk in template.chunks(copies):
            gz.write(chunk)
            if raw is not None:
                raw.write(chunk)
            written += len(chunk)
    tmp_gz.replace(out)
    if plain_path is not None:
        plain_path.with_name(f".tmp-{plain_path.name}").replace(plain_path)
    result = TiledTrace(
        path=str(out),
        plain_path=str(plain_path) if plain_path else None,
        source=str(source),
        copies=copies,
        events_per_copy=template.events,
        shift_us=template.shift_us,
        id_stride=template.id_stride,
        uncompressed_bytes=written,
        compressed_bytes=out.stat().st_size,
        seconds=round(time.perf_counter() - started, 3),
    )
    meta_path.write_text(json.dumps(asdict(result), indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=TRACES / DEFAULT_SOURCE, help="real trace to tile")
    parser.add_argument("--size-mb", type=float, default=1000, help="target uncompressed size (default 1000)")
    parser.add_argument(
        "--copies", type=int, default=None, help="exact number of copies (overrides --size-mb)"
    )
    parser.add_argument(
        "--gap-us", type=int, default=GAP_US, help="idle gap between copies (default 1000 us)"
    )
    parser.add_argument(
        "--level", type=int, default=1, choices=range(4), help="ISA-L gzip level 0-3 (default 1)"
    )
    parser.add_argument("--plain", action="store_true", help="also write the uncompressed .json")
    parser.add_argument(
        "--distinct-steps",
        action="store_true",
        help="renumber ProfilerStep#N in each copy (one longer capture)",
    )
    parser.add_argument(
        "-o", "--out", type=Path, default=None, help="output .json.gz (default under bench/out/)"
    )
    parser.add_argument("--reuse", action="store_true", help="keep an existing output built the same way")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    args = parser.parse_args(argv)
    if not args.source.exists():
        print(f"error: {args.source}: no such trace (set OPSCOPE_TRACES or pass --source)", file=sys.stderr)
        return 2
    try:
        result = make_big_trace(
            args.source,
            args.out,
            size_mb=args.size_mb,
            copies=args.copies,
            gap_us=args.gap_us,
            level=args.level,
            plain=args.plain,
            reuse=args.reuse,
            distinct_steps=args.distinct_steps,
        )
    except ValueError as exc:
        print(f"error: {args.source}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(asdict(result)))
        return 0
    print(
        f"{result.path}: {result.copies} copies x {result.events_per_copy} events, "
        f"{result.uncompressed_bytes / 1e6:.0f} MB uncompressed, {result.compressed_bytes / 1e6:.0f} MB gzip, "
        f"shift {result.shift_us} us, id stride {result.id_stride}, {result.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
