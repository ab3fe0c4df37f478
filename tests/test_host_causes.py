"""Host-bound steps get the right first fix (issue 59, docs/advice.md "What the host was doing"): the host's
cause is named from the idle-time classification, with advice that fits it, and in the trace's framework.

The host-side patterns are HAND-MADE traces (labelled so; built below from known events: five 3 ms steps, two
200 us kernels each, then 2.3-2.4 ms of one kind of host work while the GPU idles), because the corpus has no
trace of each; the framework checks run on real corpus traces (a JAX xplane from an MI300X, an Nsight Systems
export of a CUDA program, the ResNet-50 DataLoader trace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import corpus_path
from handmade_traces import Event, cpu_op, document, kernel, launch, python_frame, step, write

RESNET_NW0 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
JAX_MI300 = "tracelens/mi300__jax08_gemm__tw003.xplane.pb"
NSYS_NATIVE = "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite"
TORCH_APIS = ("torch.", "DataLoader(", "torch.compile", "record_function")


def _host(name: str, cat: str, ts: float, dur: float) -> Event:
    return {"ph": "X", "cat": cat, "name": name, "pid": 100, "tid": 1, "ts": ts, "dur": dur, "args": {}}


def host_bound_trace(path: Path, pattern: str, devices: int = 1) -> Path:
    """HAND-MADE: five 3 ms steps; each runs two 200 us kernels (per device), then the host does `pattern`
    for 2.3 ms (20 x 110 us of cudaFree, a 2.3 ms "Lazy Function Loading", a 2.3 ms Python frame, a 2.3 ms
    aten::nonzero, or nothing recorded) while the GPU idles until the next step."""
    events: list[Event] = []
    corr, t = 1, 0.0
    for s in range(5):
        events.append(step(s, t, 3000))
        for _ in range(2):
            events.append(cpu_op("aten::mm", t + 1, 12))
            for device in range(devices):
                events.append(launch(t + 2, corr, dur=8))
                events.append(kernel("sm80_gemm_kernel", t + 12, 200, corr, device=device))
                corr += 1
            t += 215
        a = t + 5
        if pattern == "allocator":
            events += [_host("cudaFree", "cuda_runtime", a + i * 120, 110) for i in range(20)]
        elif pattern == "cold_start":
            events.append(_host("Lazy Function Loading", "cuda_driver", a, 2300))
        elif pattern == "python":
            events.append(python_frame("train.py(42): preprocess", a, 2300))
        elif pattern == "op":
            events.append(cpu_op("aten::nonzero", a, 2300))
        t = (s + 1) * 3000.0
    doc = document(events)
    doc["deviceProperties"] = [{"id": d, "name": "Hand-made GPU"} for d in range(devices)]
    return write(path, doc)


def advise_json(cli: Any, path: Path | str) -> dict[str, Any]:
    out = cli("advise", path, "--format", "json")
    assert out.code == 0, out.err
    return json.loads(out.out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("pattern", "cause", "doing", "remedy"),
    [
        ("allocator", "runtime_call", "allocating and freeing GPU memory", "empty_cache"),
        ("cold_start", "runtime_call", "loading GPU code (a cold start)", "warm-up"),
        ("python", "between_ops", "in Python between operators", "with_stack=True"),
        ("op", "in_op", "in CPU operators", "torch.compile"),
    ],
)
def test_the_host_cause_is_named_first(
    cli, tmp_path: Path, pattern: str, cause: str, doing: str, remedy: str
) -> None:
    """Each pattern: the first finding is host_bound, its title says what the host was doing, its first
    evidence item is that cause with the host's call, op or frame, its advice fits the cause, and the
    symptom rules (low-utilisation windows, long gaps) keep only what it does not explain."""
    data = advise_json(cli, host_bound_trace(tmp_path / f"{pattern}.json", pattern))
    first = data["findings"][0]
    assert first["id"] == "host_bound" and first["severity"] == "crit"
    assert f"mostly {doing}" in first["title"]
    assert first["evidence"][0]["cause"] == cause
    assert remedy in first["advice"]
    assert first["saving_basis"] == "estimate"
    # its saving: the host's own idle time (every cause but the queued, the DataLoader's and the syncs'), as
    # analyze classifies it
    (device,) = json.loads(cli("analyze", tmp_path / f"{pattern}.json", "--format", "json").out)["devices"]
    causes = {c["cause"]: c["us"] for c in device["idle_breakdown"]["causes"]}
    own = sum(us for c, us in causes.items() if c not in ("queued", "dataloader", "sync_wait"))
    assert first["predicted_saving_us"] == pytest.approx(own, abs=0.01)
    for later in data["findings"][1:]:
        assert later["predicted_saving_us"] < first["predicted_saving_us"] / 10


def test_allocator_churn_names_the_free_call(cli, tmp_path: Path) -> None:
    data = advise_json(cli, host_bound_trace(tmp_path / "alloc.json", "allocator"))
    first = data["findings"][0]
    assert any("cudaFree" in call for call in first["evidence"][0]["calls"])
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in first["advice"]


def test_counts_name_their_whole_on_several_gpus(cli, tmp_path: Path) -> None:
    """Two GPUs x five steps: the low-utilisation rule counts (GPU, window) pairs and says so, never "10 of 5
    windows"."""
    data = advise_json(cli, host_bound_trace(tmp_path / "two.json", "python", devices=2))
    out = cli("advise", tmp_path / "two.json", "--format", "json", "--rules", _all_on(tmp_path))
    titles = [f["title"] for f in json.loads(out.out)["findings"] + data["findings"]]
    low = [t for t in titles if "below 50% busy" in t]
    assert low and all("10 of 10 (GPU, window) pairs (5 windows x 2 GPUs)" in t for t in low)


