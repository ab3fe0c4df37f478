"""Real GPU inputs, captured on an NVIDIA H200 by `bench/gpu_session.sh` (tests/data/gpu/h200/README.md), checked
against what was measured beside them by other means (`facts.json`: CUDA events, the caching allocator's own
counters) and against independent walks over the raw files. CI has no GPU; these files are what only a GPU makes:
a Kineto trace with CUDA kernels of known work, an allocator snapshot with C++ frames and a real out-of-memory
event, Nsight Compute 2025.3 exports (details and raw pages, gzip-compressed) of the same kernels, and a JAX
xplane with an NVIDIA device plane."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest

from opscope.analysis.kernels.metrics import canonical_name
from opscope.ingest import ncu as ncu_reader

DATA = Path(__file__).parent / "data" / "gpu" / "h200"
FACTS = json.loads((DATA / "facts.json").read_text())
KNOWN = DATA / "known.pt.trace.json.gz"
GEMM_SHAPE = "[[4096,4096],[4096,4096]]"


def _json(cli, *args):
    result = cli(*args, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


def _raw_events() -> list[dict]:
    with gzip.open(KNOWN, "rt") as handle:
        return json.load(handle)["traceEvents"]


def _gpu_time_under(op: str, dims: list) -> tuple[int, float]:
    """Independent of opscope: the calls of CPU op `op` with Input Dims `dims`, and the summed duration (us) of
    the GPU activities launched inside them (runtime calls on the op's thread within its interval -> correlation
    -> kernel / memset / memcpy)."""
    events = _raw_events()
    ops = [
        e
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] == op and e["args"].get("Input Dims") == dims
    ]
    launches = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    correlations = {
        r["args"]["correlation"]
        for o in ops
        for r in launches
        if r["tid"] == o["tid"] and o["ts"] <= r["ts"] and r["ts"] + r["dur"] <= o["ts"] + o["dur"]
    }
    gpu = [
        e
        for e in events
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
        and e["args"].get("correlation") in correlations
    ]
    return len(ops), sum(e["dur"] for e in gpu)


def test_bf16_gemm_throughput_matches_the_raw_events_and_cuda_events(cli):
    rows = _json(cli, "efficiency", KNOWN)["rows"]
    (mm,) = [r for r in rows if r["op"] == "aten::mm" and r["shape"] == GEMM_SHAPE and r["dtype"] == "bf16"]
    calls, gpu_us = _gpu_time_under("aten::mm", [[4096, 4096], [4096, 4096]])
    gemm = FACTS["known"]["gemm"]
    flops = 2 * gemm["m"] * gemm["n"] * gemm["k"]
    assert mm["calls"] == calls == 5 * 3 and mm["flops_per_call"] == flops
    assert mm["gpu_time_us"] == pytest.approx(gpu_us, abs=1e-3)
    assert mm["achieved_tflops"] == pytest.approx(calls * flops / gpu_us / 1e6, rel=1e-5)
    # CUDA events around 20 back-to-back products outside the profiler: 781 TFLOP/s; opscope's figure is over
    # the kernels alone (797.6), so a little higher, and within 5%
    by_events = flops / (gemm["cuda_event_ms"] * 1e-3) / 1e12
    assert 1.0 <= mm["achieved_tflops"] / by_events < 1.05
    assert mm["peak_tflops"] == 989.4 and mm["pct_of_peak_compute"] == pytest.approx(
        100 * mm["achieved_tflops"] / 989.4, abs=1e-3
    )
    assert mm["bound"] == "compute"


def test_memory_bound_add_bandwidth_matches_the_raw_events_and_cuda_events(cli):
    rows = _json(cli, "efficiency", KNOWN)["rows"]
    (add,) = [r for r in rows if r["op"] == "aten::add" and r["dtype"] == "fp32"]
    n = FACTS["known"]["add"]["elements"]
    calls, gpu_us = _gpu_time_under("aten::add", [[n], [n], [], [n]])
    moved = FACTS["known"]["add"]["bytes"]  # two reads and one write of 4-byte floats
    assert add["calls"] == calls == 15 and add["bytes_per_call"] == moved
    assert add["achieved_tbps"] == pytest.approx(calls * moved / gpu_us / 1e6, rel=1e-5)
    by_events = moved / (FACTS["known"]["add"]["cuda_event_ms"] * 1e-3) / 1e12
    assert 1.0 <= add["achieved_tbps"] / by_events < 1.05
    assert add["bound"] == "memory" and 85 < add["pct_of_peak_bandwidth"] < 95  # 4.36 of the H200's 4.8 TB/s


def test_steps_busy_time_is_the_union_of_the_raw_gpu_intervals(cli):
    data = _json(cli, "steps", KNOWN)
    events = _raw_events()
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#"))
    gpu = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
    ]
    assert len(data["steps"]) == FACTS["known"]["steps"] == len(windows)
    for step, (lo, hi) in zip(data["steps"], windows, strict=True):
        clipped = sorted((max(a, lo), min(b, hi)) for a, b in gpu if a < hi and b > lo)
        busy, end = 0.0, lo
        for a, b in clipped:
            busy += max(0.0, b - max(a, end))
            end = max(end, b)
        (device,) = step["devices"]
        # float microseconds near 5.5e12 carry ~1 ns of rounding per timestamp; opscope works in integer ns
        assert device["busy_us"] == pytest.approx(busy, abs=0.02)
        assert step["gpu_events"] == len(clipped)


def test_allocator_snapshot_matches_the_allocators_own_counters(cli):
    facts = FACTS["snapshot"]
    data = _json(cli, "memory", DATA / "snapshot.pickle")
    (device,) = data["devices"]
    assert device["reserved_bytes"] == facts["memory_reserved"]
    assert device["allocated_bytes"] == facts["memory_allocated"]
    assert device["active_blocks"] == facts["active_blocks"] and device["segments"] == facts["segments"]
    assert device["reserved_bytes"] == (
        device["allocated_bytes"] + device["internal_free_bytes"] + device["external_free_bytes"]
    )
    (oom,) = data["ooms"]
    assert facts["num_ooms"] == 1 and oom["requested_bytes"] == 1 << 40
    largest = data["largest_blocks"][0]
    assert largest["size_bytes"] == facts["large_block_bytes"]


def test_allocation_sites_are_python_frames_not_the_allocators_own(cli):
    """torch 2.11 records C++ frames by default: every stack starts with torch::unwind::unwind() and the caching
    allocator's calls. The site shown (and `where` in JSON) is the innermost Python frame, else the ATen op and
    autograd node; the whole stack stays in `stack`."""
    data = _json(cli, "memory", DATA / "snapshot.pickle")
    largest, oom = data["largest_blocks"][0], data["ooms"][0]
    assert largest["stack"][0].endswith("torch::unwind::unwind()")
    assert largest["where"].endswith(" snapshot") and "gpu_capture.py:" in largest["where"]
    assert oom["where"].endswith(" snapshot") and "gpu_capture.py:" in oom["where"]
    wheres = {b["where"] for b in data["largest_blocks"]}
    # the backward pass allocates on autograd's C++ thread, with no Python frame: the ATen op and its node
    assert "aten::mm in AddmmBackward0" in wheres
    assert all(w.split(" ")[0].rsplit(":", 1)[0].endswith(".py") or w.startswith("aten::") for w in wheres)
    text = cli("memory", DATA / "snapshot.pickle", "--width", "200").out
    assert "unwind" not in text and "gpu_capture.py:171 snapshot" in text


def test_the_snapshot_opscope_profile_wrote_on_the_gpu(cli):
    """`opscope.profile(memory_snapshot=True)` on the H200: the snapshot it wrote beside the trace reads, and its
    tensors made before recording started say so instead of showing an empty site."""
    assert FACTS["known"]["opscope_snapshots"] and FACTS["known"]["warnings"] == []
    data = _json(cli, "memory", DATA / "known.memory_snapshot.pickle")
    (device,) = data["devices"]
    assert device["segments"] > 0 and device["allocated_bytes"] <= device["reserved_bytes"]
    text = cli("memory", DATA / "known.memory_snapshot.pickle").out
    assert "(no stack recorded)" in text


def _per_launch(cli, name: str) -> dict[int, dict]:
    data = _json(cli, "ncu", DATA / name, "--by", "launch")
    return {row["launch"]: row for row in data["kernels"]}


def test_ncu_details_and_raw_pages_of_one_capture_agree(cli):
    details, raw = _per_launch(cli, "ncu_details.csv.gz"), _per_launch(cli, "ncu_raw.csv.gz")
    assert sorted(details) == sorted(raw) == list(range(30))
    for launch, row in raw.items():
        other = details[launch]
        assert other["raw_name"] == row["raw_name"]
        # the details page prints values rounded for display; the raw page has them whole
        assert other["duration_us"] == pytest.approx(row["duration_us"], rel=1e-3, abs=0.01)
        assert other["sm_throughput_pct"] == pytest.approx(row["sm_throughput_pct"], abs=0.01)
        assert other["grid_size"] == row["grid_size"] and other["block_size"] == row["block_size"]
    assert _json(cli, "ncu", DATA / "ncu_raw.csv.gz")["device"] == "NVIDIA H200"


def test_ncu_launches_pair_with_the_trace_kernels_in_either_spelling(cli):
    """ncu and CUPTI demangle differently (namespaces, template parameters, `3ul` / `3`, lambdas): every kernel
    ncu profiled that the trace has is paired; only the random-number kernels that ran before the profiler
    started (not in the trace) are left."""
    metrics = _json(cli, "kernels", KNOWN, "--metrics", DATA / "ncu_details.csv.gz")["metrics"]
    assert metrics["profiled_launches"] == 30
    assert metrics["unmatched_kernels"] and all("distribution_" in n for n in metrics["unmatched_kernels"])
    ncu = _json(cli, "ncu", DATA / "ncu_details.csv.gz", "--by", "launch")["kernels"]
    assert metrics["matched_launches"] == sum(1 for k in ncu if "distribution_" not in k["raw_name"]) == 25


def test_canonical_names_of_real_kernels():
    cupti = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> "
        ">(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
    )
    ncu = "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>(int, T2, T3)"
    assert (
        canonical_name(cupti)
        == canonical_name(ncu)
        == "vectorized_elementwise_kernel<4,CUDAFunctor_add<float>,array<char*,3>>"
    )
    cupti = (
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernelTemplate<float, float, 32u, 32u, 256u, "
        "false, true, false>(long, long, float const*, float const*, float const*, float const*, float*, float*)"
    )
    ncu = (
        "void at::<unnamed>::GammaBetaBackwardCUDAKernelTemplate<float, float, 32, 32, 256, 0, 1, 0>(long, long, "
        "const T1 *, const T1 *, const T2 *, const T2 *, T1 *, T1 *)"
    )
    assert canonical_name(cupti) == canonical_name(ncu)
    cupti = (
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
        "at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, "
        "unsigned int, float, 4, 4>)"
    )
    ncu = (
        "void at::reduce_kernel<128, 4, at::ReduceOp<float, at::func_wrapper_t<float, at::sum_functor<float, float, "
        "float>::operator ()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, 4, "
        "4>>(T3)"
    )
    assert canonical_name(cupti) == canonical_name(ncu)
    # different template arguments stay different kernels
    assert canonical_name(ncu.replace("<128, 4,", "<512, 1,")) != canonical_name(ncu)


def test_a_cut_off_gzip_ncu_export_is_read_up_to_the_cut(cli, tmp_path):
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes((DATA / "ncu_details.csv.gz").read_bytes()[:15000])
    data = _json(cli, "ncu", cut, "--by", "launch")
    assert 0 < len(data["kernels"]) < 30
    text = cli("ncu", cut)
    assert text.code == 0 and "gzip stream truncated" in " ".join((text.out + text.err).split())


def test_a_gzip_ncu_export_too_large_once_decompressed_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(ncu_reader, "MAX_CSV_BYTES", 100_000)
    result = cli("ncu", DATA / "ncu_details.csv.gz")
    assert result.code == 2 and "decompresses to more than" in result.err
    assert len(result.err.strip().splitlines()) == 1 and "Traceback" not in result.err


def test_jax_xplane_on_an_nvidia_gpu(cli):
    """JAX 0.11 on the H200: the device plane names the GPU in `gpu_device_name` (not `device_name`), so the
    trace's device is the NVIDIA H200 and efficiency finds its peaks; three step markers, one GEMM kernel per
    matrix product (cuBLAS nvjet and XLA's Triton GEMM fusion)."""
    path = DATA / "jax.xplane.pb"
    summary = _json(cli, "summary", path, "--no-cache")
    names = [row["name"] for row in summary["rows"]]
    assert any(n.startswith("nvjet_sm90") for n in names) and any(n.startswith("gemm_fusion") for n in names)
    per_name: dict[str, int] = defaultdict(int)
    for row in summary["rows"]:
        per_name[row["name"]] += row["calls"]
    assert set(per_name.values()) == {FACTS["jax"]["steps"]}  # each kernel once per step
    assert _json(cli, "efficiency", path, "--no-cache")["device"]["peaks"] == "NVIDIA H200 SXM"
    assert len(_json(cli, "steps", path, "--no-cache")["steps"]) == FACTS["jax"]["steps"]


COMPILED = DATA / "compiled.pt.trace.json.gz"


def test_compile_check_on_inductor_kernels_and_cuda_graphs(cli):
    """torch.compile on the H200 (bench/gpu_capture.py `compiled`): one model with a graph break, one in
    mode="reduce-overhead" (CUDA graphs; the same `forward` code, so Dynamo counts it as a recompile of frame 0),
    and a new input shape in step 1. Regions, breaks and recompiles are recounted from the raw event names."""
    data = _json(cli, "compile-check", COMPILED)
    with gzip.open(COMPILED, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    regions = sorted(
        (e["ts"], e["name"].split(": ")[1]) for e in events if e["name"].startswith("Torch-Compiled Region: ")
    )
    assert [r["name"].split(": ")[1] for r in data["regions"]] == [ids for _, ids in regions]
    ids = {tuple(map(int, ids.split("/"))) for _, ids in regions}
    assert data["frames"] == sorted({f for f, _ in ids}) == [0, 1]
    assert data["graph_breaks"] == FACTS["compiled"]["graph_breaks_per_call"] == 1
    assert (
        data["recompiles"] == len({(f, c) for f, c in ids if c > 0}) == 3
    )  # 0/1 (the other model), 0/2, 1/1
    assert [s["regions"] for s in data["regions_per_step"]] == [2, 2, 2]  # the resume frame runs nested
    triton = {e["name"] for e in events if e.get("cat") == "kernel" and e["name"].startswith("triton_")}
    assert {k["name"] for k in data["fused_kernels"]} == triton and triton
    assert FACTS["compiled"]["outputs_match_eager"]


def test_compilation_inside_a_profiled_step_is_reported(cli):
    """Step 1 recompiled for a new shape and autotuned its Triton kernels while the profiler recorded: 1.84 s
    against a few ms for the other steps. compile-check names the step, the compile ids and the kernels."""
    data = _json(cli, "compile-check", COMPILED)
    (item,) = data["compiling"]
    assert item["step"] == FACTS["compiled"]["recompiled_in_step"] == 1
    assert item["compile_ids"] == ["0/2", "1/1"]
    with gzip.open(COMPILED, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    tuned = {
        e["name"].split("kernel_name=")[1].split(",")[0]
        for e in events
        if e["name"].startswith("CachingAutotuner.benchmark_all_configs") and "kernel_name=" in e["name"]
    }
    assert set(item["autotuned_kernels"]) == tuned and len(tuned) == 2
    assert all(k.startswith("triton_") for k in item["autotuned_kernels"])
    text = " ".join(cli("compile-check", COMPILED).out.split())
    assert "compiling while profiled: step 1: compile ids 0/2, 1/1; 2 Triton kernels autotuned" in text


def test_the_demo_on_a_gpu_states_the_busy_share_once(cli):
    """The demo's analysis on its own trace recorded on the H200: GPU kernels, the GPU busy share of the profiled
    steps recomputed from the raw events, and the idle time said once (by a rule, or by the demo's own line
    when the rules' findings explain it)."""
    from opscope.capture.demo import IDLE_RULES, analyse_capture

    facts = FACTS["demo"]
    path = DATA / "demo.pt.trace.json.gz"
    result = analyse_capture(
        path,
        "cuda:0 (NVIDIA H200)",
        facts["total_steps"],
        facts["profiled_steps"],
        tuple(facts["latent_shape"]),
        1.0,
    )
    assert result.summary.has_gpu_activity and len(result.step_ns) == facts["profiled_steps"]
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    windows = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e["name"].startswith("ProfilerStep#")
        and e.get("cat") == "user_annotation"  # not the GPU-side copy
    ]
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
    )
    busy = 0.0
    for lo, hi in windows:
        end = lo
        for a, b in gpu:
            a, b = max(a, lo), min(b, hi)
            if b > max(a, end):
                busy += b - max(a, end)
                end = b
    assert result.busy == pytest.approx(busy / sum(hi - lo for lo, hi in windows), abs=1e-4)
    said = [
        d
        for d in result.diagnosis
        if d.split(":")[0].split()[-1] in IDLE_RULES or d.startswith("The GPU was busy")
    ]
    assert len(said) == 1


def test_the_demo_says_the_busy_share_when_no_idle_rule_is_among_the_findings():
    """Seen on the H200 (bench/gpu_check.py): step 0 held 700 ms of first-call costs, the idle-time rules' time
    was explained by other findings, and the diagnosis of a GPU busy 2% of the time said nothing about it."""
    from opscope.capture.demo import diagnose

    lines = diagnose(True, [("k", 1.0)], [700_000_000, 8_500_000, 8_500_000], 0.02)
    assert "The GPU was busy 2.0% of the profiled step time: it mostly waits for the host." in lines
    assert (
        diagnose(True, [("k", 1.0)], [10, 10], 0.8)[-1] == "The GPU was busy 80.0% of the profiled step time."
    )


MODERN = DATA / "modern.pt.trace.json.gz"


def test_advice_on_a_model_written_todays_way(cli):
    """bf16 autocast, SDPA (cuDNN's flash kernels on the H200) and a fused AdamW: the advice must not tell this
    code to use tensor cores or fused attention, and every kernel of cuDNN's attention (its backward helpers
    `cudnn::fusion::compute_dot_do_o_*` / `convert_dq_to_16bits` were "convolution" before) is attention."""
    fired = {f["id"] for f in _json(cli, "advise", MODERN)["findings"]}
    assert not fired & {"tensor_cores_unused", "unfused_attention"}, fired
    with gzip.open(MODERN, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    cudnn = {
        e["name"]
        for e in events
        if e.get("cat") == "kernel" and e["name"].startswith(("cudnn", "void cudnn"))
    }
    assert any("sdpa" in n for n in cudnn) and any("cudnn::fusion" in n for n in cudnn)
    data = _json(cli, "analyze", MODERN)
    by_category = {c["category"]: c for c in data["categories"]}
    assert "convolution" not in by_category  # no convolution in a transformer
    gpu_us = sum(e["dur"] for e in events if e.get("cat") == "kernel" and e["name"] in cudnn)
    assert by_category["attention"]["total_us"] == pytest.approx(gpu_us, abs=0.01)


def test_the_demo_names_withheld_idle_rules_only_when_they_fired():
    """The busy line says the idle-time rules fired only when they did (they are among `Advice.withheld`, their
    time claimed by other findings), not whenever some finding exists."""
    from dataclasses import replace

    import opscope
    from opscope.analysis.rules.advise import advise
    from opscope.capture.demo import IDLE_RULES, diagnose

    advice = advise(opscope.load(DATA / "demo.pt.trace.json.gz")).advice
    assert advice is not None
    idle = tuple(f for f in advice.findings if f.id in IDLE_RULES)
    others = tuple(f for f in advice.findings if f.id not in IDLE_RULES)
    assert idle and others
    withheld = replace(advice, findings=others, withheld=advice.withheld + idle)
    line = diagnose(True, [("k", 1.0)], [10, 10], 0.04, withheld)[-1]
    assert line.endswith("(the idle-time rules fired; the findings above explain their time).")
    none_fired = replace(
        advice, findings=others, withheld=tuple(f for f in advice.withheld if f.id not in IDLE_RULES)
    )
    line = diagnose(True, [("k", 1.0)], [10, 10], 0.04, none_fired)[-1]
    assert line == "The GPU was busy 4.0% of the profiled step time: it mostly waits for the host."
