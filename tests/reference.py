"""The tests' one independent reference reader: every figure opscope prints is checked against a second
derivation from the raw trace JSON, made here with `json`/`gzip` and plain Python loops (no polars, no opscope
code, no vectorised tricks). Times are exact integer nanoseconds: numbers are parsed as Decimal, so epoch-scale
microseconds with nanosecond digits stay exact.

Sections: reading; categories; intervals; nesting and linking (the classic per-thread stack sweep, not the
binary lifting opscope uses); the timeline; step windows and the comparisons (`diff`, `ranks`); CPU operators
(the capture tables). A ProfilerStep marker is a name matching `STEP` (the one pattern opscope uses too).
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

# ---- reading ---------------------------------------------------------------------------------------------------


def load_doc(path: str | Path) -> Any:
    """The whole document (a dict with traceEvents and metadata, or a bare event list), numbers as Decimal."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return json.loads(handle.read(), parse_float=Decimal)


def load(path: str | Path) -> list[dict]:
    """The trace's events (dicts only), in file order."""
    doc = load_doc(path)
    events = doc if isinstance(doc, list) else doc.get("traceEvents", [])
    return [e for e in events if isinstance(e, dict)]


def complete_events(raw: bytes, limit: int) -> int:
    """How many objects of the events array close before byte `limit` of the (decompressed) document: what a
    salvaging reader must keep of a file cut at `limit`. A plain byte loop over strings and brackets."""
    i = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    depth, count, in_str, escaped = 0, 0, False, False
    for ch in raw[i:limit]:
        if in_str:
            if escaped:
                escaped = False
            elif ch == 0x5C:
                escaped = True
            elif ch == 0x22:
                in_str = False
        elif ch == 0x22:
            in_str = True
        elif ch in b"{[":
            depth += 1
        elif ch in b"}]":
            depth -= 1
            if depth == 0:
                count += 1
            if depth < 0:
                break
    return count


def ns(value: Decimal | int | float | None) -> int:
    """Microseconds (as written in the trace) -> integer nanoseconds, rounded half to even."""
    return 0 if value is None else int((Decimal(str(value)) * 1000).to_integral_value())


def args(event: dict) -> dict:
    value = event.get("args")
    return value if isinstance(value, dict) else {}


def is_x(event: dict) -> bool:
    return event.get("ph") == "X" and event.get("dur") is not None


def span(event: dict) -> tuple[int, int]:
    start = ns(event.get("ts"))
    return start, start + max(ns(event.get("dur")), 0)


# ---- categories (every schema generation) ----------------------------------------------------------------------

GPU_CATS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "mtia_ccp_events": "kernel",
}


def gpu_category(event: dict) -> str:
    """The category of one raw GPU event by the rule table's data (`category_rules.RULES`, the one definition of
    each category), applied here with Python's `re`, rule by rule, first match wins: memcpy / memset by the
    raw category, else the first matching rule, else "other"."""
    from opscope.analysis.kernels.category_rules import RULES

    kind = GPU_CATS.get(str(event.get("cat")), "kernel")
    if kind in ("memcpy", "memset"):
        return kind
    name = str(event.get("name") or "")
    for category, pattern in RULES:
        if re.search(pattern, name, re.IGNORECASE):
            return category
    return "other"


LAUNCH_CATS = {"cuda_runtime", "Runtime", "cuda_driver", "hip_runtime", "hip_driver", "mtia_runtime"}
CPU_OP_CATS = {"cpu_op", "Operator", "operator"}
OP_CATS = CPU_OP_CATS | {"user_annotation"}
SCOPE_CATS = OP_CATS | {"python_function"}
FLOW_CATS = {"ac2g", "async", "async_gpu", "async_cpu_to_gpu"}
CPU_CATS = OP_CATS | LAUNCH_CATS | {"python_function"}  # CPU work: what the analysed window spans
RANK = {"python_function": 0, "user_annotation": 1}  # outer first on identical bounds; ops 2, launches 3
STEP = re.compile(r"^ProfilerStep#(\d+)$")
SYNC_NAMES = re.compile(
    r"^(cuda|hip)(Device|Stream|Event)Synchronize$|^(cuda|hip)StreamWaitEvent$"
    r"|^(cuda|hip)Memcpy(WithStream)?$"
)
COMM = re.compile(r"nccl|rccl|allreduce|all_reduce|allgather|reducescatter|alltoall")