def _all_on(tmp_path: Path) -> Path:
    """A rules file that keeps every rule and shows every saving (none below a floor)."""
    rules = tmp_path / "all.toml"
    rules.write_text("[severity]\nmin_saving_us = 0\n")
    return rules


@pytest.mark.corpus
def test_jax_traces_get_jax_remedies(cli) -> None:
    """A JAX program on an MI300X (real xplane): host-bound, and told about jax.jit, lax.scan and XLA's
    command buffers, with HIP graphs, never PyTorch's APIs."""
    data = advise_json(cli, corpus_path(JAX_MI300))
    assert data["findings"]
    for f in data["findings"]:
        assert not any(api in f["advice"] for api in TORCH_APIS), (f["id"], f["advice"])
    host = next(f for f in data["findings"] if f["id"] == "host_bound")
    assert "jax.jit" in host["advice"] and "lax.scan" in host["advice"]
    launch_rule = next((f for f in data["findings"] if f["id"] == "launch_bound_small_kernels"), None)
    if launch_rule is not None:
        assert "HIP graph" in launch_rule["advice"] and "CUDA graph" not in launch_rule["advice"]


@pytest.mark.corpus
def test_native_programs_get_native_remedies(cli) -> None:
    """An Nsight Systems export of a CUDA program (CloverLeaf, real): no PyTorch in the trace, no PyTorch in
    the advice; the synchronisation and copy remedies name the CUDA runtime's calls."""
    data = advise_json(cli, corpus_path(NSYS_NATIVE))
    assert data["findings"]
    for f in data["findings"]:
        assert not any(api in f["advice"] for api in TORCH_APIS), (f["id"], f["advice"])
    ids = {f["id"]: f for f in data["findings"]}
    assert "cudaEventSynchronize" in ids["sync_in_loop"]["advice"]
    assert "cudaMallocHost" in ids["pageable_memcpy"]["advice"]


@pytest.mark.corpus
def test_dataloader_first_and_the_host_rest_after_it(cli) -> None:
    """ResNet-50 nw0: the DataLoader wait is first (its saving from the what-if); host_bound names what the
    host does besides (its CPU operators), after it, with a smaller saving."""
    data = advise_json(cli, corpus_path(RESNET_NW0))
    ids = [f["id"] for f in data["findings"]]
    assert ids[0] == "dataloader_bound"
    if "host_bound" in ids:
        host = data["findings"][ids.index("host_bound")]
        assert "dataloader" not in host["title"].split("mostly")[-1]
        assert host["predicted_saving_us"] < data["findings"][0]["predicted_saving_us"]


@pytest.mark.parametrize("free", ["cudaFree", "hipFree"])
def test_an_implicit_sync_ends_with_the_work_it_waits_for(cli, tmp_path: Path, free: str) -> None:
    """HAND-MADE: a 1 ms kernel, then a free that blocks until it ends (+5 us), then the next kernel. Halving
    the first kernel shortens the step by 0.5 ms: the free is a wait, not fixed CPU time (issue 59 item 3)."""
    events = [
        step(1, 0, 1300),
        launch(2, 1, dur=8),
        kernel("long_kernel", 12, 1000, 1),
        _host(free, "cuda_runtime", 20, 997),  # returns 5 us after the kernel ends at 1012
        launch(1100, 2, dur=8),
        kernel("next_kernel", 1110, 100, 2),
    ]
    path = write(tmp_path / "free.json", document(events))
    out = cli("critical-path", path, "--what-if", "long_kernel:0.5", "--format", "json")
    assert out.code == 0, out.err
    (only,) = json.loads(out.out)["steps"]
    assert only["what_if"]["saving_us"] == pytest.approx(500, abs=1)


CPU_LOADER = r"""
import sys, time, torch
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)

class Slow(Dataset):
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        time.sleep(0.002)  # decoding stand-in: CPU time per item
        return torch.randn(32, 32), i % 10

model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(1024, 10))
loader = DataLoader(Slow(), batch_size=8, num_workers=0)
schedule = torch.profiler.schedule(wait=1, warmup=1, active=4)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                            on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for step, (x, y) in enumerate(loader):
        model(x).sum().backward()
        prof.step()
        if step >= 6:
            break
"""


def test_a_cpu_only_capture_is_told_about_its_dataloader(cli, tmp_path: Path) -> None:
    """A real CPU-only training loop recorded here with torch (no GPU): each step waits ~16 ms for its batch.
    dataloader_bound fires on the CPU's own critical path (no GPU idle time to claim), and its saving is the
    what-if of removing the loads."""
    pytest.importorskip("torch")
    import subprocess
    import sys

    trace = tmp_path / "cpu_loader.json"
    subprocess.run(
        [sys.executable, "-c", CPU_LOADER, str(trace)], check=True, timeout=300, capture_output=True
    )
    data = advise_json(cli, trace)
    (found,) = [f for f in data["findings"] if f["id"] == "dataloader_bound"]
    assert found["saving_basis"] == "critical_path_what_if" and found["what_if"]["factor"] == 0.0
    out = cli("critical-path", trace, "--what-if", "DataLoader:0", "--format", "json")
    what_if = sum(s["what_if"]["saving_us"] for s in json.loads(out.out)["steps"])
    assert found["predicted_saving_us"] == pytest.approx(what_if, rel=0.01)
    assert found["predicted_saving_us"] > 4 * 10_000  # four steps of ~16 ms of loading
