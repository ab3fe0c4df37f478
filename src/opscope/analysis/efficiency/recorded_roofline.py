"""Roofline points a profiler measured (rocprof-compute): each kernel's performance and arithmetic intensity from
its hardware counters, against the roofs of the profiler's own benchmark of that GPU. opscope's own efficiency
table models FLOPs and bytes from operator shapes; these points are measured, so they are shown as recorded,
beside it, never mixed into it.

Per kernel: GFLOP/s and FLOP per byte at L1, L2 and HBM (and LDS where recorded), as the reader kept them in the
trace's metadata (`ingest/rocprof_compute.py`), with the kernel's dispatches and GPU time from the trace. Derived
here, each defined once (docs/efficiency.md, "Recorded roofline"):
- compute roof: the highest of the benchmark's peaks for the data types the analysis was run for (`FP32`: the
  VALU `FP32Flops` and the matrix-core `MFMAF32Flops`);
- HBM roof: HBM intensity x the benchmark's HBM bandwidth (`HBMBw`, GB/s), the most the kernel could reach at its
  intensity were it memory-bound;
- attainable = min(compute roof, HBM roof); percent of roof = GFLOP/s / attainable;
- bound: "memory" where the HBM roof is below the compute roof, else "compute"; a kernel with no FLOPs (a copy,
  a fill, integer work) has no point on a FLOP roofline: no roof, no percentage, no bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import polars as pl

from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

# rocprof-compute's data types -> the benchmark peaks (GFLOP/s or GOP/s) that bound them
PEAKS_BY_TYPE: Final[dict[str, tuple[str, ...]]] = {
    "FP64": ("FP64Flops", "MFMAF64Flops"),
    "FP32": ("FP32Flops", "MFMAF32Flops"),
    "FP16": ("FP16Flops", "MFMAF16Flops"),
    "BF16": ("MFMABF16Flops",),
    "FP8": ("MFMAF8Flops",),
    "FP6": ("MFMAF6Flops",),
    "FP4": ("MFMAF4Flops",),
    "I8": ("I8Ops", "MFMAI8Ops"),
    "INT8": ("I8Ops", "MFMAI8Ops"),
    "I32": ("I32Ops",),
    "I64": ("I64Ops",),
}
LEVELS: Final = ("l1", "l2", "hbm", "lds")


@dataclass(frozen=True)
class RooflinePoint:
    kernel: str
    dispatches: int
    gpu_time_ns: int
    gflops: float | None
    intensity: dict[str, float | None]  # level -> FLOP per byte
    hbm_roof_gflops: float | None
    attainable_gflops: float | None
    pct_of_roof: float | None
    bound: str | None  # "memory" / "compute"; None without FLOPs, an HBM intensity or a compute roof


@dataclass(frozen=True)
class RecordedRoofline:
    source: str  # the reader that kept it ("rocprof-compute")
    data_types: tuple[str, ...]
    roofs: dict[str, float]  # the benchmark's peaks as recorded (GB/s, GFLOP/s)
    compute_roof_gflops: float | None
    compute_roofs: tuple[str, ...]  # the benchmark peaks the compute roof is the highest of
    hbm_gbps: float | None
    points: tuple[RooflinePoint, ...]  # by GPU time, largest first


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def recorded_roofline(trace: Trace) -> RecordedRoofline | None:
    """The recorded points of `trace`, or None when its profiler recorded none."""
    extra = trace.meta.extra
    raw = extra.get("roofline")
    if not isinstance(raw, list) or not raw:
        return None
    roofs = {str(k): v for k, v in (extra.get("roofline_peaks") or {}).items() if _number(v) is not None}
    types = tuple(str(t) for t in extra.get("roofline_data_types") or ())
    keys = tuple(key for t in types for key in PEAKS_BY_TYPE.get(t.upper(), ()) if key in roofs)
    compute = max(roofs[key] for key in keys) if keys else None
    hbm = _number(roofs.get("HBMBw"))
    names = [str(p.get("kernel")) for p in raw if isinstance(p, dict)]
    times = (
        trace.lazy()
        .filter((pl.col(Col.KIND) == Kind.KERNEL) & pl.col(Col.NAME).cast(pl.String).is_in(names))
        .group_by(pl.col(Col.NAME).cast(pl.String))
        .agg(pl.len().alias("n"), pl.col(Col.DUR_NS).sum().alias("t"))
        .collect()
    )
    by_name = {name: (int(n), int(t or 0)) for name, n, t in times.iter_rows()}
    points = []
    for p in raw:
        if not isinstance(p, dict):
            continue
        name = str(p.get("kernel"))
        gflops = _number(p.get("gflops"))
        intensity = {level: _number(p.get(f"ai_{level}")) for level in LEVELS if f"ai_{level}" in p}
        ai_hbm = intensity.get("hbm")
        # no FLOPs (a copy, a fill, an integer kernel): no point on a FLOP roofline, no bound
        hbm_roof = ai_hbm * hbm if ai_hbm and hbm is not None and gflops else None
        roofs_here = [r for r in (compute, hbm_roof) if r is not None] if gflops else []
        attainable = min(roofs_here) if roofs_here else None
        bound = None
        if hbm_roof is not None and compute is not None:
            bound = "memory" if hbm_roof < compute else "compute"
        dispatches, time_ns = by_name.get(name, (0, 0))
        points.append(
            RooflinePoint(
                kernel=name,
                dispatches=dispatches,
                gpu_time_ns=time_ns,
                gflops=gflops,
                intensity=intensity,
                hbm_roof_gflops=hbm_roof,
                attainable_gflops=attainable,
                pct_of_roof=100.0 * gflops / attainable if gflops is not None and attainable else None,
                bound=bound,
            )
        )
    points.sort(key=lambda p: (-p.gpu_time_ns, p.kernel))
    return RecordedRoofline(
        source=str(trace.meta.format),
        data_types=types,
        roofs=roofs,
        compute_roof_gflops=compute,
        compute_roofs=keys,
        hbm_gbps=hbm,
        points=tuple(points),
    )
