"""Capture real GPU inputs for opscope's tests on a CUDA machine: `python bench/gpu_capture.py OUT_DIR`.

CI has no GPU, so what only a GPU produces is captured here once and kept as test data (tests/data/gpu/, each
file named for the GPU it came from), each with the facts measured beside it by other means (CUDA events, the
caching allocator's own counters, the device's properties) in `facts.json`, so the tests can check opscope's
figures against them:

- `known` : a Kineto trace (opscope.profile, shapes recorded) of a bf16 GEMM of known size, a memory-bound add of
  known bytes and a small training step; CUDA-event timings of the same GEMM and add outside the profiler.
- `snapshot` : an allocator snapshot (`torch.cuda.memory._dump_snapshot`) after a few training steps and one
  deliberate out-of-memory request, with `memory_allocated` / `memory_reserved` read at the moment of the dump.
- `workload` : the same kernels alone, the program `ncu` profiles (run by the shell driver, see `--ncu-help`).
- `compiled` : torch.compile on the GPU (Triton kernels, a graph break, a recompile, CUDA graphs).
- `modern` : a transformer training step written today's way (bf16, SDPA, fused AdamW), in steady state.
- `jax` : a JAX program traced on the GPU (`jax.profiler.trace`), for the xplane reader's NVIDIA device planes.

Every stage is one subcommand, so a failure in one leaves the others' files.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

GEMM = 4096  # M = N = K: 2 * 4096^3 = 137.4 GFLOP per product
ADD_ELEMS = 64 << 20  # fp32: 256 MiB per tensor; an add reads two and writes one (768 MiB)
MODERN = (8, 1024, 1024)  # batch, tokens, width of the `modern` transformer


def _facts(out: Path, key: str, value: object) -> None:
    path = out / "facts.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = value
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def _keep_trace(prof: Any, target: Path) -> Path:
    """The trace `prof` wrote, as `target` (gzip level 9; the profiler may have written it gzipped already)."""
    assert prof.trace_path is not None, prof.warnings
    opener = gzip.open if prof.trace_path.name.endswith(".gz") else open
    with opener(prof.trace_path, "rb") as src, gzip.open(target, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    return target


def _device_facts() -> dict[str, object]:
    import torch

    p = torch.cuda.get_device_properties(0)
    return {
        "name": p.name,
        "sm_count": p.multi_processor_count,
        "total_memory": p.total_memory,
        "capability": f"{p.major}.{p.minor}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def _tensors():
    import torch

    torch.manual_seed(0)
    a = torch.randn(GEMM, GEMM, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(GEMM, GEMM, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(ADD_ELEMS, device="cuda")
    y = torch.randn(ADD_ELEMS, device="cuda")
    z = torch.empty_like(x)
    return a, b, x, y, z


def _model():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096),
        torch.nn.GELU(),
        torch.nn.LayerNorm(4096),
        torch.nn.Linear(4096, 1024),
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(512, 1024, device="cuda")
    return model, opt, data


def _train_step(model, opt, data) -> None:
    opt.zero_grad(set_to_none=True)
    loss = model(data).float().pow(2).mean()
    loss.backward()
    opt.step()


def _event_ms(fn, repeats: int = 20, warmup: int = 3) -> float:
    import torch

    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def known(out: Path) -> None:
    import torch

    import opscope

    a, b, x, y, z = _tensors()
    model, opt, data = _model()
    gemm_ms = _event_ms(lambda: torch.mm(a, b))
    add_ms = _event_ms(lambda: torch.add(x, y, out=z))
    for _ in range(3):
        _train_step(model, opt, data)
    torch.cuda.synchronize()
    work = out / "known-profile"
    with opscope.profile(
        steps=3, record_shapes=True, with_stack=True, profile_memory=True, memory_snapshot=True, log_dir=work
    ) as prof:
        for _ in range(4):
            with opscope.annotate("gemm"):
                for _ in range(5):
                    torch.mm(a, b)
            with opscope.annotate("add"):
                for _ in range(5):
                    torch.add(x, y, out=z)
            with opscope.annotate("train"):
                _train_step(model, opt, data)
            torch.cuda.synchronize()
            prof.step()
    target = _keep_trace(prof, out / "known.pt.trace.json.gz")
    _facts(
        out,
        "known",
        {
            "trace": target.name,
            "device": _device_facts(),
            "gemm": {"m": GEMM, "n": GEMM, "k": GEMM, "dtype": "bfloat16", "cuda_event_ms": gemm_ms},
            "add": {
                "elements": ADD_ELEMS,
                "dtype": "float32",
                "bytes": 3 * 4 * ADD_ELEMS,
                "cuda_event_ms": add_ms,
            },
            "per_step": {"gemm_calls": 5, "add_calls": 5, "train_steps": 1},
            "steps": 3,
            "warnings": list(prof.warnings),
            "opscope_snapshots": [p.name for p in prof.snapshot_paths if p.exists()],
        },
    )
    print(
        f"known: gemm {gemm_ms:.3f} ms ({2 * GEMM**3 / gemm_ms / 1e9:.0f} TFLOP/s), add {add_ms:.3f} ms "
        f"({3 * 4 * ADD_ELEMS / add_ms / 1e6:.0f} GB/s); {target.stat().st_size} bytes",
        flush=True,
    )


def snapshot(out: Path) -> None:
    import torch

    torch.cuda.memory._record_memory_history(max_entries=20000)
    model, opt, data = _model()
    for _ in range(3):
        _train_step(model, opt, data)
    keep = torch.empty(300 << 20, dtype=torch.uint8, device="cuda")  # a large live block
    oom = None
    try:
        torch.empty(1 << 40, dtype=torch.uint8, device="cuda")  # 1 TiB: more than any GPU has
    except torch.OutOfMemoryError as exc:
        oom = str(exc).splitlines()[0][:300]
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    stats = torch.cuda.memory_stats()
    target = out / "snapshot.pickle"
    torch.cuda.memory._dump_snapshot(str(target))
    torch.cuda.memory._record_memory_history(enabled=None)
    _facts(
        out,
        "snapshot",
        {
            "file": target.name,
            "device": _device_facts(),
            "memory_allocated": allocated,
            "memory_reserved": reserved,
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "active_blocks": stats.get("active.all.current"),
            "segments": stats.get("segment.all.current"),
            "num_ooms": stats.get("num_ooms"),
            "oom_message": oom,
            "large_block_bytes": keep.numel(),
        },
    )
    print(f"snapshot: allocated {allocated}, reserved {reserved}, {target.stat().st_size} bytes", flush=True)


def workload(out: Path) -> None:
    """What ncu profiles: two GEMMs, two adds, one training step (about 20 kernels)."""
    import torch

    a, b, x, y, z = _tensors()
    model, opt, data = _model()
    torch.cuda.synchronize()
    for _ in range(2):
        torch.mm(a, b)
        torch.add(x, y, out=z)
    _train_step(model, opt, data)
    torch.cuda.synchronize()
    print("workload done", flush=True)


def compiled(out: Path) -> None:
    """torch.compile on the GPU: one model compiled in the default mode with one deliberate graph break (two
    compiled regions per call, Inductor's Triton kernels), one in mode="reduce-overhead" (CUDA graphs), and one
    recompile (a new batch size in the profiled steps: a guard fails once)."""
    import torch

    import opscope

    class Net(torch.nn.Module):
        def __init__(self, graph_break: bool) -> None:
            super().__init__()
            self.up, self.down = torch.nn.Linear(1024, 4096), torch.nn.Linear(4096, 1024)
            self.norm = torch.nn.LayerNorm(4096)
            self.graph_break = graph_break

        def forward(self, x):
            h = self.norm(torch.nn.functional.gelu(self.up(x)))
            if self.graph_break:
                torch._dynamo.graph_break()
            return torch.relu(self.down(h)) * 2 + 1

    torch.manual_seed(0)
    eager = Net(graph_break=True).cuda().eval()
    broken = torch.compile(eager)
    graphs = torch.compile(Net(graph_break=False).cuda().eval(), mode="reduce-overhead")
    x, y = torch.randn(512, 1024, device="cuda"), torch.randn(256, 1024, device="cuda")
    with torch.no_grad():
        for _ in range(3):  # compile and record the CUDA graph before profiling
            broken(x)
            graphs(x)
        torch.cuda.synchronize()
        work = out / "compiled-profile"
        with opscope.profile(steps=3, record_shapes=True, log_dir=work) as prof:
            for i in range(4):
                with opscope.annotate("graph_break"):
                    broken(y if i == 1 else x)  # step 1: a new shape, one recompile
                with opscope.annotate("cuda_graphs"):
                    graphs(x)
                torch.cuda.synchronize()
                prof.step()
        match = torch.allclose(broken(x), eager(x), rtol=1e-2, atol=1e-2)
    target = _keep_trace(prof, out / "compiled.pt.trace.json.gz")
    _facts(
        out,
        "compiled",
        {
            "trace": target.name,
            "device": _device_facts(),
            "steps": 3,
            "graph_breaks_per_call": 1,
            "recompiled_in_step": 1,
            "cuda_graphs": "reduce-overhead",
            "outputs_match_eager": bool(match),
            "warnings": list(prof.warnings),
        },
    )
    print(f"compiled: {target.stat().st_size} bytes", flush=True)


def modern(out: Path) -> None:
    """A transformer training step as it is written today: bf16 autocast, scaled_dot_product_attention (flash
    attention kernels), a fused AdamW; profiled in steady state (wait=1, warmup=1, active=3). The advice should
    not tell this code to use tensor cores or fused attention."""
    import torch
    import torch.nn.functional as F

    import opscope

    class Block(torch.nn.Module):
        def __init__(self, d: int = MODERN[2], heads: int = 16) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (
                self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).transpose(1, 3).unbind(2)
            )
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block() for _ in range(4)]).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randn(*MODERN, device="cuda")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with opscope.profile(
        wait=1, warmup=1, active=3, record_shapes=True, log_dir=out / "modern-profile"
    ) as prof:
        for _ in range(5):
            step()
            prof.step()
    target = _keep_trace(prof, out / "modern.pt.trace.json.gz")
    _facts(
        out,
        "modern",
        {
            "trace": target.name,
            "device": _device_facts(),
            "model": "4 pre-norm transformer blocks, d=1024, 16 heads, batch 8 x 1024 tokens",
            "autocast": "bfloat16",
            "attention": "F.scaled_dot_product_attention(is_causal=True)",
            "optimizer": "AdamW(fused=True)",
            "schedule": "wait=1, warmup=1, active=3",
            "warnings": list(prof.warnings),
        },
    )
    print(f"modern: {target.stat().st_size} bytes", flush=True)


def jax_trace(out: Path) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp

    assert jax.devices()[0].platform == "gpu", jax.devices()

    @jax.jit
    def step(w, x):
        h = jax.nn.gelu(x @ w)
        return (h @ w.T).sum()

    w = jnp.ones((2048, 2048), jnp.bfloat16)
    x = jnp.ones((1024, 2048), jnp.bfloat16)
    step(w, x).block_until_ready()
    logdir = out / "jax-profile"
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                step(w, x).block_until_ready()
    found = sorted(glob.glob(str(logdir / "**" / "*.xplane.pb"), recursive=True))
    assert found, "no xplane.pb written"
    target = out / "jax.xplane.pb"
    shutil.copyfile(found[0], target)
    _facts(
        out,
        "jax",
        {
            "file": target.name,
            "jax": jax.__version__,
            "device": str(jax.devices()[0]),
            "steps": 3,
            "gemm": [[1024, 2048, 2048], [1024, 2048, 2048]],
        },
    )
    print(f"jax: {target.stat().st_size} bytes from {found[0]}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["known", "snapshot", "workload", "compiled", "modern", "jax"])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    stages = {
        "known": known,
        "snapshot": snapshot,
        "workload": workload,
        "compiled": compiled,
        "modern": modern,
        "jax": jax_trace,
    }
    stages[args.stage](args.out)
    print(f"{args.stage}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
