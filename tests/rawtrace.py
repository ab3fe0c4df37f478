"""Independent recomputation of linking figures from the raw trace JSON, for the tests: plain `json`, plain
Python, no opscope code. Launch by correlation id in a dict; enclosing ops by the classic per-thread stack
sweep (not the vectorised method opscope uses); times converted to ns through Decimal."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

GPU_CATS = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
            "gpu_memset": "memset", "Memset": "memset"}
LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver", "hip_runtime", "hip_driver"}
OP_CATS = {"cpu_op", "Operator", "operator", "user_annotation"}
SCOPE_CATS = OP_CATS | {"python_function"}
FLOW_CATS = {"ac2g", "async", "async_gpu", "async_cpu_to_gpu"}
RANK = {"python_function": 0, "user_annotation": 1}  # outer first on identical bounds; ops 2, launches 3


def load(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        doc = json.loads(handle.read(), parse_float=Decimal)  # exact: epoch-scale us with ns digits
    return doc if isinstance(doc, list) else doc.get("traceEvents", [])


def ns(value: Decimal | int | None) -> int:
    return 0 if value is None else int((Decimal(value) * 1000).to_integral_value())


def args(event: dict) -> dict:
    value = event.get("args")
    return value if isinstance(value, dict) else {}


def is_x(event: dict) -> bool:
    return event.get("ph") == "X" and event.get("dur") is not None


def span(event: dict) -> tuple[int, int]:
    start = ns(event.get("ts"))
    return start, start + max(ns(event.get("dur")), 0)


def innermost(events: list[dict], containers: list[int], queries: list[int]) -> dict[int, int | None]:
    """For each query index: the latest-starting container on the same pid/tid that contains it (stack sweep)."""
    contain = set(containers)
    want = set(queries)
    by_thread: dict[tuple[str, str], list[tuple[int, int, int, int]]] = defaultdict(list)
    for idx in contain | want:
        ev = events[idx]
        start, end = span(ev)
        rank = RANK.get(ev.get("cat"), 2) if idx in contain else 3
        by_thread[(str(ev.get("pid")), str(ev.get("tid")))].append((start, -(end - start), rank, idx))
    out: dict[int, int | None] = {}
    for items in by_thread.values():
        items.sort()
        stack: list[tuple[int, int]] = []  # (end, index)
        for start, neg_len, _rank, idx in items:
            end = start - neg_len
            while stack and stack[-1][0] < end:
                stack.pop()
            if idx in want:
                out[idx] = stack[-1][1] if stack else None
            if idx in contain:
                stack.append((end, idx))
    return out


@dataclass
class RawLink:
    gpu: list[int]  # indices of GPU events with a duration
    launch: dict[int, int | None]  # gpu index -> launch index (by correlation)
    op: dict[int, int | None]  # gpu index -> innermost enclosing cpu_op / user_annotation of its launch
    scope: dict[int, int | None]  # ... innermost op, annotation or Python frame
    op_parent: dict[int, int | None]  # op index -> nearest enclosing op


def link(events: list[dict]) -> RawLink:
    gpu = [i for i, e in enumerate(events) if e.get("cat") in GPU_CATS and is_x(e)]
    launches: dict[int, int] = {}
    for i, e in enumerate(events):
        if e.get("cat") in LAUNCH_CATS and is_x(e) and args(e).get("correlation") is not None:
            launches.setdefault(args(e)["correlation"], i)
    launch = {g: launches.get(args(events[g]).get("correlation")) for g in gpu}
    ops = [i for i, e in enumerate(events) if e.get("cat") in OP_CATS and is_x(e)]
    scopes = [i for i, e in enumerate(events) if e.get("cat") in SCOPE_CATS and is_x(e)]
    used = sorted({v for v in launch.values() if v is not None})
    op_of_launch = innermost(events, ops, used)
    scope_of_launch = innermost(events, scopes, used)
    op_parent = innermost(events, ops, ops)
    return RawLink(
        gpu=gpu, launch=launch,
        op={g: op_of_launch[launch[g]] if launch[g] is not None else None for g in gpu},  # type: ignore[index]
        scope={g: scope_of_launch[launch[g]] if launch[g] is not None else None for g in gpu},  # type: ignore[index]
        op_parent=op_parent,
    )


def gpu_dur(events: list[dict], idx: int) -> int:
    return max(ns(events[idx].get("dur")), 0)


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total