def is_step(event: dict) -> bool:
    return bool(STEP.match(str(event.get("name", ""))))


# ---- intervals -------------------------------------------------------------------------------------------------


def merge(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint sorted intervals covering the same time (empty and inverted ones dropped)."""
    out: list[list[int]] = []
    for s, e in sorted(p for p in pairs if p[1] > p[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def union_length(pairs: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merge(pairs))


length = union_length


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


# ---- nesting and linking ---------------------------------------------------------------------------------------


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
        gpu=gpu,
        launch=launch,
        op={g: op_of_launch[launch[g]] if launch[g] is not None else None for g in gpu},  # type: ignore[index]
        scope={g: scope_of_launch[launch[g]] if launch[g] is not None else None for g in gpu},  # type: ignore[index]
        op_parent=op_parent,
    )


def gpu_dur(events: list[dict], idx: int) -> int:
    return max(ns(events[idx].get("dur")), 0)


def issuing_op(evs: list[dict], queries: list[int]) -> dict[int, str | None]:
    """Name of the innermost CPU op / user annotation around each query event (index into `evs`)."""
    ops = [i for i, e in enumerate(evs) if e.get("cat") in OP_CATS and is_x(e)]
    found = innermost(evs, ops, queries)
    return {q: None if found.get(q) is None else evs[found[q]].get("name") for q in queries}  # type: ignore[index]


# ---- the timeline ----------------------------------------------------------------------------------------------


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
        kind = GPU_CATS.get(e.get("cat"))  # type: ignore[arg-type]
        if kind is None or not is_x(e) or e.get("ts") is None:
            continue
        a = args(e)
        start, dur = ns(e["ts"]), ns(e["dur"])
        if dur < 0:
            continue
        out.append(
            Gpu(
                kind,
                e.get("name") or "",
                _int(a.get("device", e.get("pid"))),
                _int(a.get("stream", e.get("tid"))),
                start,
                start + dur,
                a.get("correlation"),
                a.get("bytes"),
            )
        )
    return out


def gpu_events(events: list[dict]) -> list[dict]:
    """The raw GPU events (kernels, memcpys, memsets) with a duration."""
    return [e for e in events if e.get("cat") in GPU_CATS and is_x(e)]


def window(evs: list[dict]) -> tuple[int, int]:
    """First start to last end of GPU activity and CPU work with a duration (the analysed window)."""
    spans = [
        span(e)
        for e in evs
        if is_x(e) and e.get("ts") is not None and (e.get("cat") in CPU_CATS or e.get("cat") in GPU_CATS)
    ]
    assert spans
    return min(s for s, _ in spans), max(e for _, e in spans)


def launches(evs: list[dict]) -> dict[int, dict]:
    """correlation -> earliest launch call (runtime / driver event)."""
    out: dict[int, dict] = {}
    for e in evs:
        if e.get("cat") in LAUNCH_CATS and e.get("ph") == "X":
            corr = args(e).get("correlation")
            if corr is not None and (corr not in out or ns(e["ts"]) < ns(out[corr]["ts"])):
                out[corr] = e
    return out


def by_device(items: list[Gpu]) -> dict[int | None, list[Gpu]]:
    out: dict[int | None, list[Gpu]] = defaultdict(list)
    for g in items:
        out[g.device].append(g)
    return out


# ---- step windows and the comparisons --------------------------------------------------------------------------


def step_windows(events: list[dict]) -> list[tuple[int, int, int]]:
    """(step, start_ns, end_ns) of the CPU-side ProfilerStep#N events, by step."""
    out = []
    for e in events:
        match = STEP.match(str(e.get("name", "")))
        if match and is_x(e) and e.get("cat") in OP_CATS:
            out.append((int(match.group(1)), *span(e)))
    return sorted(out)


def steps(events: list[dict]) -> list[tuple[int, int]]:
    """The non-empty step windows as (start_ns, end_ns), by start."""
    return sorted((lo, hi) for _, lo, hi in step_windows(events) if hi > lo)


def in_steps(at: int, windows: list[tuple[int, int]]) -> bool:
    return any(lo <= at < hi for lo, hi in windows)


def scoped_gpu(events: list[dict], per_step: bool) -> list[dict]:
    """GPU events; per step: those whose launch call (else the event itself) starts inside a step."""
    found = gpu_events(events)
    if not per_step:
        return found
    windows = steps(events)
    first = {corr: ns(e["ts"]) for corr, e in launches(events).items()}
    return [e for e in found if in_steps(first.get(args(e).get("correlation"), ns(e["ts"])), windows)]


def kernel_totals(events: list[dict]) -> dict[tuple[str, str], tuple[int, int]]:
    """(name, kind) -> (calls, summed duration) of GPU events."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        row = out[(e["name"], GPU_CATS[e["cat"]])]
        row[0] += 1
        row[1] += ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in out.items()}


def busy_in(events: list[dict], windows: list[tuple[int, int]]) -> int:
    """Union of the events' intervals, per device, cut to the windows, summed over devices."""
    per_device: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        lo, hi = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
        for wlo, whi in windows:
            a, b = max(lo, wlo), min(hi, whi)
            if b > a:
                per_device[args(e).get("device", e.get("pid"))].append((a, b))
    return sum(union_length(spans) for spans in per_device.values())


def op_totals(events: list[dict], per_step: bool) -> dict[str, tuple[int, int]]:
    """name -> (calls, summed duration) of CPU ops and user annotations, step markers left out; per step: those
    starting inside a step."""
    windows = steps(events)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if not is_x(e) or e.get("cat") not in OP_CATS or is_step(e):
            continue
        if per_step and not in_steps(ns(e["ts"]), windows):
            continue
        out[e["name"]][0] += 1
        out[e["name"]][1] += ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in out.items()}


