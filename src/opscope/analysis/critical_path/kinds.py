"""The edge kinds of the critical path's graphs (the breakdown classes: HTA's `bound_by` names plus sync_wait,
memcpy and gpu_backlog) and the one way an edge table is made (`edge_frame`). Definitions:
docs/critical-path.md."""

from __future__ import annotations

import numpy as np
import polars as pl

CPU_BOUND = "cpu_bound"
GPU_COMPUTE = "gpu_compute_bound"
GPU_COMM = "gpu_communication_bound"
KERNEL_KERNEL = "gpu_kernel_kernel_overhead"
LAUNCH = "gpu_kernel_launch_overhead"
SYNC_WAIT = "sync_wait"
MEMCPY = "memcpy"
BACKLOG = "gpu_backlog"  # a launch waiting for GPU work launched before the window (the GPU runs behind)
EDGE_KINDS: tuple[str, ...] = (
    CPU_BOUND,
    GPU_COMPUTE,
    GPU_COMM,
    KERNEL_KERNEL,
    LAUNCH,
    SYNC_WAIT,
    MEMCPY,
    BACKLOG,
)
SCALED_KINDS: tuple[str, ...] = (CPU_BOUND, GPU_COMPUTE, GPU_COMM, SYNC_WAIT, MEMCPY)  # work, not overhead
# An edge's kind: its index in EDGE_KINDS, read as text (a u32 per edge: gathering and concatenating text per
# edge cost ~2 ms a step)
EDGE_KIND = pl.Enum(EDGE_KINDS)

_KIND_TEXT = pl.Series("kind", EDGE_KINDS, dtype=EDGE_KIND)


def kinds(mask: np.ndarray, if_true: str, if_false: str) -> pl.Series:
    """The edge kind `if_true` where `mask`, else `if_false`, gathered from one table of the kinds (a numpy
    text array takes ~0.4 us a row to become a polars column: 11 ms for a step's program order)."""
    return _KIND_TEXT.gather(np.where(mask, code(if_true, len(mask)), code(if_false, len(mask))))


def code(kind: str, n: int) -> np.ndarray:
    """`n` times the index of `kind` in the kinds."""
    return np.full(n, EDGE_KINDS.index(kind), dtype=np.uint32)


def edge_frame(
    src: np.ndarray, dst: np.ndarray, weight: np.ndarray, kind: str | pl.Series, owner: np.ndarray
) -> pl.DataFrame:
    """Edges: src, dst (node ids), weight_ns (at least 0), kind, owner (event index, -1), sync (False: the
    synchronisation edges set it themselves)."""
    return pl.DataFrame(
        {
            "src": src.astype(np.int64),
            "dst": dst.astype(np.int64),
            "weight_ns": np.maximum(weight, 0).astype(np.int64),
            "kind": kind if isinstance(kind, pl.Series) else _KIND_TEXT.gather(code(kind, len(src))),
            "owner": owner.astype(np.int64),
            "sync": np.zeros(len(src), dtype=bool),
        }
    )


def no_edges() -> pl.DataFrame:
    none = np.empty(0, dtype=np.int64)
    return edge_frame(none, none, none, CPU_BOUND, none)
