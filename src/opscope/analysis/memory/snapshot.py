"""The caching allocator's state from a snapshot dictionary (`torch.cuda.memory._snapshot()`).

Per device, with torch's own accounting (`torch.cuda._memory_viz.segsum`): reserved = the segments' sizes;
allocated = the requested sizes of the `active_allocated` blocks; internal free = what rounding added to those
blocks (size - requested size); external free = the blocks that are not `active_allocated` (inactive, or
awaiting a free on another stream). reserved = allocated + internal free + external free. OOM events come from
the allocator history (`device_traces`, recorded by `_record_memory_history`), with the free memory the
driver reported at that moment. The snapshot is untrusted data: a field of the wrong type is an `InputError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from opscope.errors import InputError, UsageError

ALLOCATED = "active_allocated"
# Frames of the allocator's own machinery (torch's `_memory_viz._frame_filter` omits the same): skipped when no
# Python frame says where an allocation came from.
MACHINERY = (
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "CUDACachingAllocator",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
)


@dataclass(frozen=True)
class SnapshotDevice:
    device: str
    segments: int
    reserved_bytes: int
    allocated_bytes: int
    internal_free_bytes: int
    external_free_bytes: int
    active_blocks: int


@dataclass(frozen=True)
class SnapshotBlock:
    device: str
    address: int
    size: int
    requested_size: int
    stack: tuple[str, ...]  # "file:line name", innermost first, as recorded
    where: str = ""  # the frame that says where: see `_where`


@dataclass(frozen=True)
class OomEvent:
    device: str
    requested_bytes: int
    device_free_bytes: int | None
    time_us: int | None
    stack: tuple[str, ...]
    where: str = ""


@dataclass(frozen=True)
class SnapshotStats:
    path: str
    devices: tuple[SnapshotDevice, ...]
    largest_blocks: tuple[SnapshotBlock, ...]
    ooms: tuple[OomEvent, ...]
    history_entries: int
    warnings: tuple[str, ...] = ()


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"memory snapshot: {what} is not an integer ({type(value).__name__})")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"memory snapshot: {what} is not a list ({type(value).__name__})")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"memory snapshot: {what} is not a dictionary ({type(value).__name__})")
    return value


_OP_CALL = re.compile(r"^at::_ops::(\w+)::call\(")  # the dispatcher's entry for aten::NAME
_AUTOGRAD_NODE = re.compile(
    r"^torch::autograd::generated::(\w+)::apply\("
)  # a backward node, e.g. AddmmBackward0


def _stack(frames: Any) -> tuple[tuple[str, ...], str]:
    """The recorded stack ("file:line name", innermost first) and where the allocation came from:

    1. the innermost Python frame (a `.py` file);
    2. without one (the backward pass runs on autograd's own C++ thread): the ATen operator that allocated,
       `aten::NAME` from its dispatcher frame `at::_ops::NAME::call`, and the autograd node it ran in
       (`aten::mm in AddmmBackward0`);
    3. else the innermost frame outside the allocator's machinery, else the innermost.

    A snapshot recorded with C++ frames (`_record_memory_history(stacks="all")`, the default) starts every stack
    with `torch::unwind::unwind()` and the allocator's own calls, which say nothing about the program."""
    out: list[str] = []
    python = native = op = node = None
    for frame in frames if isinstance(frames, list) else []:
        if isinstance(frame, dict):
            filename, name = str(frame.get("filename", "?")), str(frame.get("name", "?"))
            text = f"{filename}:{frame.get('line', '?')} {name}"
            out.append(text)
            if python is None and filename.endswith(".py"):
                python = text
            if native is None and not any(m in name for m in MACHINERY):
                native = text
            if op is None and (found := _OP_CALL.match(name)):
                op = f"aten::{found.group(1)}"
            if node is None and (found := _AUTOGRAD_NODE.match(name)):
                node = found.group(1)
    if python is None and op is not None:
        return tuple(out), f"{op} in {node}" if node else op
    return tuple(out), python or native or (out[0] if out else "")


def _history_devices(snapshot: dict[str, Any]) -> set[str]:
    traces = snapshot.get("device_traces", [])
    return {f"cuda:{i}" for i, t in enumerate(traces if isinstance(traces, list) else []) if t}


def chosen_devices(wanted: tuple[str, ...], present: list[str]) -> set[str]:
    """`--device` names (`cuda:1`, or a bare index `1`) that the snapshot has; none of them: a usage error, as
    for a trace."""
    chosen = {d if ":" in d else f"cuda:{d}" for d in wanted} & set(present)
    if not chosen:
        raise UsageError(
            f"--device: the snapshot has no {', '.join(wanted)} (it has {', '.join(present) or 'no device'})"
        )
    return chosen


def snapshot_stats(
    snapshot: dict[str, Any], path: str = "", devices: tuple[str, ...] | None = None, top: int = 20
) -> SnapshotStats:
    per: dict[int, list[int]] = {}
    blocks: list[SnapshotBlock] = []
    warnings: list[str] = []
    for n, raw in enumerate(_list(snapshot.get("segments"), "segments")):
        seg = _dict(raw, f"segment {n}")
        index = _int(seg.get("device", 0), f"segment {n} device")
        acc = per.setdefault(
            index, [0, 0, 0, 0, 0, 0]
        )  # segments, reserved, allocated, internal, external, n
        acc[0] += 1
        total = _int(seg.get("total_size"), f"segment {n} total_size")
        acc[1] += total
        seen = 0
        for m, braw in enumerate(_list(seg.get("blocks", []), f"segment {n} blocks")):
            b = _dict(braw, f"segment {n} block {m}")
            size = _int(b.get("size"), f"segment {n} block {m} size")
            seen += size
            if b.get("state") == ALLOCATED:
                requested = _int(b.get("requested_size", size), f"segment {n} block {m} requested_size")
                acc[2] += requested
                acc[3] += size - requested
                acc[5] += 1
                blocks.append(
                    SnapshotBlock(
                        f"cuda:{index}",
                        _int(b.get("address", 0), "block address"),
                        size,
                        requested,
                        *_stack(b.get("frames")),
                    )
                )
            else:
                acc[4] += size
        if seen != total:
            warnings.append(
                f"cuda:{index}: segment {n}: blocks sum to {seen:,} bytes, the segment has {total:,}"
            )
    ooms: list[OomEvent] = []
    history = 0
    for index, raw in enumerate(_list(snapshot.get("device_traces", []), "device_traces")):
        for k, eraw in enumerate(_list(raw, f"device_traces[{index}]")):
            entry = _dict(eraw, f"device_traces[{index}][{k}]")
            history += 1
            if entry.get("action") == "oom":
                free = entry.get("device_free")
                when = entry.get("time_us")
                ooms.append(
                    OomEvent(
                        f"cuda:{index}",
                        _int(entry.get("size", 0), "oom size"),
                        free if isinstance(free, int) and not isinstance(free, bool) else None,
                        when if isinstance(when, int) and not isinstance(when, bool) else None,
                        *_stack(entry.get("frames")),
                    )
                )
    out = [SnapshotDevice(f"cuda:{i}", a[0], a[1], a[2], a[3], a[4], a[5]) for i, a in sorted(per.items())]
    if devices:
        present = sorted({d.device for d in out} | {o.device for o in ooms} | _history_devices(snapshot))
        chosen = chosen_devices(devices, present)
        out = [d for d in out if d.device in chosen]
        blocks = [b for b in blocks if b.device in chosen]
        ooms = [o for o in ooms if o.device in chosen]
    blocks.sort(key=lambda b: (-b.size, b.device, b.address))
    return SnapshotStats(
        path, tuple(out), tuple(blocks[: top or None]), tuple(ooms), history, tuple(warnings)
    )
