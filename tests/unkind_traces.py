"""GENERATED (hand-made) Kineto traces of shapes that no corpus trace has but users' traces do (issue 57): deep
Python stacks, correlation ids reused across launches, every event at one timestamp, tens of thousands of short
steps, every name unique, thousands of threads and streams, synchronising calls among many Python frames.

Each generator takes `units` and returns a trace document whose event count grows linearly with it (the
scale tests compare 1x and 4x); every event is written by the code below, labelled hand-made, and no figure
of a real GPU is claimed for it. The shapes follow what a profiler writes (ProfilerStep annotations, cpu_op
with a cudaLaunchKernel inside, the kernel on a stream with the same correlation id, ac2g flows, Python frames
with ids), only bent in one direction each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
PID = 100


class Writer:
    """Events of one hand-made trace: steps, ops, launches with their kernels and flows, Python frames."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.corr = 0
        self.py_id = 0

    def x(
        self, cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = PID, **args: Any
    ) -> Event:
        event: Event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            event["args"] = args
        self.events.append(event)
        return event

    def step(self, number: int, ts: float, dur: float, tid: int = 1) -> None:
        self.x("user_annotation", f"ProfilerStep#{number}", ts, dur, tid)

    def frame(self, name: str, ts: float, dur: float, tid: int = 1, parent: int | None = None) -> int:
        self.py_id += 1
        args: dict[str, Any] = {"Python id": self.py_id, "Python thread": 0}
        if parent is not None:
            args["Python parent id"] = parent
        self.x("python_function", name, ts, dur, tid, **args)
        return self.py_id

    def launch(
        self,
        kernel: str,
        ts: float,
        gpu_ts: float,
        gpu_dur: float = 5.0,
        tid: int = 1,
        stream: int = 7,
        corr: int | None = None,
        pid: int = PID,
    ) -> None:
        """A cudaLaunchKernel at `ts` and its kernel at `gpu_ts` on `stream`, linked by correlation id and a
        flow (`corr`: a given id, reused on purpose; default: the next one)."""
        if corr is None:
            self.corr += 1
            corr = self.corr
        self.x(
            "cuda_runtime", "cudaLaunchKernel", ts, 2.0, tid, pid, correlation=corr, **{"External id": corr}
        )
        self.x(
            "kernel",
            kernel,
            gpu_ts,
            gpu_dur,
            stream,
            0,
            device=0,
            stream=stream,
            correlation=corr,
            grid=[1, 1, 1],
            block=[128, 1, 1],
            **{"External id": corr},
        )
        self.events.append(
            {"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": ts, "cat": "ac2g", "name": "ac2g"}
        )
        self.events.append(
            {
                "ph": "f",
                "id": corr,
                "pid": 0,
                "tid": stream,
                "ts": gpu_ts,
                "cat": "ac2g",
                "name": "ac2g",
                "bp": "e",
            }
        )

    def sync(self, ts: float, dur: float, tid: int = 1) -> None:
        self.corr += 1
        self.x("cuda_runtime", "cudaStreamSynchronize", ts, dur, tid, correlation=self.corr)

    def document(self) -> dict[str, Any]:
        meta = [
            {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        ]
        return {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "Hand-made GPU"}],
            "traceEvents": meta + self.events,
        }


def _op_with_kernel(w: Writer, name: str, kernel: str, ts: float, tid: int = 1, **launch: Any) -> None:
    """An aten op of 20 us on `tid` launching one kernel 30 us later."""
    w.x("cpu_op", name, ts, 20.0, tid)
    w.launch(kernel, ts + 5, ts + 35, tid=tid, **launch)


def deep_stacks(units: int) -> dict[str, Any]:
    """Per unit, one step whose Python stack is 6,000 frames deep (each frame inside the one before; every
    other one an nn.Module frame, as a deeply nested model writes), with ten ops launching kernels at the
    bottom: recursion over the stack's depth fails here."""
    w = Writer()
    depth = 6000
    for u in range(units):
        t0 = u * 100_000.0
        w.step(u, t0, 90_000)
        parent = None
        for d in range(depth):
            name = f"nn.Module: Block_{d}" if d % 2 else f"app/model.py({d + 1}): forward"
            parent = w.frame(name, t0 + 1 + d, 80_000 - 2 * d, parent=parent)
        for k in range(10):
            _op_with_kernel(w, "aten::add", f"add_kernel_{k}", t0 + depth + 100 + 100 * k)
    return w.document()


def reused_correlations(units: int) -> dict[str, Any]:
    """Correlation ids as a wrapped counter (mod 100) on two processes merged into one trace: every id is
    carried by many launches and many kernels. A join on the id alone pairs them all with each other."""
    w = Writer()
    for u in range(units):
        t0 = u * 1_000_000.0
        for pid in (PID, PID + 1):
            w.x("user_annotation", f"ProfilerStep#{u}", t0, 900_000, 1, pid)
            for k in range(2000):
                ts = t0 + 10 + 400 * k + 150 * (pid - PID)
                w.x("cpu_op", "aten::mul", ts, 20.0, 1, pid)
                w.launch("mul_kernel", ts + 5, ts + 35, corr=(u * 2000 + k) % 100 + 1, pid=pid)
    return w.document()


