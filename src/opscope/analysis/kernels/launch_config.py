"""Launch configuration and theoretical occupancy per kernel, from the trace alone (no Nsight Compute).

For each (kernel name, device, grid, block, registers per thread, shared memory per block) the CUDA occupancy
calculator's rules give how many blocks fit on one SM, limited by warps (block size), registers (allocated
per warp in units of 256), shared memory (allocated in units of 128 or 256 bytes, plus 1 KB reserved per block
from sm_80 on) and the architecture's maximum of resident blocks; the smallest limit is the limiter.
Theoretical occupancy = resident blocks x warps per block / max warps per SM. Waves = grid blocks /
(resident blocks x SMs); a grid with fewer blocks than SMs leaves SMs idle (`under_filled`), and a last
partial wave wastes the slots it does not fill (`wave_efficiency` = waves / ceil(waves)). Definitions and the
relation to the trace's own "est. achieved occupancy %" are in docs/readers.md. NVIDIA only: AMD devices
(no compute capability) get no occupancy figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from opscope.analysis.base import select
from opscope.analysis.base import window as win
from opscope.analysis.kernels.gpu_arch import AMD, NVIDIA, device_vendor, gpu_identity
from opscope.analysis.kernels.kernel_facts import (
    COMMUNICATION_EXEMPT,
    PERSISTENT_EXEMPT,
    occupancy_exemption,
)
from opscope.model.meta import DeviceInfo
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular, dataclass_rows


@dataclass(frozen=True)
class ArchLimits:
    """The per-SM limits the occupancy calculator uses for one compute capability."""

    max_warps_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int = 65536
    reg_alloc_unit: int = 256  # registers are allocated per warp in these units
    warp_alloc_granularity: int = 4
    max_regs_per_thread: int = 255
    smem_per_sm: int = 65536
    smem_alloc_unit: int = 256
    smem_reserved_per_block: int = 0  # bytes the driver keeps per block (1 KB from sm_80 on)
    warp_size: int = 32


# CUDA occupancy calculator values by compute capability (major, minor).
_ARCH: dict[tuple[int, int], ArchLimits] = {
    (5, 0): ArchLimits(64, 32, smem_per_sm=65536),
    (5, 2): ArchLimits(64, 32, smem_per_sm=98304),
    (5, 3): ArchLimits(64, 32, smem_per_sm=65536),
    (6, 0): ArchLimits(64, 32, smem_per_sm=65536),
    (6, 1): ArchLimits(64, 32, smem_per_sm=98304),
    (6, 2): ArchLimits(64, 32, smem_per_sm=65536),
    (7, 0): ArchLimits(64, 32, smem_per_sm=98304),
    (7, 2): ArchLimits(64, 32, smem_per_sm=98304),
    (7, 5): ArchLimits(32, 16, smem_per_sm=65536),
    (8, 0): ArchLimits(64, 32, smem_per_sm=167936, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (8, 6): ArchLimits(48, 16, smem_per_sm=102400, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (8, 7): ArchLimits(48, 16, smem_per_sm=167936, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (8, 9): ArchLimits(48, 24, smem_per_sm=102400, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (9, 0): ArchLimits(64, 32, smem_per_sm=233472, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (10, 0): ArchLimits(64, 32, smem_per_sm=233472, smem_alloc_unit=128, smem_reserved_per_block=1024),
    (12, 0): ArchLimits(48, 32, smem_per_sm=102400, smem_alloc_unit=128, smem_reserved_per_block=1024),
}


def arch_limits(device: DeviceInfo | None) -> ArchLimits | None:
    """Limits for `device`: the table entry for its compute capability, overridden by what the trace says.
    None for an AMD device: HIP reports a compute capability too (9.0 for gfx90a, 9.4 for gfx942), but a CU's
    limits are not an SM's."""
    if device is None or not device.compute_capability or device_vendor(device) == AMD:
        return None
    try:
        major, minor = (int(p) for p in device.compute_capability.split(".")[:2])
    except ValueError:
        return None
    base = _ARCH.get((major, minor)) or _ARCH.get((major, 0))
    if base is None:
        candidates = [k for k in _ARCH if k <= (major, minor)]
        base = _ARCH[max(candidates)] if candidates else None
    if base is None:
        return None
    warp = device.warp_size or base.warp_size
    warps = device.max_warps_per_sm or (
        device.max_threads_per_sm // warp if device.max_threads_per_sm else None
    )
    return replace(
        base,
        warp_size=warp,
        max_warps_per_sm=warps or base.max_warps_per_sm,
        max_blocks_per_sm=device.max_blocks_per_sm or base.max_blocks_per_sm,
        regs_per_sm=device.regs_per_sm or base.regs_per_sm,
        smem_per_sm=device.shared_mem_per_sm or base.smem_per_sm,
    )


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int  # resident blocks per SM
    theoretical_pct: float
    limiter: str  # "registers", "shared_memory", "warps" (block size), "blocks" (max blocks per SM), "none"
    limits: dict[str, int] = field(default_factory=dict)  # blocks per SM allowed by each resource


