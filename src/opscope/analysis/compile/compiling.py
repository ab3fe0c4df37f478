"""Compilation inside the profiled steps: torch.compile compiling (or recompiling) while the profiler recorded.

Dynamo and Inductor mark their phases in the trace (torch >= 2.5, `dynamo_timed`): CPU annotations named
`PHASE_data: ..., compile_id=F/C` (`dynamo_data`, `entire_frame_compile_data`, `inductor_compile_data`, ...), and
Inductor's autotuning of a Triton kernel as `CachingAutotuner.benchmark_all_configs_data: kernel_name=K, ...`
(it runs the kernel's candidate configurations, each several times, with a cache-clearing fill between runs).
A step holding such markers spent part of its time compiling and benchmarking rather than running the model:
its time and its GPU work are not the steady state. Seen on an H200 (tests/data/gpu/h200/compiled...): a
recompile for a new input shape made step 1 take 1.84 s against 2-5 ms for the others, and the autotuning's
728 fills were 76% of the trace's GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.windows import overlap_pairs, step_windows
from opscope.model.schema import Col
from opscope.model.trace import Trace

COMPILE_ID = r"compile_id=(\d+/\d+)"
AUTOTUNE = r"^CachingAutotuner\.benchmark_all_configs"
KERNEL_NAME = r"kernel_name=([^,\s]+)"


@dataclass(frozen=True)
class Compiling:
    step: int | None  # the ProfilerStep the markers fall in; None: outside every step
    compile_ids: tuple[str, ...]  # "F/C", in the order first seen
    autotuned_kernels: tuple[str, ...]  # Triton kernels Inductor benchmarked, in the order first seen
    first_ns: int  # the first marker's start
    last_ns: int  # the last marker's end


def compiling(trace: Trace) -> tuple[Compiling, ...]:
    """Per step (in step order, then outside steps), the compile ids and autotuned kernels marked in it."""
    name = pl.col(Col.NAME).cast(pl.String)
    marks = (
        trace.lazy()
        .select(Col.NAME, Col.TS_NS, Col.DUR_NS)
        .filter(name.str.contains(COMPILE_ID) | name.str.contains(AUTOTUNE))
        .select(
            name.str.extract(COMPILE_ID, 1).alias("compile_id"),
            pl.when(name.str.contains(AUTOTUNE)).then(name.str.extract(KERNEL_NAME, 1)).alias("kernel"),
            pl.col(Col.TS_NS),
            (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS).fill_null(0)).alias("end_ns"),
        )
        .sort(Col.TS_NS)
        .collect()
    )
    if marks.height == 0:
        return ()
    # each marker in the step window holding its start (the first, where windows overlap): the placement
    # `select.by_steps(clip=False)` and compile-check's regions use
    windows = tuple(w for w in step_windows(trace) if w.step is not None)
    starts = marks[Col.TS_NS].to_numpy().astype(np.int64)
    event, window = overlap_pairs(starts, starts, windows)
    event, first = np.unique(event, return_index=True)
    step = np.full(marks.height, -1, dtype=np.int64)
    step[event] = np.array([w.step for w in windows], dtype=np.int64)[window[first]]
    numbers = pl.Series("step", step)
    placed = marks.with_columns(pl.when(numbers >= 0).then(numbers).alias("step"))
    grouped = (
        placed.group_by("step", maintain_order=True)
        .agg(
            pl.col("compile_id").drop_nulls().unique(maintain_order=True),
            pl.col("kernel").drop_nulls().unique(maintain_order=True),
            pl.col(Col.TS_NS).min().alias("first_ns"),
            pl.col("end_ns").max().alias("last_ns"),
        )
        .sort("step", nulls_last=True)
    )
    return tuple(
        Compiling(
            step=r["step"],
            compile_ids=tuple(r["compile_id"]),
            autotuned_kernels=tuple(r["kernel"]),
            first_ns=int(r["first_ns"]),
            last_ns=int(r["last_ns"]),
        )
        for r in grouped.iter_rows(named=True)
    )
