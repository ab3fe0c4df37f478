"""Low-efficiency candidates for the advice rules (`low_efficiency`): the hot ops that run far below the
GPU's peak. A pure function over the `efficiency` rows, so the rule engine registers it without recomputing.
Definitions: docs/efficiency.md."""

from __future__ import annotations

from dataclasses import dataclass

from opscope.analysis.efficiency.families import COMPUTE_FAMILIES
from opscope.analysis.efficiency.table import EfficiencyRow


@dataclass(frozen=True)
class LowEfficiency:
    row: EfficiencyRow
    kind: str  # "compute" (GEMM / convolution / attention under the compute threshold) | "memory"
    pct_of_peak: float  # the percentage compared with the threshold
    threshold_pct: float
    gpu_time_us: float  # the time at stake: the op's GPU time
    share: float  # gpu_time_us / the trace's GPU time (0 when unknown)


def low_efficiency_candidates(
    rows: tuple[EfficiencyRow, ...] | list[EfficiencyRow],
    compute_threshold: float = 0.30,
    bandwidth_threshold: float = 0.30,
    gpu_time_us: float = 0.0,
    min_share: float = 0.0,
) -> list[LowEfficiency]:
    """Rows below a fraction of peak, hottest first: a GEMM, convolution or attention op whose achieved FLOP/s
    is under `compute_threshold` of the peak, or a memory-bound op (bound == "memory", not in those families)
    whose achieved bytes/s is under `bandwidth_threshold` of the peak bandwidth. Rows without a percentage
    (unknown GPU) are never candidates. `gpu_time_us` (the trace's GPU time) gives each candidate its share;
    `min_share` keeps only the hot ones (e.g. 0.02: at least 2% of GPU time)."""
    found = []
    for r in rows:
        if r.family in COMPUTE_FAMILIES:
            kind, pct, threshold = "compute", r.pct_of_peak_compute, compute_threshold
        elif r.bound == "memory":
            kind, pct, threshold = "memory", r.pct_of_peak_bandwidth, bandwidth_threshold
        else:
            continue
        share = r.gpu_time_us / gpu_time_us if gpu_time_us > 0 else 0.0
        if pct is None or pct >= 100 * threshold or share < min_share:
            continue
        found.append(LowEfficiency(r, kind, pct, 100 * threshold, r.gpu_time_us, share))
    return sorted(found, key=lambda c: -c.gpu_time_us)
