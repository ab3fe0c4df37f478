"""`compile_check`: what torch.compile did in a trace (docs/advice.md, "compile-check").

- compiled regions: CPU events `Torch-Compiled Region: F/C` (F = the compiled frame, C = its compile id), and
  the AOTAutograd functions of the older generation (torch 2.0-2.1, no frame ids): `CompiledFunction` (a
  compiled forward graph) and `CompiledFunctionBackward` (its backward). A `CompiledFunction` inside a
  `Torch-Compiled Region` is that region's own graph, not another region. Each region is placed in the
  ProfilerStep window where it starts; nested = inside another compiled region.
- graph breaks: Dynamo compiles the code after a break as a new frame (a resume function), so with one
  compiled entry point the breaks are the distinct frames F minus one; regions nested in another region are
  reported beside them. Regions without frame ids (the CompiledFunction generation) cannot tell: None.
- recompiles: distinct (F, C) with C > 0.
- fused kernels: Inductor's `triton_(poi|red|per|tem)_fused_*` GPU kernels (or `cpp_fused_*` CPU ops on a CPU
  run, with TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1) with the ops their names list, calls and time.
- compiling: Dynamo / Inductor compile and autotuning markers inside the trace, per step (compiling.py).
- eager kernels in compiled regions: other GPU kernels launched inside a region (extern GEMMs / attention that
  Inductor calls, or ops it could not lower), by kernel and launching op.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base.linking import ROW, Linkage, link
from opscope.analysis.base.windows import step_windows
from opscope.analysis.compile.compiling import Compiling, compiling
from opscope.analysis.compile.fused_names import FUSED_KERNEL, fused_ops, kernel_kind
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

REGION = r"^Torch-Compiled Region: (\d+)/(\d+)"
AOT_FORWARD = "CompiledFunction"  # the older generation's compiled graphs (AOTAutograd's autograd.Function)
AOT_BACKWARD = "CompiledFunctionBackward"
ANY_REGION = rf"{REGION}|^{AOT_FORWARD}$|^{AOT_BACKWARD}$"
FRAME, FORWARD, BACKWARD = "frame", "forward", "backward"  # Region.kind


@dataclass(frozen=True)
class Region:
    name: str
    frame: int | None  # None: a CompiledFunction region (no frame id recorded)
    compile_id: int | None
    start_ns: int
    dur_ns: int
    step: int | None
    nested: bool
    gpu_ns: int  # GPU time of the work launched inside
    kind: str = FRAME  # "frame" (Torch-Compiled Region), "forward" (CompiledFunction), "backward"


@dataclass(frozen=True)
class FusedKernel:
    name: str
    kind: str  # pointwise, reduction, persistent_reduction, template, cpp
    ops: tuple[str, ...]
    calls: int
    total_ns: int
    on_gpu: bool


@dataclass(frozen=True)
class EagerKernel:
    name: str
    op: str | None
    calls: int
    total_ns: int


@dataclass(frozen=True)
class CompileCheck:
    path: str
    regions: tuple[Region, ...]
    regions_per_step: tuple[tuple[int | None, int], ...]  # (step, top-level regions starting in it)
    frames: tuple[int, ...]
    graph_breaks: int | None  # None: the regions record no frame ids (the CompiledFunction generation)
    nested_regions: int
    recompiles: int
    fused: tuple[FusedKernel, ...]
    eager_in_regions: tuple[EagerKernel, ...]
    compiled_gpu_ns: int  # GPU time launched inside compiled regions
    gpu_ns: int  # all GPU time of the trace
    compiling: tuple[Compiling, ...] = ()  # compilation / autotuning marked inside the trace, per step

    def fused_op_names(self) -> set[str]:
        return {op for k in self.fused for op in k.ops}


def _regions(linkage: Linkage, trace: Trace) -> pl.DataFrame:
    scopes = linkage.scopes.with_columns(pl.col(Col.NAME).cast(pl.String))
    name = pl.col(Col.NAME)
    found = scopes.filter(name.str.contains(ANY_REGION)).with_columns(
        name.str.extract(REGION, 1).cast(pl.Int64).alias("frame"),
        name.str.extract(REGION, 2).cast(pl.Int64).alias("compile_id"),
        pl.when(name == AOT_FORWARD)
        .then(pl.lit(FORWARD))
        .when(name == AOT_BACKWARD)
        .then(pl.lit(BACKWARD))
        .otherwise(pl.lit(FRAME))
        .alias("kind"),
    )
    parents = dict(zip(scopes[ROW].to_list(), scopes["parent_row"].to_list(), strict=True))

    def enclosing(row: int, rows: set[int]) -> bool:
        seen = 0
        current = parents.get(row)
        while current is not None and seen < 10_000:
            if current in rows:
                return True
            current = parents.get(current)
            seen += 1
        return False

    # A CompiledFunction inside a Torch-Compiled Region is that region's graph (torch >= 2.1 records both).
    frame_rows = set(found.filter(pl.col("kind") == FRAME)[ROW].to_list())
    own_graph = found.filter(pl.col("kind") == FORWARD)[ROW].to_list()
    found = found.filter(~pl.col(ROW).is_in([r for r in own_graph if enclosing(r, frame_rows)]))
    rows = set(found[ROW].to_list())

    def nested(row: int) -> bool:
        return enclosing(row, rows)

    steps = [w for w in step_windows(trace) if w.step is not None]

    def step_of(ts: int) -> int | None:
        for w in steps:
            if w.start_ns <= ts < w.end_ns:
                return w.step
        return None

    return found.with_columns(
        pl.col(ROW).map_elements(nested, return_dtype=pl.Boolean).alias("nested"),
        pl.col(Col.TS_NS).map_elements(step_of, return_dtype=pl.Int64).alias("step"),
    )


def compile_check(trace: Trace, linkage: Linkage | None = None) -> CompileCheck:
    linked = linkage or link(trace)
    regions = _regions(linked, trace)
    gpu = linked.gpu.with_columns(pl.col(Col.NAME).cast(pl.String), pl.col("op_name").cast(pl.String))
    inside = linked.under(regions[ROW])
    per_region = (
        inside.join(gpu.select(ROW, Col.DUR_NS), on=ROW).group_by("scope").agg(pl.col(Col.DUR_NS).sum())
    )
    region_ns = dict(zip(per_region["scope"].to_list(), per_region[Col.DUR_NS].to_list(), strict=True))
    out_regions = tuple(
        Region(
            name=r[Col.NAME],
            frame=r["frame"],
            compile_id=r["compile_id"],
            start_ns=int(r[Col.TS_NS]),
            dur_ns=int(r[Col.DUR_NS] or 0),
            step=r["step"],
            nested=bool(r["nested"]),
            gpu_ns=int(region_ns.get(r[ROW], 0)),
            kind=r["kind"],
        )
        for r in regions.sort(Col.TS_NS).iter_rows(named=True)
    )
    counts: dict[int | None, int] = {}
    for reg in out_regions:
        if not reg.nested:
            counts[reg.step] = counts.get(reg.step, 0) + 1
    frames = tuple(sorted({r.frame for r in out_regions if r.frame is not None}))
    breaks = max(0, len(frames) - 1) if frames or not out_regions else None
    in_region = gpu.join(inside.select(ROW).unique(), on=ROW, how="semi")
    compiled_ns = int(in_region[Col.DUR_NS].sum() or 0) if in_region.height else 0
    eager = (
        in_region.filter(~pl.col(Col.NAME).str.contains(FUSED_KERNEL) & (pl.col(Col.KIND) == Kind.KERNEL))
        .group_by(Col.NAME, "op_name")
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum())
        .sort([Col.DUR_NS, Col.NAME], descending=[True, False])
    )
    return CompileCheck(
        path=trace.path,
        regions=out_regions,
        regions_per_step=tuple(sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))),
        frames=frames,
        graph_breaks=breaks,
        nested_regions=sum(r.nested for r in out_regions),
        recompiles=len({(r.frame, r.compile_id) for r in out_regions if r.compile_id}),
        fused=_fused(trace, gpu),
        compiled_gpu_ns=compiled_ns,
        gpu_ns=int(gpu[Col.DUR_NS].sum() or 0),
        eager_in_regions=tuple(
            EagerKernel(name=r[Col.NAME], op=r["op_name"], calls=int(r["calls"]), total_ns=int(r[Col.DUR_NS]))
            for r in eager.iter_rows(named=True)
        ),
        compiling=compiling(trace),
    )


def _fused(trace: Trace, gpu: pl.DataFrame) -> tuple[FusedKernel, ...]:
    """Inductor's kernels: on the GPU when the trace has them, else Inductor's C++ kernels as CPU ops."""
    kernels = gpu.filter((pl.col(Col.KIND) == Kind.KERNEL) & pl.col(Col.NAME).str.contains(FUSED_KERNEL))
    on_gpu = kernels.height > 0
    if not on_gpu:
        kernels = (
            trace.lazy()
            .filter(
                pl.col(Col.KIND).is_in([Kind.CPU_OP, Kind.USER_ANNOTATION]) & pl.col(Col.DUR_NS).is_not_null()
            )
            .select(pl.col(Col.NAME).cast(pl.String), Col.DUR_NS)
            .collect()
            .filter(pl.col(Col.NAME).str.contains(FUSED_KERNEL))
        )
    groups = (
        kernels.group_by(Col.NAME)
        .agg(pl.len().alias("calls"), pl.col(Col.DUR_NS).sum())
        .sort([Col.DUR_NS, Col.NAME], descending=[True, False])
    )
    return tuple(
        FusedKernel(
            name=r[Col.NAME],
            kind=kernel_kind(r[Col.NAME]),
            ops=fused_ops(r[Col.NAME]),
            calls=int(r["calls"]),
            total_ns=int(r[Col.DUR_NS] or 0),
            on_gpu=on_gpu,
        )
        for r in groups.iter_rows(named=True)
    )


def missing_fused(result: CompileCheck, expected: tuple[str, ...]) -> tuple[str, ...]:
    """The ops of `expected` that no fused kernel lists (names compared without leading underscores)."""
    have = {re.sub(r"^_+", "", op) for op in result.fused_op_names()}
    return tuple(op for op in expected if re.sub(r"^_+", "", op) not in have)
