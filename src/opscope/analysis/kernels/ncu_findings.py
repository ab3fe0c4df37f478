"""The seed's reading of Nsight Compute metrics, per kernel, as findings of the same `Finding` type as `advise`
(analysis/findings.py). Pure: the kernel rows of `ncu_rows` in, findings out. Definitions and thresholds:
docs/readers.md ("Nsight Compute on its own").

- `ncu-memory-bound`: memory throughput at or above 60% of peak and above SM throughput: the kernel moves data
  more than it computes (fusion, lower precision, tensor cores);
- `ncu-low-sm-throughput`: SM throughput below 70% of peak on a kernel that is not memory-bound: the SMs wait
  (data dependencies, load imbalance, too few blocks);
- `ncu-low-occupancy`: achieved occupancy below 50%, with the limiter of the theoretical occupancy (the
  smallest of ncu's block limits: registers, shared memory, block size, blocks per SM) and the grid's waves;
- `ncu-bank-conflicts`: shared-memory bank conflicts at or above 10% of the shared-memory wavefronts, where
  the export measured them (ncu's own SharedMemoryConflicts rule uses the same ratio and threshold);
- `ncu-rules`: ncu's own rule results for the kernel (`Rule Name`, `Rule Type`, `Rule Description`, the
  estimated speedup where given), quoted verbatim as evidence; the advice is ncu's, never ours.

Only kernels that matter are read: with durations, those with at least 1% of the profiled time. An export has
no timeline, hence no critical-path saving (`predicted_saving_ns` stays None): where it has durations,
findings are ranked by time at stake (the kernel's summed duration; share of the profiled time, severity by
share with advise's cut-offs); without durations every finding has no time at stake, and they are ranked
by their distance from the threshold (relative: (70 - 39) / 70 for an SM throughput of 39%; ncu's estimated
speedup / 100 for its rules), `warn` from a distance of 0.5, `info` below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from opscope.analysis.findings import INFO, MAX_EVIDENCE, WARN, Finding, severity
from opscope.analysis.kernels.metrics import base_name
from opscope.analysis.kernels.ncu_rows import SHARED_MEM, NcuRow, NcuRule

MEMORY_BOUND, LOW_SM, LOW_OCCUPANCY, BANK_CONFLICTS, NCU_RULES = (
    "ncu-memory-bound",
    "ncu-low-sm-throughput",
    "ncu-low-occupancy",
    "ncu-bank-conflicts",
    "ncu-rules",
)
RULE_IDS: Final = (MEMORY_BOUND, LOW_SM, LOW_OCCUPANCY, BANK_CONFLICTS, NCU_RULES)
WARN_DISTANCE: Final = 0.5  # without durations: a finding this far from its threshold is `warn`
_LIMIT_ADVICE = {
    "registers": "cap the registers per thread ({regs}) with `__launch_bounds__` or `-maxrregcount`, or keep "
    "less state per thread",
    "shared memory": "ask for less shared memory per block ({smem} bytes: smaller tiles, fewer pipeline stages) "
    "or raise the kernel's shared-memory carve-out",
    "block size": "choose a block size whose warps fill the SM's warp slots evenly (128, 256 or 512 threads; "
    "now {block})",
    "blocks per SM": "use fewer, larger blocks (now {block} threads): the per-SM block limit binds first",
}


@dataclass(frozen=True)
class FindingOptions:
    low_sm_throughput_pct: float = 70.0
    memory_bound_pct: float = 60.0
    low_occupancy_pct: float = 50.0
    bank_conflict_pct: float = 10.0
    matters_share: float = 0.01  # with durations: kernels below this share of the profiled time are not read


@dataclass(frozen=True)
class NcuFindings:
    findings: tuple[Finding, ...]  # ranked (see the module doc)
    rules_checked: tuple[str, ...]


@dataclass(frozen=True)
class _Hit:
    id: str
    metric: str
    value: float
    threshold: float
    distance: float  # relative distance from the threshold, for ranking without durations
    title: str
    advice: str
    evidence: tuple[dict[str, Any], ...]
    source: str = "own"


def kernel_findings(
    rows: Sequence[NcuRow], rules: Sequence[NcuRule], total_ns: float | None, options: FindingOptions
) -> NcuFindings:
    """Findings for every kernel row that matters, ranked (see the module doc)."""
    by_kernel: dict[str, list[NcuRule]] = {}
    for rule in rules:
        by_kernel.setdefault(rule.kernel, []).append(rule)
    ranked: list[tuple[tuple[float, float, str, str], Finding]] = []
    for row in rows:
        time_ns = row.total_ns if total_ns else None
        share = (time_ns or 0.0) / total_ns if total_ns else 0.0
        if total_ns and share < options.matters_share:
            continue
        hits = [
            _memory_bound(row, options) or _low_sm(row, options),
            _low_occupancy(row, options),
            _bank_conflicts(row, options),
            _ncu_rules(row, by_kernel.get(row.raw_name, [])),
        ]
        for hit in hits:
            if hit is None:
                continue
            if time_ns is not None:
                level = severity(share)
            else:
                level = WARN if hit.distance >= WARN_DISTANCE else INFO
            finding = Finding(
                id=hit.id,
                severity=level,
                title=hit.title,
                time_at_stake_ns=int(time_ns or 0),
                share=share,
                metric=hit.metric,
                value=hit.value,
                threshold=hit.threshold,
                evidence=hit.evidence[:MAX_EVIDENCE],
                advice=hit.advice,
                source=hit.source,
            )
            ranked.append(((-(time_ns or 0.0), -hit.distance, hit.id, hit.title), finding))
    ranked.sort(key=lambda pair: pair[0])
    return NcuFindings(findings=tuple(f for _, f in ranked), rules_checked=RULE_IDS)


def short_name(name: str) -> str:
    """A kernel's name for a title: its base name (no `void`, namespaces, parameters), with its first template
    argument when the base name alone is a generic wrapper (`Kernel<cutlass_80_..._align8>`)."""
    base = base_name(name) or name.strip()
    if len(base) > 12:
        return base
    found = re.search(re.escape(base) + r"<([^<>,]{1,80})[,>]", name)
    return f"{base}<{found.group(1).strip()}>" if found else base


def _short(row: NcuRow) -> str:
    return f"{short_name(row.name)} (ID {row.first_launch})"


def _fmt(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _evidence(row: NcuRow, *fields: str) -> dict[str, Any]:
    """The kernel, its launches and the mean of each field (with min and max when launches differ)."""
    out: dict[str, Any] = {"kernel": row.name, "launches": row.launches}
    for name in fields:
        stat = row.stats[name]
        if stat.mean is None:
            continue
        out[name] = _figure(stat.mean)
        if row.launches > 1 and stat.min != stat.max and stat.min is not None and stat.max is not None:
            out[f"{name}_min"], out[f"{name}_max"] = _figure(stat.min), _figure(stat.max)
    return out


def _figure(value: float) -> float | int:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else round(value, 3)


def _memory_pct(row: NcuRow) -> tuple[str, float | None]:
    for name in ("memory_throughput_pct", "dram_throughput_pct"):
        if row.mean(name) is not None:
            return name, row.mean(name)
    return "memory_throughput_pct", None


def _memory_bound(row: NcuRow, opts: FindingOptions) -> _Hit | None:
    field, memory = _memory_pct(row)
    sm = row.mean("sm_throughput_pct")
    if memory is None or memory < opts.memory_bound_pct or (sm is not None and sm >= memory):
        return None
    tensor = row.mean("tensor_inst")
    tensor_text = f" (tensor-pipe instructions here: {tensor:,.0f})" if tensor is not None else ""
    return _Hit(
        id=MEMORY_BOUND,
        metric=field,
        value=memory,
        threshold=opts.memory_bound_pct,
        distance=(memory - opts.memory_bound_pct) / (100.0 - opts.memory_bound_pct),
        title=f"memory-bound: memory {memory:.1f}% of peak, SM {_fmt(sm)}%: {_short(row)}",
        advice=f"Memory throughput is {memory:.1f}% of peak and SM throughput {_fmt(sm)}%: the kernel is limited "
        "by moving data, not by math. Move fewer bytes: fuse it with the kernels around it (elementwise work "
        "into the epilogue of the GEMM before it), keep tensors in fp16/bf16, reuse data through shared memory; "
        f"where it does matrix math, run it on tensor cores{tensor_text}.",
        evidence=(_evidence(row, field, "sm_throughput_pct", "dram_bytes", "tensor_inst", "duration_ns"),),
    )


def _low_sm(row: NcuRow, opts: FindingOptions) -> _Hit | None:
    sm = row.mean("sm_throughput_pct")
    if sm is None or sm >= opts.low_sm_throughput_pct:
        return None
    _, memory = _memory_pct(row)
    waves = row.mean("waves_per_sm")
    return _Hit(
        id=LOW_SM,
        metric="sm_throughput_pct",
        value=sm,
        threshold=opts.low_sm_throughput_pct,
        distance=(opts.low_sm_throughput_pct - sm) / opts.low_sm_throughput_pct,
        title=f"low SM throughput: {sm:.1f}% (< {opts.low_sm_throughput_pct:g}%): {_short(row)}",
        advice=f"SM throughput is {sm:.1f}% of peak and memory throughput {_fmt(memory)}%: neither is busy, so "
        "the SMs mostly wait, on data dependencies (each instruction waiting for a load or the result before "
        f"it) or on load imbalance (a few blocks or SMs doing the work; {_fmt(waves, 2)} waves per SM). Give "
        "each thread more independent work (unroll, more elements per thread) and the grid more, evener "
        "blocks; ncu's Warp State Statistics section names the stall reasons.",
        evidence=(
            _evidence(
                row, "sm_throughput_pct", "memory_throughput_pct", "waves_per_sm", "grid_size", "duration_ns"
            ),
        ),
    )


def _low_occupancy(row: NcuRow, opts: FindingOptions) -> _Hit | None:
    achieved = row.mean("achieved_occupancy_pct")
    if achieved is None or achieved >= opts.low_occupancy_pct:
        return None
    theoretical, waves = row.mean("theoretical_occupancy_pct"), row.mean("waves_per_sm")
    limiter = row.limiter
    parts = []
    if limiter in _LIMIT_ADVICE and theoretical is not None:
        text = _LIMIT_ADVICE[limiter].format(
            regs=_fmt(row.mean("registers_per_thread"), 0),
            smem=_fmt(row.mean(SHARED_MEM), 0),
            block=_fmt(row.mean("block_size"), 0),
        )
        parts.append(f"Theoretical occupancy is capped at {theoretical:.1f}% by {limiter}: {text}.")
    if theoretical is None:  # an export without it (a rocprof-compute database): no comparison to make
        parts.append(
            f"Achieved occupancy is {achieved:.1f}% of the GPU's wavefront (warp) slots: its compute units are not "
            f"kept full, by too few blocks (a grid of {_fmt(row.mean('grid_size'), 0)}), blocks that finish "
            "unevenly (load imbalance) or resources (registers, shared memory / LDS) that let few blocks in; "
            "launch more, evener blocks or fuse small launches."
        )
    elif achieved < 0.8 * theoretical:
        parts.append(
            f"Achieved occupancy ({achieved:.1f}%) is below the theoretical ({_fmt(theoretical)}%): the SMs are "
            f"not kept full, by too few blocks ({_fmt(waves, 2)} waves per SM) or blocks that finish unevenly "
            "(a partial last wave, load imbalance); launch more, evener blocks or fuse small launches."
        )
    evidence = _evidence(
        row,
        "achieved_occupancy_pct",
        "theoretical_occupancy_pct",
        "waves_per_sm",
        "registers_per_thread",
        SHARED_MEM,
        "block_size",
        "grid_size",
    )
    return _Hit(
        id=LOW_OCCUPANCY,
        metric="achieved_occupancy_pct",
        value=achieved,
        threshold=opts.low_occupancy_pct,
        distance=(opts.low_occupancy_pct - achieved) / opts.low_occupancy_pct,
        title=f"low occupancy: {achieved:.1f}% achieved, {_fmt(theoretical)}% theoretical (limiter: "
        f"{limiter or 'unknown'}): {_short(row)}"
        if theoretical is not None
        else f"low occupancy: {achieved:.1f}% achieved (no theoretical occupancy recorded): {_short(row)}",
        advice=" ".join(parts),
        evidence=({**evidence, "limiter": limiter or "unknown"},),
    )


def _bank_conflicts(row: NcuRow, opts: FindingOptions) -> _Hit | None:
    conflicts, wavefronts = row.mean("shared_bank_conflicts"), row.mean("shared_wavefronts")
    if conflicts is None or not wavefronts:
        return None
    pct = 100.0 * conflicts / wavefronts
    if pct < opts.bank_conflict_pct:
        return None
    return _Hit(
        id=BANK_CONFLICTS,
        metric="shared_bank_conflict_pct",
        value=pct,
        threshold=opts.bank_conflict_pct,
        distance=(pct - opts.bank_conflict_pct) / (100.0 - opts.bank_conflict_pct),
        title=f"bank conflicts: {pct:.1f}% of shared-memory wavefronts: {_short(row)}",
        advice=f"{pct:.1f}% of the shared-memory wavefronts come from bank conflicts (threads of a warp hitting "
        "the same bank, served one after another): pad the shared array (e.g. [32][33] instead of [32][32]) "
        "or swizzle the index.",
        evidence=(_evidence(row, "shared_bank_conflicts", "shared_wavefronts", "duration_ns"),),
    )


def _ncu_rules(row: NcuRow, rules: list[NcuRule]) -> _Hit | None:
    """ncu's rule results for the kernel, each distinct (rule, type, text) once with the launches it came
    from, verbatim."""
    if not rules:
        return None
    grouped: dict[tuple[str, str, str], list[NcuRule]] = {}
    for rule in rules:
        grouped.setdefault((rule.rule, rule.type, rule.message), []).append(rule)
    evidence = []
    for (name, kind, message), same in grouped.items():
        item: dict[str, Any] = {
            "kernel": row.name,
            "rule": name,
            "type": kind,
            "launches": ", ".join(str(r.launch) for r in same[:10]) + (" ..." if len(same) > 10 else ""),
            "message": message,
        }
        speedups = [r.speedup_pct for r in same if r.speedup_pct is not None]
        if speedups:
            kind_text = next((r.speedup_type for r in same if r.speedup_type), None)
            item["estimated_speedup"] = f"{max(speedups):g}%" + (f" ({kind_text})" if kind_text else "")
        evidence.append(item)
    speedup = max((r.speedup_pct for r in rules if r.speedup_pct is not None), default=0.0)
    names = ", ".join(dict.fromkeys(f"{r.rule} ({r.type})" for r in rules))
    return _Hit(
        id=NCU_RULES,
        metric="ncu_estimated_speedup_pct",
        value=speedup,
        threshold=0.0,
        distance=speedup / 100.0,
        title=f"Nsight Compute rules: {names}: {_short(row)}",
        advice="Nsight Compute's own rule results for this kernel, quoted verbatim in the evidence "
        "(their advice is ncu's, not opscope's).",
        evidence=tuple(evidence),
        source="ncu",
    )
