"""GPU time by call stack: each GPU activity is charged to the stack of CPU ops, annotations and nn.Module
frames that were open on the launching thread when its launch call started.

This feeds the operator -> kernel flame graph of the HTML report and `opscope export --folded`. Definitions
(docs/reports.md):

- launch call: the runtime / driver event (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync, ...) with the
  GPU event's correlation id (the earliest one when an id repeats).
- frames: CPU ops (`cpu_op`), user annotations (`record_function`) and `python_function` events named
  `nn.Module: ...` (module frames) on the launch call's process and thread whose span contains the launch
  call's start; outermost first. `ProfilerStep#N` annotations are left out so that steps fold together.
- weight: the GPU event's duration in nanoseconds. A GPU event without a launch call in the trace gets the
  single frame `(no launch)`; a launch with no enclosing frame gets none (the kernel sits at the root).
- launch_op: the innermost frame (ops and annotations only, ProfilerStep#N included), null when none.

Each (pid, tid) is swept once in time order with a stack; stacks are interned as a trie (node id -> parent,
frame), so the cost is linear in the number of CPU spans plus launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import polars as pl

from opscope.analysis import select
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)
FRAME_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION, Kind.PYTHON)
MODULE_PREFIX = "nn.Module: "
STEP_FRAME = re.compile(r"^ProfilerStep#\d+$")
NO_LAUNCH = "(no launch)"

# Columns of `GpuStacks.events`.
NODE = "stack_node"  # trie node of the launch stack (0 = empty stack), null when there is no launch call
LAUNCH_TS = "launch_ts_ns"
LAUNCH_OP = "launch_op"


@dataclass(frozen=True)
class StackOptions:
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    drop_steps: bool = True  # leave ProfilerStep#N frames out of the stacks


@dataclass(frozen=True)
class GpuStacks:
    """`events`: one row per GPU activity: kind, name, device, stream, ts_ns, dur_ns, bytes, launch_ts_ns,
    launch_op, stack_node. `parents[i]` / `frames[i]` describe trie node i (node 0 is the empty root)."""

    events: pl.DataFrame
    parents: tuple[int, ...]
    frames: tuple[str, ...]
    linked: int
    missing_launch: int

    def path(self, node: int | None) -> tuple[str, ...]:
        """The frames of a node, outermost first; `(no launch)` for a null node."""
        if node is None:
            return (NO_LAUNCH,)
        out = []
        while node:
            out.append(self.frames[node])
            node = self.parents[node]
        return tuple(reversed(out))

    def only(self, keep: pl.Expr) -> GpuStacks:
        """The same stacks for the GPU events where `keep` holds (e.g. those starting in some steps)."""
        events = self.events.filter(keep)
        linked = int(events[LAUNCH_TS].is_not_null().sum())
        return replace(self, events=events, linked=linked, missing_launch=events.height - linked)

    def folded(self) -> list[tuple[tuple[str, ...], str, int]]:
        """(frames, GPU event name, total ns) per distinct stack + name, heaviest first."""
        grouped = (
            self.events.group_by(NODE, Col.NAME)
            .agg(pl.col(Col.DUR_NS).sum().alias("w"))
            .sort(["w", Col.NAME], descending=[True, False])
        )
        return [(self.path(node), name or "", int(w)) for node, name, w in grouped.iter_rows()]


class _Trie:
    def __init__(self) -> None:
        self.parents: list[int] = [0]
        self.frames: list[str] = [""]
        self._index: dict[tuple[int, str], int] = {}

    def child(self, parent: int, frame: str) -> int:
        key = (parent, frame)
        node = self._index.get(key)
        if node is None:
            node = len(self.parents)
            self._index[key] = node
            self.parents.append(parent)
            self.frames.append(frame)
        return node


def _frames(trace: Trace) -> pl.DataFrame:
    kind = pl.col(Col.KIND).cast(pl.String)
    name = pl.col(Col.NAME).cast(pl.String)
    is_frame = kind.is_in([Kind.CPU_OP, Kind.USER_ANNOTATION]) | (
        (kind == Kind.PYTHON) & name.str.starts_with(MODULE_PREFIX))
    return (
        trace.lazy().filter(is_frame & pl.col(Col.DUR_NS).is_not_null() & pl.col(Col.TS_NS).is_not_null())
        .select(pl.col(Col.PID).cast(pl.String), pl.col(Col.TID).cast(pl.String), Col.TS_NS, Col.DUR_NS,
                name.fill_null("").alias(Col.NAME), (kind == Kind.PYTHON).alias("_module"))
        .collect()
    )


def _launches(trace: Trace) -> pl.DataFrame:
    return (
        trace.lazy()
        .filter(pl.col(Col.KIND).cast(pl.String).is_in(list(LAUNCH_KINDS)) & pl.col(Col.CORRELATION).is_not_null()
                & pl.col(Col.TS_NS).is_not_null())
        .select(pl.col(Col.PID).cast(pl.String), pl.col(Col.TID).cast(pl.String), Col.TS_NS, Col.CORRELATION)
        .sort(Col.TS_NS).unique(subset=[Col.CORRELATION], keep="first", maintain_order=True)
        .collect()
    )


def _sweep(frames: pl.DataFrame, launches: pl.DataFrame, drop_steps: bool) -> tuple[pl.DataFrame, _Trie]:
    """correlation -> (stack node, innermost op) by one pass per thread."""
    trie = _Trie()
    spans: dict[tuple[str, str], list[tuple[int, int, str, bool]]] = {}
    for pid, tid, ts, dur, name, module in frames.iter_rows():
        spans.setdefault((pid, tid), []).append((ts, ts + max(dur, 0), name, module))
    calls: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for pid, tid, ts, corr in launches.iter_rows():
        calls.setdefault((pid, tid), []).append((ts, corr))
    out_corr: list[int] = []
    out_node: list[int] = []
    out_op: list[str | None] = []
    for key, thread_calls in calls.items():
        thread_spans = sorted(spans.get(key, ()), key=lambda s: (s[0], -s[1]))
        # stack entries: (end_ns, trie node, innermost op name at this depth)
        stack: list[tuple[int, int, str | None]] = []
        i = 0
        for ts, corr in sorted(thread_calls):
            while i < len(thread_spans) and thread_spans[i][0] <= ts:
                start, end, name, module = thread_spans[i]
                i += 1
                while stack and stack[-1][0] <= start:
                    stack.pop()
                parent, op = (stack[-1][1], stack[-1][2]) if stack else (0, None)
                node = parent if drop_steps and STEP_FRAME.match(name) else trie.child(parent, name)
                stack.append((end, node, op if module else name))
            while stack and stack[-1][0] <= ts:
                stack.pop()
            out_corr.append(corr)
            out_node.append(stack[-1][1] if stack else 0)
            out_op.append(stack[-1][2] if stack else None)
    table = pl.DataFrame({Col.CORRELATION: out_corr, NODE: out_node, LAUNCH_OP: out_op},
                         schema={Col.CORRELATION: pl.Int64, NODE: pl.Int64, LAUNCH_OP: pl.String})
    return table, trie


def gpu_stacks(trace: Trace, options: StackOptions | None = None) -> GpuStacks:
    """Every GPU activity of the selection with the stack it was launched from (see the module doc)."""
    opts = options or StackOptions()
    gpu = (
        select.by_streams(select.by_devices(trace.gpu_events(), opts.devices), opts.streams)
        .select(pl.col(Col.KIND).cast(pl.String), pl.col(Col.NAME).cast(pl.String), Col.DEVICE, Col.STREAM,
                Col.TS_NS, Col.DUR_NS, Col.CORRELATION, Col.BYTES)
        .filter(pl.col(Col.DUR_NS) >= 0)
        .collect()
    )
    launches = _launches(trace)
    table, trie = _sweep(_frames(trace), launches, opts.drop_steps)
    times = launches.select(Col.CORRELATION, pl.col(Col.TS_NS).alias(LAUNCH_TS))
    events = (
        gpu.join(times, on=Col.CORRELATION, how="left", maintain_order="left")
        .join(table, on=Col.CORRELATION, how="left", maintain_order="left")
        .with_columns(pl.when(pl.col(LAUNCH_TS).is_null()).then(None).otherwise(pl.col(NODE)).alias(NODE))
        .drop(Col.CORRELATION)
    )
    linked = int(events[LAUNCH_TS].is_not_null().sum())
    return GpuStacks(events=events, parents=tuple(trie.parents), frames=tuple(trie.frames), linked=linked,
                     missing_launch=events.height - linked)
