"""Real traces of every format opscope reads, tiled N times end to end (issue 57): each copy shifted past the one
before, its ids moved past the largest of the source, as one N times longer recording would be. The scale tests
compare a command on the trace itself with the same command on the tiled one.

Kineto JSON is tiled by `bench/make_big_trace.py` (its byte ranges, step names renumbered), Nsight Systems
SQLite by `bench/bench_nsys.py` (its `INSERT ... SELECT` on the activity tables); rocprofiler-sdk JSON, XLA
xplane and Nsight Compute CSV here. Nothing is written next to the sources: every output goes to the path given.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

from bench_nsys import tile as tile_nsys  # noqa: E402  (bench scripts run with bench/ on sys.path)
from make_big_trace import make_big_trace  # noqa: E402

GAP_NS = 1_000_000


def kineto(source: Path, copies: int, out: Path) -> Path:
    """A Kineto JSON trace tiled `copies` times, ProfilerStep numbers distinct (`make_big_trace`)."""
    if copies == 1:
        shutil.copyfile(source, out)
        return out
    return Path(make_big_trace(source, out, copies=copies, distinct_steps=True).path)


def nsys(source: Path, copies: int, out: Path) -> Path:
    """An Nsight Systems SQLite export with its activity rows repeated `copies` times (`bench_nsys.tile`)."""
    if copies == 1:
        shutil.copyfile(source, out)
        return out
    tile_nsys(source, out, copies_wanted=copies)
    return out


def _shifted(record: dict[str, Any], shift: int, corr_shift: int) -> dict[str, Any]:
    out = dict(record)
    for key in ("start_timestamp", "end_timestamp"):
        if isinstance(out.get(key), int):
            out[key] += shift
    corr = out.get("correlation_id")
    if isinstance(corr, dict) and isinstance(corr.get("internal"), int):
        out["correlation_id"] = {**corr, "internal": corr["internal"] + corr_shift}
    return out


def rocprof_json(source: Path, copies: int, out: Path) -> Path:
    """A rocprofiler-sdk JSON document with its buffer records (kernel dispatches, copies, ...) repeated
    `copies` times, timestamps shifted past the source's span, correlation ids past its largest."""
    with gzip.open(source, "rt") if source.suffix == ".gz" else open(source) as f:
        doc = json.load(f)
    for tool in doc.get("rocprofiler-sdk-tool", []):
        records = tool.get("buffer_records", {})
        timed = [
            r for kind in records.values() if isinstance(kind, list) for r in kind if "start_timestamp" in r
        ]
        if not timed:
            continue
        lo = min(r["start_timestamp"] for r in timed)
        hi = max(r["end_timestamp"] for r in timed)
        top = max((r.get("correlation_id", {}).get("internal") or 0 for r in timed), default=0) + 1
        for kind, rows in records.items():
            if isinstance(rows, list) and rows and "start_timestamp" in rows[0]:
                records[kind] = [
                    _shifted(r, k * (hi - lo + GAP_NS), k * top) for k in range(copies) for r in rows
                ]
    with gzip.open(out, "wt") if out.suffix == ".gz" else open(out, "w") as f:
        json.dump(doc, f)
    return out


def xplane(source: Path, copies: int, out: Path) -> Path:
    """An XLA XSpace with every line's events repeated `copies` times, each copy's offsets shifted past the
    span of all the lines (the planes, metadata and stats as they are)."""
    from opscope.ingest.xplane_proto import messages

    space = messages()["XSpace"]()
    space.ParseFromString(source.read_bytes())
    ends = [
        line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps
        for plane in space.planes
        for line in plane.lines
        for e in line.events
    ]
    starts = [line.timestamp_ns * 1000 for plane in space.planes for line in plane.lines if line.events]
    span_ps = (max(ends) - min(starts) if ends else 0) + GAP_NS * 1000
    for plane in space.planes:
        for line in plane.lines:
            originals = list(line.events)
            for k in range(1, copies):
                for event in originals:
                    copy = line.events.add()
                    copy.CopyFrom(event)
                    copy.offset_ps = event.offset_ps + k * span_ps
            if line.duration_ps:
                line.duration_ps += (copies - 1) * span_ps
    out.write_bytes(space.SerializeToString())
    return out


def ncu_csv(source: Path, copies: int, out: Path) -> Path:
    """An Nsight Compute CSV with its launches repeated `copies` times (the `ID` column moved past the
    largest)."""
    text = source.read_text(encoding="utf-8", errors="replace")
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    at = header.index("ID")
    ids = [int(r[at]) for r in body if len(r) > at and r[at].isdigit()]
    step = max(ids, default=0) + 1
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header)
    for k in range(copies):
        for r in body:
            row = list(r)
            if len(row) > at and row[at].isdigit():
                row[at] = str(int(row[at]) + k * step)
            writer.writerow(row)
    out.write_text(buffer.getvalue(), encoding="utf-8")
    return out


Tiler = Callable[[Path, int, Path], Path]
