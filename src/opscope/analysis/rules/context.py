"""What every rule check reads, prepared once per trace: the analysis of `opscope analyze`, the linkage (GPU
event -> launch -> CPU ops), the GPU activity of the analysed window, and a few derived tables computed on
first use (CPU ops with shapes and types, per-device idle gaps, GPU time under each op)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.base.linking import OP_KINDS, ROW, Linkage, event_columns
from opscope.analysis.base.window import Window
from opscope.analysis.base.windows import STEP_NAME, StepWindow, names_matching, select_windows
from opscope.analysis.kernels.gpu_arch import GpuIdentity, gpu_identity
from opscope.analysis.timeline.activity import Activity
from opscope.analysis.timeline.capture import Capture, classify
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

if TYPE_CHECKING:
    from opscope.analysis.overview import Analysis

S, E = intervals.START, intervals.END


@dataclass(eq=False)
class RuleContext:
    trace: Trace
    analysis: Analysis
    linkage: Linkage
    activity: Activity
    notes: list[str] = field(default_factory=list)  # rules that could not be evaluated, and why

    @functools.cached_property
    def clipped(self) -> pl.DataFrame:
        """GPU activity cut to the analysed window (kind, name, device, stream, start_ns, end_ns, category,
        launch columns, ...)."""
        return self.activity.clipped()

    @functools.cached_property
    def steps(self) -> tuple[StepWindow, ...]:
        """The ProfilerStep#N windows analysed: those of `--steps` when given, else all (none without markers)."""
        return tuple(w for w in select_windows(self.trace, self.analysis.options.steps) if w.step is not None)

    @functools.cached_property
    def selected_window(self) -> Window | None:
        """The analysed window when `--steps` (or explicit windows) chose part of the trace, else None: for
        the checks that read the trace's events directly rather than `clipped`."""
        options = self.analysis.options
        return self.activity.window if options.steps or options.windows else None

    @functools.cached_property
    def gpu(self) -> GpuIdentity:
        """The GPU the trace ran on: its device metadata, else inferred from kernel names (gpu_arch.py)."""
        return gpu_identity(self.trace)

    @functools.cached_property
    def gpu_total_ns(self) -> int:
        frame = self.clipped
        return int(frame.select((pl.col(E) - pl.col(S)).sum()).item() or 0) if frame.height else 0

    @functools.cached_property
    def window_total_ns(self) -> int:
        """The analysed window times the number of devices with activity (device time)."""
        devices = max(1, len(self.analysis.timeline.devices))
        return int(self.analysis.timeline.window_ns or 0) * devices

    def basis_ns(self, basis: str) -> int:
        return self.gpu_total_ns if basis == "gpu_time" else self.window_total_ns

    @functools.cached_property
    def kernels(self) -> pl.DataFrame:
        return self.clipped.filter(pl.col(Col.KIND) == Kind.KERNEL)

    @functools.cached_property
    def ops(self) -> pl.DataFrame:
        """CPU ops (row, name as text, tid, ts_ns, dur_ns, input_dims, input_types, op_parent_row)."""
        scopes = self.linkage.scopes.filter(pl.col(Col.KIND) == Kind.CPU_OP)
        ops = scopes.select(
            ROW,
            pl.col(Col.NAME).cast(pl.String),
            Col.PID,
            Col.TID,
            Col.TS_NS,
            Col.DUR_NS,
            pl.col(Col.INPUT_DIMS).cast(pl.String),
            "op_parent_row",
        )
        # the efficiency table's read of the ops' text columns (the same kinds and columns: read once)
        types, _ = event_columns(self.trace, ops[ROW], OP_KINDS, [Col.INPUT_TYPES, Col.CONCRETE_INPUTS])
        return ops.with_columns(types.cast(pl.String).alias(Col.INPUT_TYPES))

    @functools.cached_property
    def _shape_counts(self) -> tuple[int, int]:
        """(CPU ops, CPU ops with input shapes), counted on the link table's own columns: whether the shape rules
        can run is known without building `ops` (text of ~1.4 M ops on the 1 GB benchmark trace, recorded
        without shapes as PyTorch's profiler is by default)."""
        is_op = pl.col(Col.KIND) == Kind.CPU_OP
        ops, shaped = self.linkage.scopes.select(
            is_op.sum().alias("ops"), (is_op & pl.col(Col.INPUT_DIMS).is_not_null()).sum().alias("shaped")
        ).row(0)
        return int(ops), int(shaped)

    def shapes_missing(self) -> str | None:
        """Why the shape rules cannot run: no CPU ops, or none with input shapes (record_shapes=False)."""
        ops, shaped = self._shape_counts
        if ops == 0:
            return "no CPU operators in the trace"
        if shaped == 0:
            return "no input shapes (profile with record_shapes=True)"
        return None

    def gpu_ns_under(self, rows: pl.Series) -> pl.DataFrame:
        """For each op row in `rows`: GPU time (ns, clipped to the window) and kernel names of the GPU work
        launched inside it, at any depth. Columns: row, gpu_ns, kernels (list of names)."""
        clipped = self.clipped.select(ROW, Col.NAME, (pl.col(E) - pl.col(S)).alias("_ns"))
        joined = self.linkage.under(rows).join(clipped, on=ROW, how="inner")
        return (
            joined.group_by("scope")
            .agg(pl.col("_ns").sum().alias("gpu_ns"), pl.col(Col.NAME).unique().alias("kernels"))
            .rename({"scope": ROW})
        )

    def kernels_under(self, rows: pl.Series) -> pl.DataFrame:
        """The GPU work launched inside the op rows `rows` (at any depth), as intervals clipped to the window
        (start_ns, end_ns): what a remedy of those ops acts on."""
        inside = self.linkage.under(rows).select(ROW).unique()
        return self.clipped.join(inside, on=ROW, how="semi").select(S, E)

    def idle_touching(self, calls: pl.DataFrame) -> pl.DataFrame:
        """The GPU idle gaps (start_ns, end_ns) that overlap any of the host intervals `calls` (start_ns,
        end_ns): the idle time a host-side cause (a wait for data, a synchronisation) is responsible for, which
        is its claim on the window (savings.py). One sweep (`intervals.Coverage`), no cross join."""
        gaps = self.idle_gaps.select(S, E)
        if gaps.height == 0 or calls.height == 0:
            return gaps.head(0)
        cover = intervals.Coverage(intervals.merge(calls.select(S, E)))
        hit = cover.inside(gaps[S].to_numpy(), gaps[E].to_numpy()) > 0
        return gaps.filter(pl.Series(hit))

    @functools.cached_property
    def capture(self) -> Capture:
        """What kind of capture the window is, and its steady part (analysis/timeline/capture.py)."""
        kernels = self.kernels.height
        return classify(self.trace, self.activity.window, self.clipped.select(S, E), self.steps, kernels)

    def not_steady(self) -> str | None:
        """Why the idle rules do not run: the window is a graph capture or compilation (None: they run)."""
        if self.capture.steady:
            return None
        return (
            f"the window is not steady state ({self.capture.kind.replace('_', ' ')}: {self.capture.detail})"
        )

    @functools.cached_property
    def steady_steps(self) -> tuple[StepWindow, ...]:
        """The analysed steps inside the steady part (a warm-up step left out)."""
        if not self.steps:
            return ()
        # held whole by a steady piece: one sorted search per step (`intervals.inside_any`), not a test of
        # every piece for every step (a trace of 10,000 short steps has as many pieces)
        held = intervals.inside_any(
            pl.Series([w.start_ns for w in self.steps], dtype=pl.Int64),
            pl.Series([w.end_ns for w in self.steps], dtype=pl.Int64),
            list(self.capture.steady),
        ).to_list()
        return tuple(w for w, inside in zip(self.steps, held, strict=True) if inside)

    @functools.cached_property
    def idle_gaps(self) -> pl.DataFrame:
        """Idle gaps per device over the steady part of the analysed window (capture.py: without a long head or
        tail, a warm-up step, a graph capture or compilation): device, start_ns, end_ns."""
        frames = []
        bounds = self.capture.steady
        if not bounds:
            return pl.DataFrame(schema={Col.DEVICE: pl.Int32, S: pl.Int64, E: pl.Int64})
        pieces = pl.DataFrame(
            {S: [lo for lo, _ in bounds], E: [hi for _, hi in bounds]}, schema={S: pl.Int64, E: pl.Int64}
        )
        for device, events in self.clipped.partition_by(Col.DEVICE, as_dict=True).items():
            # the gaps over the whole steady span once, then cut to its pieces in one sweep (a gaps() call per
            # piece re-read every interval: steps x events)
            merged = intervals.merge(events.select(S, E))
            span = intervals.gaps(merged, int(bounds[0][0]), int(bounds[-1][1]))
            gaps = intervals.intersect(span, pieces)
            frames.append(gaps.select(pl.lit(device[0], dtype=pl.Int32).alias(Col.DEVICE), S, E))
        if not frames:
            return pl.DataFrame(schema={Col.DEVICE: pl.Int32, S: pl.Int64, E: pl.Int64})
        return pl.concat(frames).filter(pl.col(E) > pl.col(S))

    @functools.cached_property
    def top_ops(self) -> pl.DataFrame:
        """The outermost CPU ops and annotations (or those directly under a ProfilerStep), on any thread: name,
        start_ns, end_ns. Built once: every `cpu_ops_over` call reads it."""
        scopes = self.linkage.scopes
        markers = names_matching(scopes, Col.NAME, STEP_NAME)  # the pattern on distinct names, not every op
        steps = scopes.filter(pl.col(Col.NAME).is_in(markers))[ROW]
        under_step = pl.col("op_parent_row").is_null() | pl.col("op_parent_row").is_in(steps.to_list())
        return (
            scopes.filter(
                pl.col(Col.KIND).is_in([Kind.CPU_OP, Kind.USER_ANNOTATION])
                & under_step
                & ~pl.col(Col.NAME).is_in(markers)
            )
            .select(
                pl.col(Col.NAME).cast(pl.String),
                pl.col(Col.TS_NS).alias(S),
                (pl.col(Col.TS_NS) + pl.col(Col.DUR_NS)).alias(E),
            )
            .filter(pl.col(S).is_not_null())
        )

    @functools.cached_property
    def _top_op_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """`top_ops`' starts and ends as int64 arrays (an op without an end ends at its start), read once for
        every `cpu_ops_over` call."""
        ops = self.top_ops
        return (
            ops[S].to_numpy().astype(np.int64),
            ops[E].fill_null(ops[S]).to_numpy().astype(np.int64),
        )

    def cpu_ops_over(self, gaps: pl.DataFrame, top: int = 10) -> list[dict[str, object]]:
        """The CPU ops and annotations that overlap `gaps` most (the outermost ones, or those directly under a
        ProfilerStep, on any thread): name and overlapped time (us), summed over the 200 longest gaps.

        One sweep (`intervals.Coverage`), not a cross join of ops x gaps: the time each op overlaps the gaps,
        summed over gaps that may overlap each other (as on several devices), exactly as the join summed it."""
        if gaps.height == 0:
            return []
        ops = self.top_ops
        if ops.height == 0:
            return []
        longest = (
            gaps.with_columns((pl.col(E) - pl.col(S)).alias("_len")).sort("_len", descending=True).head(200)
        )
        lo, hi = self._top_op_bounds
        overlap = intervals.Coverage(longest).inside(lo, hi)
        hit = np.flatnonzero(overlap > 0)  # a gap meets few ops: only those are grouped by name
        best = (
            ops.select(Col.NAME)[hit]
            .with_columns(pl.Series("_ov", overlap[hit]))
            .group_by(Col.NAME)
            .agg(pl.col("_ov").sum())
            .sort(["_ov", Col.NAME], descending=[True, False])
            .head(top)
        )
        return [
            {"cpu_op": r[Col.NAME], "overlap_us": round(r["_ov"] / 1e3, 3)}
            for r in best.iter_rows(named=True)
        ]