# ---- CPU operators (the capture tables) ------------------------------------------------------------------------


def cpu_ops(events: list[dict]) -> list[dict]:
    """Complete cpu_op events in file order (step markers are not operators): name, thread, ts, dur (ns)."""
    return [
        {
            "name": e["name"],
            "thread": (str(e.get("pid")), str(e.get("tid"))),
            "ts": ns(e["ts"]),
            "dur": max(ns(e["dur"]), 0),
        }
        for e in events
        if is_x(e) and e.get("cat") in CPU_OP_CATS and not is_step(e)
    ]


def cpu_op_stats(events: list[dict], annotations: bool = False) -> dict[str, dict[str, int]]:
    """name -> calls, total_ns, self_ns of the CPU operators, with the self time of `opscope ops`: duration minus
    the durations of the direct child ops and user annotations (parents found by the stack sweep), at least 0.
    `annotations`: the user annotations too, every ProfilerStep#N as one name "ProfilerStep#*" (as `ops`)."""
    ops = [i for i, e in enumerate(events) if e.get("cat") in OP_CATS and is_x(e)]
    children: dict[int, int] = defaultdict(int)
    for op, parent in innermost(events, ops, ops).items():
        if parent is not None:
            children[parent] += max(ns(events[op]["dur"]), 0)
    stats: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "total_ns": 0, "self_ns": 0})
    for i in ops:
        e = events[i]
        if not annotations and (e.get("cat") not in CPU_OP_CATS or is_step(e)):
            continue
        dur = max(ns(e["dur"]), 0)
        row = stats["ProfilerStep#*" if is_step(e) else e["name"]]
        row["calls"] += 1
        row["total_ns"] += dur
        row["self_ns"] += max(dur - children[i], 0)
    return dict(stats)


def cpu_busy_share(events: list[dict]) -> float:
    """Union of cpu_op intervals clipped to each ProfilerStep window, over the windows' total length."""
    ops = cpu_ops(events)
    busy = window_total = 0
    for _, lo, hi in step_windows(events):
        window_total += hi - lo
        busy += union_length([(max(o["ts"], lo), min(o["ts"] + o["dur"], hi)) for o in ops])
    return busy / window_total


# ---- validity (docs/validity.md) -------------------------------------------------------------------------------
# Each check recomputed from the raw events with the definitions of docs/validity.md, in plain loops: the GPU
# records of each (device, stream) sorted by start, dictionaries of correlation ids, a scan of the step windows.

