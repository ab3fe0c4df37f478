"""Independent reference for the timeline tests: raw Kineto JSON read with json/gzip, intervals in plain
Python (sorted sweeps and loops, no polars, no opscope code), times as exact integer nanoseconds. Reading,
time conversion and the innermost-op stack sweep come from `rawtrace` (the linking tests' reference)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from rawtrace import GPU_CATS, LAUNCH_CATS, OP_CATS, innermost, ns, union_length
from rawtrace import load as events

CPU_CATS = {"cpu_op", "Operator", "operator", "cuda_runtime", "Runtime", "hip_runtime", "cuda_driver", "hip_driver",
            "user_annotation", "python_function"}
SYNC_NAMES = re.compile(r"^(cuda|hip)(Device|Stream|Event)Synchronize$|^(cuda|hip)StreamWaitEvent$"
                        r"|^(cuda|hip)Memcpy(WithStream)?$")


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        digits = "".join(ch for ch in value if ch.isdigit())
        return int(digits) if digits else None
    return None


@dataclass
class Gpu:
    kind: str
    name: str
    device: int | None
    stream: int | None
    start: int
    end: int
    correlation: int | None
    nbytes: int | None


def gpu(evs: list[dict]) -> list[Gpu]:
    out = []
    for e in evs:
        kind = GPU_CATS.get(e.get("cat"))
        if kind is None or e.get("ph") != "X" or e.get("dur") is None or e.get("ts") is None:
            continue
        args = e.get("args") or {}
        device = args.get("device", e.get("pid"))
        stream = args.get("stream", e.get("tid"))
        start, dur = ns(e["ts"]), ns(e["dur"])
        if dur < 0:
            continue
        out.append(Gpu(kind, e.get("name") or "", _int(device), _int(stream), start, start + dur,
                       args.get("correlation"), args.get("bytes")))
    return out


def window(evs: list[dict]) -> tuple[int, int]:
    lo, hi = None, None
    for e in evs:
        if e.get("ph") != "X" or e.get("ts") is None or e.get("dur") is None:
            continue
        if e.get("cat") not in CPU_CATS and e.get("cat") not in GPU_CATS:
            continue
        s = ns(e["ts"])
        t = s + max(ns(e["dur"]), 0)
        lo = s if lo is None else min(lo, s)
        hi = t if hi is None else max(hi, t)
    assert lo is not None and hi is not None
    return lo, hi


def launches(evs: list[dict]) -> dict[int, dict]:
    """correlation -> earliest launch call (runtime / driver event)."""
    out: dict[int, dict] = {}
    for e in evs:
        if e.get("cat") in LAUNCH_CATS and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None and (corr not in out or ns(e["ts"]) < ns(out[corr]["ts"])):
                out[corr] = e
    return out


def merge(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(pairs: list[tuple[int, int]]) -> int:
    return union_length(pairs)


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    a, b = merge(a), merge(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def at_least_two(groups: dict[object, list[tuple[int, int]]]) -> int:
    """Time covered by two or more groups (each group merged first), by a plain sweep."""
    points = []
    for pairs in groups.values():
        for s, e in merge(pairs):
            points += [(s, 1), (e, -1)]
    points.sort()
    total, depth, last = 0, 0, None
    for t, d in points:
        if last is not None and depth >= 2:
            total += t - last
        depth += d
        last = t
    return total


def by_device(items: list[Gpu]) -> dict[int | None, list[Gpu]]:
    out: dict[int | None, list[Gpu]] = defaultdict(list)
    for g in items:
        out[g.device].append(g)
    return out


def issuing_op(evs: list[dict], queries: list[int]) -> dict[int, str | None]:
    """Name of the innermost CPU op / user annotation around each query event (index into `evs`)."""
    ops = [i for i, e in enumerate(evs) if e.get("cat") in OP_CATS and e.get("ph") == "X" and e.get("dur") is not None]
    found = innermost(evs, ops, queries)
    return {q: None if found.get(q) is None else evs[found[q]].get("name") for q in queries}  # type: ignore[index]


__all__ = ["GPU_CATS", "LAUNCH_CATS", "events", "ns"]
