"""Hand-made Kineto traces for edge cases the real corpus lacks (exact step counts, known collective start
times, rank file names). Every trace built here is labelled hand-made; numbers in tests that use them are
derived from the events written here, not from opscope."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

Event = dict[str, Any]


def kernel(name: str, ts: float, dur: float, corr: int, device: int = 0, stream: int = 7) -> Event:
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": device,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": device, "stream": stream, "correlation": corr, "External id": corr},
    }


def launch(ts: float, corr: int, dur: float = 2, tid: int = 1) -> Event:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "External id": corr},
    }


def cpu_op(name: str, ts: float, dur: float, dims: Any = None, tid: int = 1) -> Event:
    args: dict[str, Any] = {}
    if dims is not None:
        args["Input Dims"] = dims
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def step(number: int, ts: float, dur: float) -> Event:
    return {
        "ph": "X",
        "cat": "user_annotation",
        "name": f"ProfilerStep#{number}",
        "pid": 100,
        "tid": 1,
        "ts": ts,
        "dur": dur,
        "args": {},
    }


def document(
    events: list[Event],
    *,
    rank: int | None = None,
    world_size: int | None = None,
    base_ns: int | None = None,
    device: str = "Hand-made GPU",
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": device}],
        "traceEvents": events,
    }
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    return doc


def write(path: Path, doc: dict[str, Any]) -> Path:
    data = json.dumps(doc).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def training_steps(
    steps: int,
    kernels_per_step: int = 2,
    step_us: float = 100.0,
    kernel_us: float = 10.0,
    name: str = "gemm_kernel",
) -> list[Event]:
    """`steps` identical ProfilerSteps, each with one aten::mm that launches `kernels_per_step` kernels."""
    events: list[Event] = []
    corr = 1
    for n in range(steps):
        start = 1000 + n * step_us
        events.append(step(n, start, step_us))
        events.append(cpu_op("aten::mm", start + 5, 50, dims=[[8, 8], [8, 8]]))
        for k in range(kernels_per_step):
            at = start + 10 + 20 * k
            events.append(launch(at, corr))
            events.append(kernel(name, at + 3, kernel_us, corr))
            corr += 1
    return events


def die(parent_pid: int) -> None:
    """A task that kills the worker process running it. In the test's own process (which runs tasks too while
    the workers start) it only waits, so that the workers get tasks."""
    if os.getpid() != parent_pid:
        os._exit(13)
    time.sleep(0.5)


def square(x: int) -> int:
    return x * x


def nap(seconds: float) -> float:
    """A task that takes `seconds` (for killing a cluster while it runs)."""
    time.sleep(seconds)
    return seconds