LAUNCH_API = re.compile(r"^(cuda|cu|hip|hsa)\w*(Launch|Memcpy|Memset)")
NOT_LAUNCHES = re.compile(r"Graph\w*Launch|HostFunc|Launch(Host|Cooperative)?Func\w*$|Memset")
GRAPH_LAUNCH = re.compile(r"Graph\w*Launch")
KERNEL_LAUNCH = re.compile(r"Launch")
COMMUNICATION = re.compile(r"(?i)nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|sendrecv")
OVERLAP_TOLERANCE_NS = 5_000


@dataclass
class Record:
    index: int  # position in the file's events
    kind: str
    name: str
    device: int | None
    stream: int | None
    start: int
    dur: int  # a negative duration counts as 0
    correlation: int | None


def records(events: list[dict]) -> list[Record]:
    """The timed GPU records (kernels, memcpys, memsets with a start and a duration)."""
    out = []
    for i, e in enumerate(events):
        kind = GPU_CATS.get(str(e.get("cat")))
        if kind is None or not is_x(e) or e.get("ts") is None:
            continue
        a = args(e)
        out.append(
            Record(
                i,
                kind,
                str(e.get("name") or ""),
                _int(a.get("device", e.get("pid"))),
                _int(a.get("stream", e.get("tid"))),
                ns(e["ts"]),
                max(ns(e["dur"]), 0),
                _int(a.get("correlation")),
            )
        )
    return out


def launch_calls(events: list[dict]) -> list[dict]:
    """The timed launch-API calls (runtime / driver events named like a launch, copy or memset)."""
    return [
        e
        for e in events
        if e.get("cat") in LAUNCH_CATS
        and is_x(e)
        and e.get("ts") is not None
        and LAUNCH_API.search(str(e.get("name") or ""))
    ]


def overlaps(events: list[dict]) -> tuple[int, int]:
    """stream_overlap: (records that end more than 5 us after the next record on their device and stream
    starts, the time they claim beyond those starts (each at most its own duration))."""
    lanes: dict[tuple[int | None, int | None], list[Record]] = defaultdict(list)
    for r in records(events):
        lanes[(r.device, r.stream)].append(r)
    count = claimed = 0
    for lane in lanes.values():
        lane.sort(key=lambda r: (r.start, r.index))
        for here, after in itertools.pairwise(lane):
            past = here.start + here.dur - after.start
            if past > OVERLAP_TOLERANCE_NS:
                count += 1
                claimed += min(past, here.dur)
    return count, claimed


def _split_ids(ids: list[int], other: list[int]) -> tuple[int, int, int]:
    """(start, middle, end): the ids below every id of `other`, between, above; all in the middle without
    any other."""
    if not other:
        return 0, len(ids), 0
    lo, hi = min(other), max(other)
    start = sum(1 for i in ids if i < lo)
    end = sum(1 for i in ids if i > hi)
    return start, len(ids) - start - end, end


def _captures(events: list[dict]) -> list[tuple[int, int]]:
    begins = sorted(
        ns(e["ts"])
        for e in events
        if e.get("cat") in LAUNCH_CATS and is_x(e) and "BeginCapture" in str(e.get("name"))
    )
    ends = sorted(
        span(e)[1]
        for e in events
        if e.get("cat") in LAUNCH_CATS and is_x(e) and "EndCapture" in str(e.get("name"))
    )
    out = []
    for b in begins:
        after = [x for x in ends if x >= b]
        if after:
            out.append((b, after[0]))
    return out


def launches_without_records(events: list[dict]) -> tuple[int, int, int, int]:
    """launch_without_record: (missing, start, middle, end) over the kernel launches and copies not captured
    into a graph, whose correlation id no GPU record has."""
    recorded = {r.correlation for r in records(events) if r.correlation is not None}
    captures = _captures(events)
    missing = []
    for e in launch_calls(events):
        name, corr = str(e.get("name")), _int(args(e).get("correlation"))
        if NOT_LAUNCHES.search(name) or corr is None:
            continue
        if any(lo <= ns(e["ts"]) <= hi for lo, hi in captures):
            continue
        if corr not in recorded:
            missing.append(corr)
    start, middle, end = _split_ids(missing, sorted(recorded))
    return len(missing), start, middle, end


