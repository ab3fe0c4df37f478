"""Independent recomputation from the raw Kineto JSON (json/gzip + plain Python), used to check the figures of
`diff` and `ranks`. Deliberately shares no code with opscope."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"}
COMM = re.compile(r"nccl|rccl|allreduce|all_reduce|allgather|reducescatter|alltoall")


def load(path: Path) -> dict[str, Any]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


def ns(value: float) -> int:
    whole = math.floor(value)
    return int(whole) * 1000 + round((value - whole) * 1000)


def gpu_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATS and "dur" in e]


def steps(doc: dict[str, Any]) -> list[tuple[int, int]]:
    seen: dict[str, tuple[int, int]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("user_annotation", "cpu_op") and \
                str(e.get("name", "")).startswith("ProfilerStep#") and e.get("dur", 0) > 0:
            start = ns(e["ts"])
            seen.setdefault(e["name"], (start, start + ns(e["dur"])))
    return sorted(seen.values())


def launch_times(doc: dict[str, Any]) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in doc["traceEvents"]:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in LAUNCH_CATS and corr is not None:
            out[corr] = min(out.get(corr, ns(e["ts"])), ns(e["ts"]))
    return out


def in_steps(at: int, windows: list[tuple[int, int]]) -> bool:
    return any(lo <= at < hi for lo, hi in windows)


def scoped_gpu(doc: dict[str, Any], per_step: bool) -> list[dict[str, Any]]:
    events = gpu_events(doc)
    if not per_step:
        return events
    windows = steps(doc)
    launches = launch_times(doc)
    kept = []
    for e in events:
        at = launches.get((e.get("args") or {}).get("correlation"), ns(e["ts"]))
        if in_steps(at, windows):
            kept.append(e)
    return kept


def kernel_totals(events: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        row = out[(e["name"], GPU_CATS[e["cat"]])]
        row[0] += 1
        row[1] += ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def union_length(spans: list[tuple[int, int]]) -> int:
    total, end = 0, None
    start = None
    for lo, hi in sorted(spans):
        if hi <= lo:
            continue
        if end is None or lo > end:
            if end is not None:
                total += end - start
            start, end = lo, hi
        else:
            end = max(end, hi)
    if end is not None:
        total += end - start
    return total


def busy_in(events: list[dict[str, Any]], windows: list[tuple[int, int]]) -> int:
    """Union of the events' intervals, per device, cut to the windows, summed over devices."""
    by_device: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        lo, hi = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        for wlo, whi in windows:
            a, b = max(lo, wlo), min(hi, whi)
            if b > a:
                by_device[(e.get("args") or {}).get("device", e.get("pid"))].append((a, b))
    return sum(union_length(spans) for spans in by_device.values())


def op_totals(doc: dict[str, Any], per_step: bool) -> dict[str, tuple[int, int]]:
    windows = steps(doc)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "user_annotation") or "dur" not in e:
            continue
        if str(e["name"]).startswith("ProfilerStep#"):
            continue
        if per_step and not in_steps(ns(e["ts"]), windows):
            continue
        out[e["name"]][0] += 1
        out[e["name"]][1] += ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in out.items()}