def occupancy(threads: int, regs: int | None, smem: int | None, arch: ArchLimits) -> Occupancy | None:
    """Theoretical occupancy of one launch configuration (the CUDA occupancy calculator's rules)."""
    if threads <= 0:
        return None
    warps_per_block = math.ceil(threads / arch.warp_size)
    limits = {"warps": arch.max_warps_per_sm // warps_per_block, "blocks": arch.max_blocks_per_sm}
    if regs:
        if regs > arch.max_regs_per_thread:
            limits["registers"] = 0
        else:
            per_warp = math.ceil(regs * arch.warp_size / arch.reg_alloc_unit) * arch.reg_alloc_unit
            warps = arch.regs_per_sm // per_warp
            warps -= warps % arch.warp_alloc_granularity
            limits["registers"] = warps // warps_per_block
    need = (smem or 0) + arch.smem_reserved_per_block
    if need > 0:
        per_block = math.ceil(need / arch.smem_alloc_unit) * arch.smem_alloc_unit
        limits["shared_memory"] = arch.smem_per_sm // per_block
    blocks = min(limits.values())
    pct = 100.0 * blocks * warps_per_block / arch.max_warps_per_sm
    # The binding limit; on ties name the resource a kernel author can change first.
    order = ("registers", "shared_memory", "warps", "blocks")
    limiter = next(k for k in order if limits.get(k) == blocks) if pct < 100.0 else "none"
    return Occupancy(blocks_per_sm=blocks, theoretical_pct=min(pct, 100.0), limiter=limiter, limits=limits)


@dataclass(frozen=True)
class LaunchOptions:
    top: int = 30  # rows to show; 0 = all
    name_filter: str | None = None
    low_occupancy_pct: float = 50.0  # theoretical occupancy below this is flagged
    tail_efficiency: float = 0.8  # wave efficiency below this (with >= 1 wave) is flagged
    window: win.Window | None = None  # only kernels that start inside it (--steps); None = the whole trace


@dataclass(frozen=True)
class LaunchRow:
    name: str
    device: int | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int | None
    shared_memory: int | None
    calls: int
    total_ns: int
    blocks: int
    threads_per_block: int
    theoretical_occupancy_pct: float | None
    limiter: str | None
    est_achieved_occupancy_pct: float | None  # the trace's own estimate (Kineto), mean over calls
    waves: float | None
    wave_efficiency: float | None
    flags: tuple[str, ...] = ()

    def key(self) -> tuple[object, ...]:
        """The launch-key values of this row, in `LAUNCH_KEY` order."""
        return (
            self.name,
            self.device,
            *self.grid,
            *self.block,
            self.registers_per_thread,
            self.shared_memory,
        )


@dataclass(frozen=True)
class LaunchReport(Tabular):
    path: str
    devices: tuple[str, ...]
    kernels: int
    rows: tuple[LaunchRow, ...]
    hidden_rows: int
    has_launch_config: bool  # the trace records grid/block at all
    # "GPU: inferred Volta (sm70) from kernel names ..." when the occupancy figures use the limits of an
    # architecture inferred from kernel names (the trace describes no device)
    gpu_note: str | None = None

    def _table_rows(self) -> list[dict[str, Any]]:
        """One row per kernel launch configuration (grid and block as x/y/z columns, flags as one text)."""
        out = []
        for row in dataclass_rows(self.rows):
            grid, block = row.pop("grid"), row.pop("block")
            row |= {f"grid_{a}": v for a, v in zip("xyz", grid, strict=True)}
            row |= {f"block_{a}": v for a, v in zip("xyz", block, strict=True)}
            row["flags"] = ", ".join(row["flags"])
            out.append(row)
        return out


LAUNCH_KEY = [
    Col.NAME,
    Col.DEVICE,
    Col.GRID_X,
    Col.GRID_Y,
    Col.GRID_Z,
    Col.BLOCK_X,
    Col.BLOCK_Y,
    Col.BLOCK_Z,
    Col.REGISTERS,
    Col.SHARED_MEMORY,
]
_DIMS = [Col.GRID_X, Col.GRID_Y, Col.GRID_Z, Col.BLOCK_X, Col.BLOCK_Y, Col.BLOCK_Z]


def kernel_launches(trace: Trace, name_filter: str | None = None, text: bool = True) -> pl.LazyFrame:
    """Kernel events with the launch-key columns normalised (name as text, unknown grid/block dims as 0);
    `text=False` keeps the name categorical (for a caller that groups by it and makes text of the groups)."""
    kernels = trace.lazy().filter(pl.col(Col.KIND) == Kind.KERNEL)
    kernels = select.by_name(kernels, name_filter)
    name = pl.col(Col.NAME).cast(pl.String) if text else pl.col(Col.NAME)
    return kernels.with_columns(name, *[pl.col(c).fill_null(0) for c in _DIMS])


def launch_groups(
    trace: Trace, name_filter: str | None = None, window: win.Window | None = None
) -> pl.DataFrame:
    """Kernel launches grouped by name and launch configuration: calls, total time, mean est. occupancy; only
    the kernels that start inside `window` when given."""
    # grouped by the name's category (equal text, equal category), text made of the groups only
    launches = kernel_launches(trace, name_filter, text=False)
    if window is not None:
        launches = launches.filter(win.starts_inside(window))
    return (
        launches.select([*LAUNCH_KEY, Col.DUR_NS, Col.OCCUPANCY_PCT])
        .group_by(LAUNCH_KEY)
        .agg(
            pl.len().alias("calls"),
            pl.col(Col.DUR_NS).sum().alias("total_ns"),
            # Kineto writes 0 where it made no estimate (cutlass / cuBLAS GEMMs with large
            # shared memory or cluster launches): a kernel that ran had some warps resident,
            # so 0 means "not recorded" and stays out of the mean (null when all are 0).
            pl.col(Col.OCCUPANCY_PCT).filter(pl.col(Col.OCCUPANCY_PCT) > 0).mean().alias("est_occ"),
        )
        .with_columns(pl.col(Col.NAME).cast(pl.String))
        .sort(["total_ns", Col.NAME], descending=[True, False])
        .collect()
    )


def _flags(row: LaunchRow, sm_count: int | None, opts: LaunchOptions) -> tuple[str, ...]:
    """The row's flags. None for communication and warp-specialised / persistent kernels, whose small grid and
    one CTA per SM are by design (kernel_families.py); tensor-core kernels keep large tiles in registers and
    shared memory, so only their low occupancy is not flagged."""
    exempt = occupancy_exemption(row.name)
    if exempt in (COMMUNICATION_EXEMPT, PERSISTENT_EXEMPT):
        return ()
    flags = []
    if (
        row.theoretical_occupancy_pct is not None
        and row.theoretical_occupancy_pct < opts.low_occupancy_pct
        and exempt is None
    ):
        flags.append("low_occupancy")
    if sm_count and 0 < row.blocks < sm_count:
        flags.append("under_filled")
    if (
        row.waves is not None
        and row.waves >= 1
        and row.wave_efficiency is not None
        and row.wave_efficiency < opts.tail_efficiency
    ):
        flags.append("tail_effect")
    return tuple(flags)


def inferred_device(trace: Trace) -> DeviceInfo | None:
    """A device description from the architecture the kernel names were built for, when the trace describes
    no device (gpu_arch.py): the architecture's occupancy limits apply, with no SM count (so no waves)."""
    gpu = gpu_identity(trace)
    if not gpu.inferred or gpu.arch is None or gpu.arch.vendor != NVIDIA or trace.meta.devices:
        return None
    digits = gpu.arch.key[2:]
    return DeviceInfo(id=-1, name=gpu.arch.label, compute_capability=f"{digits[:-1]}.{digits[-1]}")


def _dim(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) else 0


def launch_config(trace: Trace, options: LaunchOptions | None = None) -> LaunchReport:
    """One row per kernel name and launch configuration, sorted by total time (see the module doc)."""
    opts = options or LaunchOptions()
    groups = launch_groups(trace, opts.name_filter, opts.window)
    inferred = inferred_device(trace)
    rows: list[LaunchRow] = []
    for r in groups.iter_rows(named=True):
        grid = (_dim(r[Col.GRID_X]), _dim(r[Col.GRID_Y]), _dim(r[Col.GRID_Z]))
        block = (_dim(r[Col.BLOCK_X]), _dim(r[Col.BLOCK_Y]), _dim(r[Col.BLOCK_Z]))
        device = r[Col.DEVICE]
        info = (
            trace.meta.describe(device)
            if device is not None
            else (trace.meta.devices[0] if trace.meta.devices else None)
        ) or inferred
        blocks, threads = grid[0] * grid[1] * grid[2], block[0] * block[1] * block[2]
        arch = arch_limits(info)
        occ = occupancy(threads, r[Col.REGISTERS], r[Col.SHARED_MEMORY], arch) if arch and threads else None
        waves = efficiency = None
        sm_count = info.sm_count if info else None
        if occ and occ.blocks_per_sm > 0 and sm_count and blocks:
            waves = blocks / (occ.blocks_per_sm * sm_count)
            efficiency = waves / math.ceil(waves)
        row = LaunchRow(
            name=r[Col.NAME] or "",
            device=device,
            grid=grid,
            block=block,
            registers_per_thread=r[Col.REGISTERS],
            shared_memory=r[Col.SHARED_MEMORY],
            calls=int(r["calls"]),
            total_ns=int(r["total_ns"] or 0),
            blocks=blocks,
            threads_per_block=threads,
            theoretical_occupancy_pct=occ.theoretical_pct if occ else None,
            limiter=occ.limiter if occ else None,
            est_achieved_occupancy_pct=r["est_occ"],
            waves=waves,
            wave_efficiency=efficiency,
        )
        rows.append(replace(row, flags=_flags(row, sm_count, opts)))
    shown = rows if opts.top <= 0 else rows[: opts.top]
    used = {r.device for r in rows}
    names = trace.meta.used_device_names(d for d in used if d is not None)
    return LaunchReport(
        path=trace.path,
        devices=names,
        kernels=sum(r.calls for r in rows),
        rows=tuple(shown),
        hidden_rows=len(rows) - len(shown),
        has_launch_config=any(r.threads_per_block > 0 for r in rows),
        gpu_note=gpu_identity(trace).note if inferred is not None else None,
    )