def records_without_launches(events: list[dict]) -> tuple[int, int, int, int, int]:
    """record_without_launch: (missing, start, middle, end, their GPU time) over the GPU records with a
    correlation id no launch call has."""
    launched = {c for e in launch_calls(events) if (c := _int(args(e).get("correlation"))) is not None}
    missing = [r for r in records(events) if r.correlation is not None and r.correlation not in launched]
    start, middle, end = _split_ids([r.correlation for r in missing], sorted(launched))  # type: ignore[misc]
    return len(missing), start, middle, end, sum(r.dur for r in missing)


def before_launch(events: list[dict]) -> tuple[int, int]:
    """kernel_before_launch: (records that start before the first launch call of their correlation id, the
    largest such gap in ns)."""
    first: dict[int, int] = {}
    for e in launch_calls(events):
        corr = _int(args(e).get("correlation"))
        if corr is not None:
            first[corr] = min(first.get(corr, ns(e["ts"])), ns(e["ts"]))
    gaps = [
        first[r.correlation] - r.start
        for r in records(events)
        if r.correlation in first and r.start < first[r.correlation]
    ]  # type: ignore[index]
    return len(gaps), max(gaps, default=0)


def graphs(events: list[dict]) -> tuple[int, int, int]:
    """graph_kernels_hidden: (graph launches, of them without any GPU record, GPU records of graph launches)."""
    calls = [
        c
        for e in launch_calls(events)
        if GRAPH_LAUNCH.search(str(e.get("name"))) and (c := _int(args(e).get("correlation"))) is not None
    ]
    ids = set(calls)
    recs = [r for r in records(events) if r.correlation in ids]
    have = {r.correlation for r in recs}
    return len(calls), sum(1 for c in calls if c not in have), len(recs)


def host_window(events: list[dict]) -> int | None:
    """The length of the profiled run: the first start to the last end of the events with a start and a
    duration that are not GPU records; None without any."""
    spans = [
        span(e)
        for e in events
        if e.get("dur") is not None and e.get("ts") is not None and e.get("cat") not in GPU_CATS
    ]
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else None


