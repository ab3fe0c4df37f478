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


# Frame names of `with_stack_trace` (hand-made): a user frame, a torch frame, nested user frames that start
# together, hostile names (markup, a terminal escape, a spreadsheet formula).
HOSTILE_FRAME = "<img src=x onerror=alert(1)>/evil.py(7): \x1b[31mpwn</script>"
FORMULA_FRAME = "=HYPERLINK(1)/x.py(1): f"


def python_frame(name: str, ts: float, dur: float, tid: int = 1) -> Event:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur}


def with_stack_trace() -> tuple[list[Event], dict[str, int], int, int]:
    """HAND-MADE with_stack trace for the edge cases of `opscope lines`. Returns the events, the GPU ns each
    frame must be charged (by the definition: the innermost kept frame on the launch's thread at the launch's
    start), the ns whose launch is missing and the ns launched outside every kept frame."""
    events = [
        python_frame("app/train.py(10): main", 0, 1000),
        python_frame("torch/nn/modules/module.py(1743): _call_impl", 100, 400),
        python_frame("app/model.py(20): forward", 150, 300),
        python_frame("app/model.py(30): block", 150, 100),  # same start, shorter: the innermost
        python_frame(HOSTILE_FRAME, 700, 100),
        python_frame(FORMULA_FRAME, 850, 100),
        python_frame("threading.py(1032): _bootstrap", 0, 1000, tid=2),  # stdlib only on thread 2
    ]
    launches = [
        (160, 1, 7.0, 1),  # in block (and forward, and torch, and main): block
        (250, 2, 11.0, 1),  # at block's very end: still block (the frame is closed at both ends)
        (600, 3, 13.0, 1),  # after torch's frame ended: main
        (300, 4, 17.0, 2),  # thread 2: only a stdlib frame around it: outside every kept frame
        (720, 5, 19.0, 1),  # the hostile frame
        (860, 6, 23.0, 1),  # the formula frame
    ]
    for at, corr, dur, tid in launches:
        events.append(launch(at, corr, tid=tid))
        events.append(kernel(f"k{corr}", 2000 + at, dur, corr))
    events.append(kernel("orphan", 5000, 29.0, 99))  # no launch call with correlation 99
    expected = {
        "app/model.py(30): block": 18_000,
        "app/train.py(10): main": 13_000,
        HOSTILE_FRAME: 19_000,
        FORMULA_FRAME: 23_000,
    }
    return events, expected, 29_000, 17_000
