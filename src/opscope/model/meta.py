"""Trace metadata: what the profiler said about the run beside its events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceInfo:
    """One accelerator as described by the trace (Kineto `deviceProperties`, nsys `TARGET_INFO_GPU`, ...)."""

    id: int
    name: str
    sm_count: int | None = None
    max_threads_per_sm: int | None = None
    max_threads_per_block: int | None = None
    regs_per_sm: int | None = None
    regs_per_block: int | None = None
    shared_mem_per_sm: int | None = None
    shared_mem_per_block: int | None = None
    shared_mem_per_block_optin: int | None = None
    warp_size: int | None = None
    total_memory: int | None = None
    compute_capability: str | None = None
    max_warps_per_sm: int | None = None  # nsys TARGET_INFO_GPU, rocprof agents (waves per CU)
    max_blocks_per_sm: int | None = None  # nsys TARGET_INFO_GPU
    arch: str | None = None  # "gfx950", "GA100", ... when the profiler names the chip
    clock_rate_khz: int | None = None  # xplane device planes (XLA's `clock_rate`, kHz): 2,100,000 on MI300X
    memory_bandwidth_bytes_per_s: int | None = (
        None  # xplane device planes (XLA's `memory_bandwidth`, bytes/s)
    )

    @classmethod
    def from_kineto(cls, props: dict[str, Any]) -> DeviceInfo:
        def num(key: str) -> int | None:
            value = props.get(key)
            return int(value) if isinstance(value, (int, float)) else None

        major, minor = props.get("computeMajor"), props.get("computeMinor")
        cc = f"{major}.{minor}" if major is not None and minor is not None else None
        return cls(
            id=int(props.get("id", 0) or 0),
            name=str(props.get("name", "unknown")),
            sm_count=num("numSms"),
            max_threads_per_sm=num("maxThreadsPerMultiprocessor"),
            max_threads_per_block=num("maxThreadsPerBlock"),
            regs_per_sm=num("regsPerMultiprocessor"),
            regs_per_block=num("regsPerBlock"),
            shared_mem_per_sm=num("sharedMemPerMultiprocessor"),
            shared_mem_per_block=num("sharedMemPerBlock"),
            shared_mem_per_block_optin=num("sharedMemPerBlockOptin"),
            warp_size=num("warpSize"),
            total_memory=num("totalGlobalMem"),
            compute_capability=cc,
        )


@dataclass(frozen=True)
class DeviceLike:
    """Complete events of a category opscope does not know that look like device work (on a device's process,
    or where launch flows end): read as kernels (`ingest/device_like.py`, docs/readers.md)."""

    category: str
    pids: tuple[str, ...]
    events: int
    total_ns: int


@dataclass(frozen=True)
class TraceMeta:
    """Everything known about a trace except its events."""

    path: str
    format: str  # reader name: "kineto", "nsys", "rocprof", ...
    devices: tuple[DeviceInfo, ...] = ()
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    base_time_ns: int | None = None
    schema_version: int | None = None
    trace_name: str | None = None
    profiler_flags: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    truncated: bool = False
    device_like: tuple[DeviceLike, ...] = ()  # unknown categories read as device work
    # what the events read differ in from the recorded ones (`--repair overlaps`: one line each, said in every
    # view); empty: the recorded events
    repairs: tuple[str, ...] = ()

    def describe(self, device: int | None) -> DeviceInfo | None:
        """The description of `device`: its own entry; else the only entry, when the trace describes one
        device (a process that sees one GPU may report its work under another index than its description:
        MI300X kernels on device 2 beside `deviceProperties` id 0, under HIP/CUDA_VISIBLE_DEVICES); else
        None."""
        for info in self.devices:
            if info.id == device:
                return info
        return self.devices[0] if len(self.devices) == 1 else None

    def device_name(self, device: int | None) -> str | None:
        info = self.describe(device)
        return info.name if info else None

    def used_device_names(self, used: Iterable[int]) -> tuple[str, ...]:
        """The names of the devices that ran work (`used`: their ids), each name once, in id order, `device
        N` for one the trace does not describe; every described device when none ran any."""
        ids = sorted(set(used))
        if not ids:
            return tuple(dict.fromkeys(d.name for d in self.devices))
        return tuple(dict.fromkeys(self.device_name(i) or f"device {i}" for i in ids))