def outliers(events: list[dict], windows: list[tuple[int, int]]) -> int:
    """outlier_duration: GPU records longer than the host's window; non-communication records longer than the
    (positive-length) step they start in; non-communication kernels of 10 ms or more, over 1000x the median
    of their name (5 calls or more of it)."""
    window = host_window(events)
    recs = records(events)
    by_name: dict[str, list[int]] = defaultdict(list)
    for r in recs:
        if r.kind == "kernel" and not COMMUNICATION.search(r.name):
            by_name[r.name].append(r.dur)
    medians = {}
    for name, durs in by_name.items():
        durs.sort()
        n = len(durs)
        medians[name] = (durs[n // 2] if n % 2 else (durs[n // 2 - 1] + durs[n // 2]) / 2, n)
    ordered = sorted(windows)
    count = 0
    for r in recs:
        comm = bool(COMMUNICATION.search(r.name))
        step_len = 0
        inside = [w for w in ordered if w[0] <= r.start]
        if inside and r.start <= inside[-1][1]:
            step_len = inside[-1][1] - inside[-1][0]
        median, calls = medians.get(r.name, (0, 0))
        if (
            (window is not None and r.dur > window)
            or (not comm and step_len > 0 and r.dur > step_len)
            or (
                r.kind == "kernel"
                and not comm
                and calls >= 5
                and r.dur >= 10_000_000
                and r.dur > 1000 * median
            )
        ):
            count += 1
    return count


def collapsed_steps(events: list[dict], windows: list[tuple[int, int]]) -> int:
    """step_collapse: with 3 steps or more, the steps in which no GPU record starts, when the others are at
    most a quarter of the steps (0 otherwise). A record belongs to the last step that starts at or before it,
    if it starts before that step ends."""
    if len(windows) < 3:
        return 0
    ordered = sorted(windows)
    held = [0] * len(ordered)
    for r in records(events):
        inside = [i for i, w in enumerate(ordered) if w[0] <= r.start]
        if inside and r.start <= ordered[inside[-1]][1]:
            held[inside[-1]] += 1
    empty = sum(1 for h in held if h == 0)
    holding = len(held) - empty
    return empty if empty and holding and holding <= 0.25 * len(held) else 0


# ---- why the GPU was idle --------------------------------------------------------------------------------------

SYNC_CALL = re.compile(
    r"^(cuda|hip)(Device|Stream|Event|Thread|Ctx)Synchronize$|^cu(Ctx|Stream|Event)Synchronize$"
    r"|^(cuda|hip|cu)StreamWaitEvent$"
    r"|^(cuda|hip)Memcpy(2D|3D|ToSymbol|FromSymbol|DtoH|HtoD|DtoD|Peer|WithStream)?$"
    r"|^cuMemcpy(DtoH|HtoD|DtoD|Peer|2D|3D)?(_v2)?$"
    r"|^(cuda|hip)MemcpyAsync$|^cuMemcpy\w*Async(_v2)?$"
)
LOADER = re.compile(r"DataLoader.*__next__|DataLoaderIter.*__next__")
STEP_MARKER = re.compile(r"^ProfilerStep#\d+$")


def subtract(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of `a` not covered by `b` (both merged first), by walking the two sorted lists."""
    out = []
    cuts = merge(b)
    for lo, hi in merge(a):
        at = lo
        for s, e in cuts:
            if e <= at or s >= hi:
                continue
            if s > at:
                out.append((at, s))
            at = max(at, e)
        if at < hi:
            out.append((at, hi))
    return out


def idle_causes(events: list[dict], lo: int, hi: int, device: int | None) -> dict[str, int]:
    """The idle time of `device` in [lo, hi) by cause, each instant to the first cause that holds (the
    classification of docs/analysis-timeline.md, "Why the GPU was idle"), from raw events: every host event
    counts (a single-process trace)."""
    acts = [g for g in gpu(events) if g.device == device]
    busy = merge([(g.start, g.end) for g in acts])
    first, last = min(lo, min(g.start for g in acts)), max(hi, max(g.end for g in acts))
    edges = [first, *(x for pair in busy for x in pair), last]
    whole = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b > a]
    calls = launches(events)
    queued = []
    for (
        a,
        b,
    ) in whole:  # after the launch call of the work that ends the gap (or all of it, no launch call known)
        at_end = [g for g in acts if g.start == b]
        if not at_end:
            continue
        known = [ns(calls[g.correlation]["ts"]) for g in at_end if g.correlation in calls]
        queued.append((max(a, min(known)), b) if known else (a, b))
    idle = intersect(whole, [(lo, hi)])
    host = [e for e in events if is_x(e) and e.get("ts") is not None and e.get("cat") != "cuda_sync"]
    runtime = [e for e in host if e.get("cat") in LAUNCH_CATS]
    scopes = [e for e in host if e.get("cat") in OP_CATS | {"python_function"}]
    named = lambda e: str(e.get("name") or "")  # noqa: E731
    sets = {
        "sync_wait": [span(e) for e in runtime if SYNC_CALL.search(named(e))]
        + [span(e) for e in events if e.get("cat") == "cuda_sync" and is_x(e)],
        "queued": queued,
        "runtime_call": [
            span(e) for e in runtime if not SYNC_CALL.search(named(e)) and not LAUNCH_API.search(named(e))
        ],
        "launching": [
            span(e) for e in runtime if not SYNC_CALL.search(named(e)) and LAUNCH_API.search(named(e))
        ],
        "dataloader": [span(e) for e in scopes if LOADER.search(named(e))],
        "in_op": [
            span(e)
            for e in scopes
            if e.get("cat") in CPU_OP_CATS
            and not LOADER.search(named(e))
            and not STEP_MARKER.search(named(e))
        ],
        "between_ops": [
            span(e)
            for e in scopes
            if not LOADER.search(named(e))
            and (e.get("cat") not in CPU_OP_CATS or STEP_MARKER.search(named(e)))
        ],
    }
    inside = [(g.start, g.end) for g in acts if g.end > lo and g.start < hi]
    sets["before_first_work"] = [(lo, min(s for s, _ in inside))] if inside else [(lo, hi)]
    sets["after_last_work"] = [(max(e for _, e in inside), hi)] if inside else []
    out = {}
    for cause, cover in sets.items():
        part = intersect(idle, [(s, e) for s, e in cover if e > s])
        out[cause] = union_length(part)
        idle = subtract(idle, part)
    out["untraced"] = union_length(idle)
    return out
