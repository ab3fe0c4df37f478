"""Independent recomputations for the capture tests, straight from a trace's raw JSON (gzip + json, no opscope):
CPU-operator calls/total/self per name, ProfilerStep windows, and union busy time. They use plain Python and
numpy, not the code under test, so that a figure opscope prints is checked against a second derivation."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

CPU_OP_CATS = {"cpu_op", "Operator", "operator"}
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def raw_events(path: str | Path) -> list[dict[str, Any]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        doc = json.load(handle, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if isinstance(e, dict)]


def ns(value: Any) -> int:
    return int(Decimal(str(value)) * 1000)


def cpu_ops(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Complete cpu_op events in file order, with ns times (ProfilerStep markers are not operators)."""
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in CPU_OP_CATS and "dur" in e and not STEP.match(str(e["name"])):
            out.append({"name": e["name"], "thread": (str(e.get("pid")), str(e.get("tid"))), "ts": ns(e["ts"]),
                        "dur": ns(e["dur"])})
    return out


def cpu_op_stats(path: str | Path) -> dict[str, dict[str, int]]:
    """name -> calls, total_ns, self_ns. Direct parent of an event = the innermost event on its thread that
    contains it (start <= its start, end >= its end) and comes before it in (start, longer first, file order)."""
    ops = cpu_ops(raw_events(path))
    self_ns = [op["dur"] for op in ops]
    by_thread: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, op in enumerate(ops):
        by_thread[op["thread"]].append(index)
    for indices in by_thread.values():
        ordered = sorted(indices, key=lambda i: (ops[i]["ts"], -ops[i]["dur"], i))
        ts = np.array([ops[i]["ts"] for i in ordered], dtype=np.int64)
        end = ts + np.array([ops[i]["dur"] for i in ordered], dtype=np.int64)
        for rank, i in enumerate(ordered):
            contains = (ts[:rank] <= ts[rank]) & (end[:rank] >= end[rank])
            parents = np.nonzero(contains)[0]
            if parents.size:
                self_ns[ordered[int(parents[-1])]] -= ops[i]["dur"]
    stats: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "total_ns": 0, "self_ns": 0})
    for op, own in zip(ops, self_ns, strict=True):
        row = stats[op["name"]]
        row["calls"] += 1
        row["total_ns"] += op["dur"]
        row["self_ns"] += own
    return dict(stats)


def step_windows(path: str | Path) -> list[tuple[int, int, int]]:
    """(step, start_ns, end_ns) of the ProfilerStep#N annotations, by step."""
    out = []
    for e in raw_events(path):
        match = STEP.match(str(e.get("name", "")))
        if match and e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op", "Operator"):
            out.append((int(match.group(1)), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    return sorted(out)


def union_length(intervals: list[tuple[int, int]]) -> int:
    """Merge sorted intervals with a plain loop."""
    total, current = 0, None
    for start, end in sorted(i for i in intervals if i[1] > i[0]):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def cpu_busy_share(path: str | Path) -> float:
    """Union of cpu_op intervals clipped to each ProfilerStep window, over the windows' total length."""
    ops = cpu_ops(raw_events(path))
    busy = window_total = 0
    for _, lo, hi in step_windows(path):
        window_total += hi - lo
        busy += union_length([(max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in ops])
    return busy / window_total