def identical_timestamps(units: int) -> dict[str, Any]:
    """Every event at one timestamp with zero duration (as a converter that drops times writes): steps, ops,
    frames, launches and kernels all at t = 0."""
    w = Writer()
    for u in range(units):
        w.step(u, 0, 0)
        for k in range(1000):
            w.frame(f"app/loop.py({k}): body", 0, 0)
            w.x("cpu_op", "aten::relu", 0, 0)
            w.launch("relu_kernel", 0, 0, gpu_dur=0)
    return w.document()


def many_steps(units: int) -> dict[str, Any]:
    """2,500 short steps per unit (one op and one kernel each, and a synchronisation that waits for it, so the
    advice asks the critical-path model about every step): per-step work done one step at a time grows with
    the step count times everything else."""
    w = Writer()
    for s in range(2500 * units):
        t0 = s * 100.0
        w.step(s, t0, 90)
        _op_with_kernel(w, "aten::linear", "gemm_kernel", t0 + 5)
        w.sync(t0 + 30, 12)
    return w.document()


def unique_names(units: int) -> dict[str, Any]:
    """Every op, kernel and Python frame name distinct: tables keyed by name are as long as the trace."""
    w = Writer()
    for u in range(units):
        t0 = u * 1_000_000.0
        w.step(u, t0, 900_000)
        for k in range(3000):
            ts = t0 + 10 + 250 * k
            w.frame(f"app/gen_{u}_{k}.py({k}): f_{u}_{k}", ts - 2, 30)
            _op_with_kernel(w, f"custom::op_{u}_{k}", f"kernel_{u}_{k}<{k}, float>", ts)
    return w.document()


def many_threads(units: int) -> dict[str, Any]:
    """1,000 host threads and 1,000 streams per unit, a few ops and launches each."""
    w = Writer()
    for u in range(units):
        t0 = u * 100_000.0
        w.step(u, t0, 90_000)
        for t in range(1000):
            tid = 2 + u * 1000 + t
            for k in range(3):
                _op_with_kernel(w, "aten::copy_", "copy_kernel", t0 + 10 + 50 * k, tid=tid, stream=tid)
    return w.document()


def syncs_among_frames(units: int) -> dict[str, Any]:
    """Python frames twenty deep on four threads, with a synchronising call in every innermost frame: calls
    x frames per thread is what a pairing of calls and frames by thread builds."""
    w = Writer()
    for u in range(units):
        t0 = u * 1_000_000.0
        w.step(u, t0, 900_000)
        for tid in (1, 2, 3, 4):
            for r in range(100):
                start = t0 + 10 + r * 8000
                parent = None
                for d in range(20):
                    parent = w.frame(
                        f"app/train.py({10 + d}): call_{d}", start + d, 7000 - 2 * d, tid, parent
                    )
                for k in range(5):
                    ts = start + 100 + 1000 * k
                    _op_with_kernel(w, "aten::item", "reduce_kernel", ts, tid=tid)
                    w.sync(ts + 40, 200, tid)
    return w.document()


def stream_waits(units: int) -> dict[str, Any]:
    """Per unit, one step of 1,000 rounds on two streams: a kernel on stream 7, an event recorded there, stream 8
    made to wait for it (`cudaStreamWaitEvent` and Kineto's `cuda_sync` record of it), a kernel on stream 8.
    Pairing every wait with every launch on its stream grows with the square of the step."""
    w = Writer()
    for u in range(units):
        t0 = u * 1_000_000.0
        w.step(u, t0, 900_000)
        for r in range(1000):
            ts = t0 + 10 + 800 * r
            _op_with_kernel(w, "aten::mm", "gemm_kernel", ts, stream=7)
            w.corr += 1
            record = w.corr
            w.x("cuda_runtime", "cudaEventRecord", ts + 25, 2.0, correlation=record)
            w.corr += 1
            wait = w.corr
            w.x("cuda_runtime", "cudaStreamWaitEvent", ts + 30, 2.0, correlation=wait)
            w.x(
                "cuda_sync",
                "Stream Wait Event",
                ts + 60,
                1.0,
                8,
                0,
                cuda_sync_kind="Stream Wait Event",
                wait_on_stream=7,
                wait_on_cuda_event_record_corr_id=record,
                stream=8,
                correlation=wait,
                device=0,
            )
            _op_with_kernel(w, "aten::add", "add_kernel", ts + 300, stream=8)
    return w.document()


SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "deep_stacks": deep_stacks,
    "reused_correlations": reused_correlations,
    "identical_timestamps": identical_timestamps,
    "many_steps": many_steps,
    "unique_names": unique_names,
    "many_threads": many_threads,
    "syncs_among_frames": syncs_among_frames,
    "stream_waits": stream_waits,
}
