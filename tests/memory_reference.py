"""Independent recomputation of `opscope memory`'s figures from the raw events (docs/memory.md), for the tests.

Plain Python over the JSON (reference.load): no polars, no numpy, nothing shared with src/opscope.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import reference as ref

TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia", 20: "privateuse1"}


def device_of(a: dict) -> str:
    kind = TYPES.get(a.get("Device Type"), f"type{a.get('Device Type')}")
    index = a.get("Device Id")
    return kind if kind in ("cpu", "mps") or index is None or index < 0 else f"{kind}:{index}"


@dataclass
class Device:
    events: list[tuple[int, int, dict]] = field(default_factory=list)  # (ts_ns, file index, event)


def by_device(events: list[dict]) -> dict[str, list[tuple[int, int, dict]]]:
    out: dict[str, list[tuple[int, int, dict]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("name") == "[memory]" and isinstance(e.get("args"), dict) and "Bytes" in e["args"]:
            out[device_of(e["args"])].append((ref.ns(e.get("ts")), i, e))
    for items in out.values():
        items.sort(key=lambda t: (t[0], t[1]))
    return dict(out)


def levels(items: list[tuple[int, int, dict]]) -> tuple[list[int], bool]:
    if all("Total Allocated" in e["args"] for _, _, e in items):
        return [int(e["args"]["Total Allocated"]) for _, _, e in items], False
    run, out = 0, []
    for _, _, e in items:
        run += int(e["args"]["Bytes"])
        out.append(run)
    return out, True


def pairs(items: list[tuple[int, int, dict]]) -> tuple[dict[int, int], int]:
    """alloc position -> free position; and the frees without an allocation."""
    open_: dict[int, list[int]] = defaultdict(list)
    matched: dict[int, int] = {}
    unmatched = 0
    for k, (_, _, e) in enumerate(items):
        a = e["args"]
        if "Addr" not in a:
            continue
        if a["Bytes"] > 0:
            open_[a["Addr"]].append(k)
        elif a["Bytes"] < 0:
            if open_[a["Addr"]]:
                matched[open_[a["Addr"]].pop()] = k
            else:
                unmatched += 1
    return matched, unmatched


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _thread(e: dict) -> tuple[str, str]:
    return str(e.get("pid")), str(e.get("tid"))  # pid / tid as text: 25738 and "25738" are one thread


def innermost_op(events: list[dict], index: int) -> str | None:
    """Brute force: the op on the event's pid/tid containing it that started last (ties: the shorter)."""
    e = events[index]
    at = ref.ns(e.get("ts"))
    best = None
    for o in events:
        if o.get("cat") in ref.OP_CATS and ref.is_x(o) and _thread(o) == _thread(e):
            lo, hi = ref.span(o)
            if lo <= at <= hi and (best is None or (lo, -(hi - lo)) > best[0]):
                best = ((lo, -(hi - lo)), o.get("name"))
    return None if best is None else best[1]


def summary(events: list[dict]) -> dict[str, dict]:
    steps = ref.step_windows(events)
    out = {}
    for name, items in by_device(events).items():
        level, relative = levels(items)
        peak = max(level)
        at = level.index(peak)
        if relative and peak <= 0:  # the running sum starts from 0, before the first event
            peak, at = 0, 0
        gpu = name != "cpu"
        reserved = [e["args"].get("Total Reserved") for _, _, e in items]
        has_reserved = gpu and not relative and None not in reserved
        matched, unmatched = pairs(items)
        has_addr = any("Addr" in e["args"] for _, _, e in items)
        live = [
            k
            for k, (_, _, e) in enumerate(items)
            if e["args"]["Bytes"] > 0 and "Addr" in e["args"] and k not in matched
        ]
        life = [items[f][0] - items[a][0] for a, f in matched.items()]
        ts = items[at][0]
        out[name] = {
            "peak_allocated_bytes": peak,
            "peak_ts_ns": ts,
            "relative": relative,
            "peak_allocated_op": innermost_op(events, items[at][1]),
            "peak_allocated_step": next((s for s, lo, hi in steps if lo <= ts <= hi), None),
            "peak_reserved_bytes": max(reserved) if has_reserved else None,
            "fragmentation_at_peak_bytes": reserved[at] - level[at] if has_reserved else None,
            "max_fragmentation_bytes": max(r - v for r, v in zip(reserved, level)) if has_reserved else None,
            "alloc_count": sum(1 for _, _, e in items if e["args"]["Bytes"] > 0),
            "alloc_bytes": sum(e["args"]["Bytes"] for _, _, e in items if e["args"]["Bytes"] > 0),
            "free_count": sum(1 for _, _, e in items if e["args"]["Bytes"] < 0),
            "unmatched": unmatched,
            "live": (len(live), sum(items[k][2]["args"]["Bytes"] for k in live)) if has_addr else None,
            "lifetime_ns": (percentile(life, 50), percentile(life, 95), max(life)) if life else None,
        }
    return out


