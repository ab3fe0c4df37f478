"""HAND-MADE Kineto traces for the report and export tests: edge cases (hostile names, huge kernel counts) that
no real trace has. Reading traces back is the reference reader's job (tests/reference.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

HOSTILE_KERNEL = "<img src=x onerror=alert(1)>"
HOSTILE_OP = "</script><script>alert(2)</script>"
HOSTILE_KERNEL_2 = '"><svg onload=alert(3)>&amp;'


def hostile_trace(path: Path) -> Path:
    """HAND-MADE: a tiny Kineto trace whose kernel and op names are HTML/script injections. Two steps, one
    GPU, two streams, launch calls with correlation ids, one memcpy."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python <b>host</b>"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    corr = 100
    for step in range(2):
        base = 1000.0 + step * 1000.0
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{step}",
                "pid": 1,
                "tid": 1,
                "ts": base,
                "dur": 900.0,
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": HOSTILE_OP,
                "pid": 1,
                "tid": 1,
                "ts": base + 10,
                "dur": 200.0,
            }
        )
        for i, (name, stream) in enumerate(((HOSTILE_KERNEL, 7), (HOSTILE_KERNEL_2, 8), (HOSTILE_KERNEL, 7))):
            launch = base + 20 + i * 30
            corr += 1
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": launch,
                    "dur": 5.0,
                    "args": {"correlation": corr},
                }
            )
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": 0,
                    "tid": stream,
                    "ts": launch + 40 + i * 10,
                    "dur": 100.0 + 50 * i,
                    "args": {"device": 0, "stream": stream, "correlation": corr},
                }
            )
        corr += 1
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaMemcpyAsync",
                "pid": 1,
                "tid": 1,
                "ts": base + 300,
                "dur": 5.0,
                "args": {"correlation": corr},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "gpu_memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "pid": 0,
                "tid": 7,
                "ts": base + 400,
                "dur": 50.0,
                "args": {"device": 0, "stream": 7, "correlation": corr, "bytes": 1 << 20},
            }
        )
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Fake <GPU> & Co"}],
        "traceEvents": events,
        "traceName": "<hand-made>",
    }
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def many_kernels_trace(path: Path, kernels: int, streams: int = 4, names: int = 50) -> Path:
    """HAND-MADE: `kernels` short kernels on one GPU, round-robin over `streams`, each with a launch call; a
    stand-in for the 100k+-kernel traces the corpus does not have. `names` distinct kernel names (as a JIT
    compiler or a heavily templated library can produce). Written gzipped."""
    parts = ['{"traceEvents": [']
    step = 3.0
    for i in range(kernels):
        ts = 1000.0 + i * step
        stream = 7 + i % streams
        sep = "," if i else ""
        parts.append(
            f'{sep}{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{ts - 2},'
            f'"dur":1,"args":{{"correlation":{i}}}}},'
            f'{{"ph":"X","cat":"kernel","name":"kernel_{i % names}","pid":0,"tid":{stream},"ts":{ts},'
            f'"dur":{1 + (i % 7)},"args":{{"device":0,"stream":{stream},"correlation":{i}}}}}'
        )
    parts.append("]}")
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("".join(parts))
    return path
