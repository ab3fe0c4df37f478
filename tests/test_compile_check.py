"""`opscope compile-check` on the torch.compile trace of the corpus (MI300X, Triton kernels) and on a tiny trace
captured here on the CPU with the project's own capture code: a function with a data-dependent branch (a graph
break), then a new input shape (a recompile). Expected figures come from the raw events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import reference as ref
from conftest import REPO, corpus_path
from opscope.analysis.compile.fused_names import fused_ops, kernel_kind

COMPILE_MI300 = "tracelens/torch_compile_triton__trace.json.gz"

CAPTURE = textwrap.dedent("""
    import sys
    import torch
    from opscope.capture.profiler import profile

    def f(x):
        y = torch.relu(x * 2 + 1)
        if y.sum() > 0:  # data-dependent branch: Dynamo breaks the graph here
            return torch.sigmoid(y) * 3 - x
        return y - 1

    g = torch.compile(f)
    x, other = torch.randn(16, 16), torch.randn(8, 16)
    g(x)
    with profile(steps=3, record_shapes=True, activities=("cpu",), log_dir=sys.argv[1]) as prof:
        for step in range(3):
            g(x if step < 2 else other)  # the new shape in the last step recompiles
            prof.step()
    print(prof.trace_path)
""")


@pytest.fixture(scope="session")
def cpu_compile_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Captured once per session, in a child process (torch.compile on the CPU builds C++ with gcc: slow)."""
    pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")
    folder = tmp_path_factory.mktemp("compile-cpu")
    env = {
        **os.environ,
        "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor-cache"),
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", CAPTURE, str(folder / "logs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"capture failed: {done.stderr[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def check_json(cli, path: Path, *args: str) -> tuple[int, dict]:
    out = cli("compile-check", path, "--format", "json", *args)
    assert out.code in (0, 1), out.err
    return out.code, json.loads(out.out)


def test_fused_names_hand_made() -> None:
    """Kernel names as Inductor writes them (hand-made list; the last is a CPU kernel with its graph prefix)."""
    assert fused_ops("triton_poi_fused__unsafe_view_mul_silu_2") == ("unsafe_view", "mul", "silu")
    assert fused_ops("triton_red_fused_add_mean_mul_pow_rsqrt_0") == ("add", "mean", "mul", "pow", "rsqrt")
    assert fused_ops("triton_per_fused_native_layer_norm_3") == ("native_layer_norm",)
    assert fused_ops("graph_0_cpp_fused_add_gt_mul_relu_sum_0") == ("add", "gt", "mul", "relu", "sum")
    assert kernel_kind("triton_per_fused_native_layer_norm_3") == "persistent_reduction"
    assert fused_ops("volta_sgemm_128x64_nn") == () and kernel_kind("attn_fwd") == "other"


@pytest.mark.corpus
def test_corpus_compiled_trace(cli) -> None:
    path = corpus_path(COMPILE_MI300)
    events = ref.load(path)
    regions = [e for e in events if e.get("name", "").startswith("Torch-Compiled Region")]
    triton = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("triton_")]
    code, data = check_json(cli, path)
    assert code == 0 and data["schema"] == "opscope.compile/1"
    assert (
        [r["name"] for r in data["regions"]] == [r["name"] for r in regions] == ["Torch-Compiled Region: 0/0"]
    )
    assert data["graph_breaks"] == 0 and data["recompiles"] == 0 and data["frames"] == [0]
    assert sorted(k["name"] for k in data["fused_kernels"]) == sorted(e["name"] for e in triton)
    total = {k["name"]: k["total_us"] for k in data["fused_kernels"]}
    for e in triton:
        assert total[e["name"]] * 1e3 == pytest.approx(ref.span(e)[1] - ref.span(e)[0])
    silu = next(k for k in data["fused_kernels"] if "silu" in k["name"])
    assert silu["ops"] == ["unsafe_view", "mul", "silu"] and silu["kind"] == "pointwise" and silu["on_gpu"]
    eager = {k["name"] for k in data["eager_kernels_in_regions"]}
    assert "attn_fwd" in eager and all(not n.startswith("triton_") for n in eager)
    # every kernel of this trace was launched inside the one region
    gpu = sum(ref.span(e)[1] - ref.span(e)[0] for e in ref.gpu_events(events))
    assert data["compiled_gpu_us"] * 1e3 == pytest.approx(gpu) == pytest.approx(data["gpu_us"] * 1e3)


@pytest.mark.corpus
def test_corpus_gates(cli) -> None:
    path = corpus_path(COMPILE_MI300)
    assert check_json(cli, path, "--expect-fused", "add,mul,silu,rsqrt")[0] == 0
    code, data = check_json(cli, path, "--expect-fused", "add,gelu")
    assert code == 1 and data["violations"] == ["not fused by Inductor: gelu"]
    assert check_json(cli, path, "--max-graph-breaks", "0", "--max-recompiles", "0")[0] == 0
    table = cli("compile-check", path, "--width", "140")
    assert table.code == 0 and "triton_poi_fused__unsafe_view_mul_silu_2" in table.out


def test_cpu_capture_graph_break_and_recompile(cli, cpu_compile_trace: Path) -> None:
    events = ref.load(cpu_compile_trace)
    names = [e["name"] for e in events if e.get("name", "").startswith("Torch-Compiled Region")]
    frames = {n.split(": ")[1].split("/")[0] for n in names}
    recompiled = {n for n in names if not n.endswith("/0")}
    assert len(frames) >= 2 and recompiled  # the capture did what it was written to do
    code, data = check_json(cli, cpu_compile_trace)
    assert code == 0
    assert data["graph_breaks"] == len(frames) - 1 >= 1
    assert data["recompiles"] == len(recompiled) >= 1
    assert data["nested_regions"] >= 1  # the code after the break runs inside the first frame's region
    per_step = {r["step"]: r["regions"] for r in data["regions_per_step"]}
    assert per_step == {0: 1, 1: 1, 2: 1}  # one top-level region per step, the resumed frame nested in it
    cpp = [e["name"] for e in events if "cpp_fused" in e.get("name", "")]
    assert {k["name"] for k in data["fused_kernels"]} == set(cpp) and cpp
    assert all(not k["on_gpu"] and k["kind"] == "cpp" for k in data["fused_kernels"])
    fused = {op for k in data["fused_kernels"] for op in k["ops"]}
    assert {"relu", "sigmoid"} <= fused


def test_cpu_capture_gates(cli, cpu_compile_trace: Path) -> None:
    code, data = check_json(
        cli,
        cpu_compile_trace,
        "--max-graph-breaks",
        "0",
        "--max-recompiles",
        "0",
        "--expect-fused",
        "relu,sigmoid",
    )
    assert code == 1
    assert len(data["violations"]) == 2 and "graph breaks" in data["violations"][0]
    assert check_json(cli, cpu_compile_trace, "--max-graph-breaks", "5", "--max-recompiles", "5")[0] == 0
    bad = cli("compile-check", cpu_compile_trace, "--max-graph-breaks", "-1")
    assert bad.code == 2 and "--max-graph-breaks" in bad.err


@pytest.mark.corpus
def test_trace_without_compiled_regions_says_so_without_empty_tables(cli) -> None:  # type: ignore[no-untyped-def]
    path = corpus_path("hta/nccl_parser_config_nccl_data.json.gz")
    out = cli("compile-check", path).out
    assert "No 'Torch-Compiled Region' events" in out
    assert "Inductor kernels" not in out and "Other kernels launched" not in out
    assert "Inductor kernels" not in cli("compile-check", path, "--format", "markdown").out