def step_rows(events: list[dict]) -> dict[tuple[int, str], tuple[int, int, int]]:
    """(step, device) -> (start, end, peak) allocated levels."""
    out = {}
    for name, items in by_device(events).items():
        level, _ = levels(items)
        before_first = level[0] - items[0][2]["args"]["Bytes"]
        for step, lo, hi in ref.step_windows(events):
            start = next((level[k] for k in range(len(items) - 1, -1, -1) if items[k][0] < lo), before_first)
            end = next((level[k] for k in range(len(items) - 1, -1, -1) if items[k][0] <= hi), before_first)
            inside = [level[k] for k in range(len(items)) if lo <= items[k][0] <= hi]
            out[(step, name)] = (start, end, max([start, *inside]))
    return out


STEP = re.compile(r"^ProfilerStep#\d+$")


def _containing(
    ops: dict[tuple[str, str], list[tuple[int, int, str]]], e: dict
) -> list[tuple[int, int, str]]:
    """(start, end, name) of the ops on the event's thread whose [ts, ts + dur] holds it, innermost first
    (latest start, ties: the shorter): brute-force containment, no op tree."""
    at = ref.ns(e.get("ts"))
    held = [o for o in ops.get(_thread(e), []) if o[0] <= at <= o[1]]
    return sorted(held, key=lambda o: (o[0], o[0] - o[1]), reverse=True)


def op_rows(events: list[dict], device: str) -> dict[str, dict[str, int]]:
    """op label -> self_alloc_bytes, self_alloc_count, live_at_end_bytes, alloc_bytes, alloc_count, as
    docs/memory.md defines them ("Who allocates"), straight from the raw events:

    - the charged op: the innermost containing op, or, while that is an `aten::empty*`, the next one out;
      label `parent (outermost factory)`; `ProfilerStep#N` folds into `ProfilerStep#*`; none: `(no op)`;
    - live at end: the allocation's bytes when it has no free in the trace (pairs(): same address, latest
      unmatched allocation);
    - self increase (deprecated JSON field): the allocation's bytes when its free comes after the charged op
      instance ends, or never; every `(no op)` allocation counts;
    - inclusive: each allocation counts once for every distinct name on the chain from the charged op out
      to the outermost containing op; a `parent (aten::empty)` row's inclusive figures are its self ones.
    """
    ops: dict[tuple[str, str], list[tuple[int, int, str]]] = defaultdict(list)
    for o in events:
        if o.get("cat") in ref.OP_CATS and ref.is_x(o):
            ops[_thread(o)].append((*ref.span(o), str(o.get("name"))))
    items = by_device(events).get(device, [])
    freed_at = {a: items[f][0] for a, f in pairs(items)[0].items()}
    fields = (
        "self_alloc_bytes",
        "self_alloc_count",
        "live_at_end_bytes",
        "self_increase_bytes",
        "alloc_bytes",
        "alloc_count",
    )
    rows: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(fields, 0))
    factory_rows = set()
    for k, (_, _, e) in enumerate(items):
        nbytes = e["args"]["Bytes"]
        if nbytes <= 0:
            continue
        chain = _containing(ops, e)
        names = ["ProfilerStep#*" if STEP.match(o[2]) else o[2] for o in chain]
        label, end, outward = "(no op)", None, ["(no op)"]
        if names:
            c = 0
            while names[c].startswith("aten::empty") and c + 1 < len(names):
                c += 1
            label = names[c] if c == 0 else f"{names[c]} ({names[c - 1]})"
            end = chain[c][1]
            outward = list(dict.fromkeys(names[c:]))
            if c:
                factory_rows.add(label)
        row = rows[label]
        row["self_alloc_bytes"] += nbytes
        row["self_alloc_count"] += 1
        if k not in freed_at and e["args"].get("Addr") is not None:
            row["live_at_end_bytes"] += nbytes
        if end is None or k not in freed_at or freed_at[k] > end:
            row["self_increase_bytes"] += nbytes
        for name in outward:
            rows[name]["alloc_bytes"] += nbytes
            rows[name]["alloc_count"] += 1
    for label in factory_rows:
        rows[label]["alloc_bytes"] = rows[label]["self_alloc_bytes"]
        rows[label]["alloc_count"] = rows[label]["self_alloc_count"]
    return dict(rows)


def self_allocs(events: list[dict], device: str) -> dict[str, tuple[int, int]]:
    """op label -> (self bytes, self count), with the aten::empty rule, by brute-force containment."""
    return {
        k: (v["self_alloc_bytes"], v["self_alloc_count"])
        for k, v in op_rows(events, device).items()
        if v["self_alloc_count"]
    }
