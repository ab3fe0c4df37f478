"""Advice rules on real traces: a real positive and a real negative for each rule, with the figures checked
against an independent recomputation from the raw events (tests/reference.py reads them with plain json),
and `opscope advise` / `analyze` / `kernels` in-process."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.findings import Finding
from opscope.analysis.overview import Analysis, analyze
from opscope.analysis.rules.advise import advise
from opscope.analysis.rules.registry import rule_ids

VALIDITY_KEYS = {"validity", "validity_banners"}  # every document's (docs/validity.md)

FALCON_H100 = "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz"  # ViT, bf16, SDPA, H100
PART_2 = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json"  # A100 fp16
RESNET_V100 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"  # fp32
RESNET_WORKERS4 = "kineto/tb_plugin_samples_resnet50_profiler_api_num_workers_4_worker0.pt.trace.json.gz"
RESNET_NO_PROPS = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
DDP = "hta/nccl_parser_config_nccl_data.json.gz"  # data-parallel job (DistributedDataParallel), A100
V100_NS = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT_H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
COMPILE_MI300 = "tracelens/torch_compile_triton__trace.json.gz"

ISSUE_IDS = {
    "pageable_memcpy",
    "sync_in_loop",
    "gemm_alignment",
    "tensor_cores_unused",
    "unfused_attention",
    "host_bound",
    "dataloader_bound",
    "launch_bound_small_kernels",
    "fusion_candidates",
    "channels_last",
    "exposed_communication",
    "gpu_gaps",
    "low_utilization_windows",
    "memory_near_capacity",
    "low_occupancy",
}
# Rules added after the issue's list (each with its own tests).
ALL_IDS = ISSUE_IDS | {"low_efficiency"}

# (rule, a trace where it fires, a trace where it does not)
POSITIVE_NEGATIVE = [
    ("pageable_memcpy", RESNET_V100, FALCON_H100),
    ("sync_in_loop", DLRM, V100_NS),
    ("gemm_alignment", PART_2, QWEN_H100),
    ("tensor_cores_unused", RESNET_V100, FALCON_H100),
    ("unfused_attention", PART_2, FALCON_H100),
    ("host_bound", DDP, V100_NS),
    ("dataloader_bound", RESNET_V100, RESNET_WORKERS4),
    ("launch_bound_small_kernels", BERT_H100, FALCON_H100),
    ("fusion_candidates", QWEN_H100, FALCON_H100),
    ("channels_last", DDP, RESNET_V100),
    ("exposed_communication", DLRM, DDP),
    ("gpu_gaps", DDP, FALCON_H100),
    ("low_utilization_windows", DDP, V100_NS),
    ("low_occupancy", V100_NS, FALCON_H100),
]


@cache
def result(rel: str) -> Analysis:
    return advise(opscope.load(corpus_path(rel)))


def finding(rel: str, rule: str) -> Finding | None:
    """The rule's finding on the trace: shown, or fired but withheld (its time claimed above, or no saving)."""
    advice = result(rel).advice
    assert advice is not None
    return next((f for f in (*advice.findings, *advice.withheld) if f.id == rule), None)


@cache
def raw(rel: str) -> list[dict]:
    return ref.load(corpus_path(rel))


def test_every_rule_of_the_issue_is_registered() -> None:
    assert set(rule_ids()) == ALL_IDS


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("rule", "positive", "negative"), POSITIVE_NEGATIVE, ids=[c[0] for c in POSITIVE_NEGATIVE]
)
def test_real_positive_and_negative(rule: str, positive: str, negative: str) -> None:
    found = finding(positive, rule)
    assert found is not None, rule
    assert 1 <= len(found.evidence) <= 10 and found.time_at_stake_ns > 0
    share = found.saving_share
    assert found.severity == ("crit" if share >= 0.10 else "warn" if share >= 0.02 else "info")
    assert finding(negative, rule) is None
    advice = result(negative).advice
    assert advice is not None and rule in advice.rules_checked
    assert not [w for w in advice.warnings if w.startswith(rule)]


@pytest.mark.corpus
def test_findings_sorted_by_predicted_saving() -> None:
    advice = result(DLRM).advice
    assert advice is not None and len(advice.findings) > 3
    savings = [f.predicted_saving_ns or 0 for f in advice.findings]
    assert savings == sorted(savings, reverse=True) and all(s > 0 for s in savings)
    assert sum(savings) <= advice.window_ns and advice.combined_saving_ns <= sum(savings)


@pytest.mark.corpus
def test_pageable_memcpy_matches_raw_copies() -> None:
    events = raw(RESNET_V100)
    copies = [
        e
        for e in events
        if ref.is_x(e) and "Pageable" in e.get("name", "") and e.get("cat") in ("Memcpy", "gpu_memcpy")
    ]
    found = finding(RESNET_V100, "pageable_memcpy")
    assert found is not None and found.value == len(copies) == 12
    assert found.time_at_stake_ns == sum(ref.span(e)[1] - ref.span(e)[0] for e in copies)
    assert sum(e["bytes"] for e in found.evidence) == sum(ref.args(e).get("bytes", 0) for e in copies)
    assert all(e["async"] and e["launch_call"] == "cudaMemcpyAsync" for e in found.evidence)


@pytest.mark.corpus
def test_dataloader_share_matches_raw_steps() -> None:
    events = raw(RESNET_V100)
    steps = ref.steps(events)
    loads = [
        ref.span(e) for e in events if ref.is_x(e) and re.search(r"DataLoader.*__next__", e.get("name", ""))
    ]
    inside = [(a, b) for a, b in loads if ref.in_steps(a, steps)]
    spent = sum(b - a for a, b in inside)
    found = finding(RESNET_V100, "dataloader_bound")
    assert found is not None and found.time_at_stake_ns == spent
    assert found.value == pytest.approx(spent / sum(b - a for a, b in steps))
    other = result(RESNET_WORKERS4).advice
    assert other is not None  # with 4 workers the loader costs little: under the 5% threshold


@pytest.mark.corpus
def test_host_bound_ddp_figures_are_the_analysis_figures() -> None:
    found = finding(DDP, "host_bound")
    analysis = result(DDP)
    (device,) = analysis.timeline.devices
    (idle,) = analysis.idle.devices
    assert found is not None and found.value == pytest.approx(device.utilization) and device.utilization < 0.5
    assert (
        found.time_at_stake_ns == idle.host_wait_ns and idle.host_wait_ns > idle.other_ns + idle.sync_wait_ns
    )
    names = [e["cpu_op"] for e in found.evidence if "cpu_op" in e]
    assert "ProfilerStep#4" not in names and any("optimizer" in n or "forward" in n for n in names)


@pytest.mark.corpus
def test_unfused_attention_chains_counted_from_raw_ops() -> None:
    ops = [e for e in raw(PART_2) if e.get("cat") == "cpu_op"]
    square = [
        e
        for e in ops
        if e["name"] == "aten::_softmax"  # one per softmax call, the innermost op
        and ref.args(e)["Input Dims"][0][-1] == ref.args(e)["Input Dims"][0][-2]
    ]
    found = finding(PART_2, "unfused_attention")
    assert found is not None and found.value == 53
    assert sum(e["chains"] for e in found.evidence) == len(square) == 8
    assert found.evidence[0]["softmax_input_dims"] == [16, 53, 53]


@pytest.mark.corpus
def test_gemm_alignment_names_the_misaligned_sizes() -> None:
    found = finding(PART_2, "gemm_alignment")
    assert found is not None
    baddbmm = [e for e in found.evidence if e["op"] == "aten::baddbmm"]
    # [16, 53, 16] x [16, 16, 53]: N = 53 selects the kernel; M (53 tokens) is no leading dimension (issue 27)
    assert baddbmm and baddbmm[0]["misaligned"] == {"N": 53} and baddbmm[0]["pad_to"] == {"N": 56}
    assert all("M" not in e["misaligned"] for e in found.evidence)
    assert all(e["multiple_of"] == 8 and e["dtype"] == "c10::Half" for e in found.evidence)


@pytest.mark.corpus
def test_tensor_cores_unused_v100_fp32_share_from_raw_kernels() -> None:
    events = raw(RESNET_V100)
    per_name: dict[str, int] = {}
    for e in events:
        if ref.is_x(e) and e.get("cat") in ("Kernel", "kernel"):
            a, b = ref.span(e)
            per_name[e["name"]] = per_name.get(e["name"], 0) + b - a
    gpu_total = sum(ref.span(e)[1] - ref.span(e)[0] for e in ref.gpu_events(events))
    found = finding(RESNET_V100, "tensor_cores_unused")
    assert found is not None and "0 tensor-core" in found.title and "V100" in found.title
    fp32 = re.compile(r"sgemm|scudnn|<float\b", re.IGNORECASE)
    for item in found.evidence:  # every kernel named is an fp32 GEMM / convolution, with its raw time
        assert fp32.search(item["kernel"]) and item["time_us"] * 1e3 == pytest.approx(
            per_name[item["kernel"]]
        )
    assert found.time_at_stake_ns >= sum(per_name[i["kernel"]] for i in found.evidence)
    assert found.share == pytest.approx(found.time_at_stake_ns / gpu_total) and found.share > 0.5
    # without deviceProperties the kernel names say the GPU (volta_sgemm_*, volta_scudnn_*: Volta, which has
    # fp16 tensor cores): the finding says the GPU is inferred, and its advice never suggests TF32 (issue 27)
    inferred = finding(RESNET_NO_PROPS, "tensor_cores_unused")
    assert inferred is not None and "Volta (sm70)" in inferred.title
    assert "allow_tf32" not in inferred.advice and "float32_matmul_precision" not in inferred.advice
    assert "inferred from kernel names" in inferred.advice
    assert "allow_tf32" not in found.advice and "fp16" in found.advice


@pytest.mark.corpus
def test_gpu_gaps_longest_from_raw_kernels() -> None:
    """The longest idle stretch of the GPU in the steady part of the window (here: the steps; docs/advice.md
    "Capture type"), from the raw GPU events; and the time at stake: every gap longer than 1 ms."""
    from test_advice_savings import idle_gaps

    gaps = [b - a for a, b in idle_gaps(raw(DDP))]
    found = finding(DDP, "gpu_gaps")
    assert found is not None and found.value * 1e3 == pytest.approx(max(gaps))
    assert found.time_at_stake_ns == sum(g for g in gaps if g > 1_000_000)
    assert found.evidence[0]["length_us"] * 1e3 == pytest.approx(max(gaps))


@pytest.mark.corpus
def test_exposed_communication_is_the_timeline_figure() -> None:
    found = finding(DLRM, "exposed_communication")
    (device,) = result(DLRM).timeline.devices
    assert found is not None and found.time_at_stake_ns == device.exposed_comm_ns
    assert found.value == pytest.approx(device.exposed_comm_ns / result(DLRM).timeline.window_ns)


@pytest.mark.corpus
def test_low_occupancy_never_flags_tensor_core_kernels() -> None:
    found = finding(V100_NS, "low_occupancy")
    assert found is not None and all(e["theoretical_occupancy_pct"] < 25 for e in found.evidence)
    assert finding(FALCON_H100, "low_occupancy") is None


@pytest.mark.corpus
def test_memory_rule_is_evaluated_where_the_trace_has_allocator_events() -> None:
    # Qwen on an H100 records [memory] events: peak 1,991.757 MiB of 81,079.750 MiB (2.5%): no finding
    advice = result(QWEN_H100).advice
    assert advice is not None and "memory_near_capacity" in advice.rules_checked
    assert finding(QWEN_H100, "memory_near_capacity") is None
    assert not [w for w in advice.warnings if w.startswith("memory_near_capacity")]


# --- the CLI -------------------------------------------------------------------------------------------------

ADVISE_KEYS = {
    "schema",
    "trace",
    "gpu",
    "steps_spec",
    "findings",
    "rules_checked",
    "warnings",
    "window_us",
    "combined_saving_us",
    "not_evaluated",
    "rules_evaluated",
    "capture",
}
FINDING_KEYS = {
    "id",
    "severity",
    "title",
    "time_at_stake_us",
    "share",
    "metric",
    "value",
    "threshold",
    "evidence",
    "advice",
    "source",
    "predicted_saving_us",
    "saving_share",
    "saving_model",
    "saving_basis",
    "what_if",
    "saving_range_us",
    "calibration",
    "shared_with",
}


@pytest.mark.corpus
def test_advise_json_contract(cli) -> None:
    out = cli("advise", corpus_path(DLRM), "--format", "json")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert data["schema"] == "opscope.advise/1" and set(data) == ADVISE_KEYS | VALIDITY_KEYS
    assert set(data["rules_checked"]) == ALL_IDS
    assert data["findings"] and all(set(f) == FINDING_KEYS for f in data["findings"])
    assert all(len(f["evidence"]) <= 10 for f in data["findings"])
    assert all(0 < f["predicted_saving_us"] <= f["time_at_stake_us"] for f in data["findings"])
    assert all(f["saving_model"] for f in data["findings"])
    assert [f["predicted_saving_us"] for f in data["findings"]] == sorted(
        (f["predicted_saving_us"] for f in data["findings"]), reverse=True
    )
    assert data["combined_saving_us"] <= sum(f["predicted_saving_us"] for f in data["findings"]) + 1e-3
    assert data["combined_saving_us"] <= data["window_us"]
    assert {o["id"] for o in data["rules_evaluated"]} == set(data["rules_checked"])
    assert all(o["reason"] for o in data["not_evaluated"])


@pytest.mark.corpus
@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_advise_formats(cli, fmt: str) -> None:
    out = cli("advise", corpus_path(RESNET_V100), "--format", fmt, "--width", "120")
    assert out.code == 0, out.err
    if fmt == "csv":
        assert out.out.splitlines()[0].startswith("severity,id,time_us,share,title,")  # + the JSON scalars
        assert "dataloader_bound" in out.out
    else:
        assert "dataloader_bound" in out.out and "num_workers" in out.out


@pytest.mark.corpus
def test_advise_fail_on(cli, tmp_path: Path) -> None:
    path = corpus_path(RESNET_V100)
    assert cli("advise", path).code == 0
    assert cli("advise", path, "--fail-on", "crit").code == 1
    assert cli("advise", path, "--fail-on", "warn").code == 1
    findings = json.loads(cli("advise", path, "--format", "json").out)["findings"]
    crit = [f["id"] for f in findings if f["severity"] == "crit"]
    warn = [f["id"] for f in findings if f["severity"] == "warn"]
    assert crit
    if not warn:  # make one: every finding left warn or worse ([severity] in the rules file)
        rules = tmp_path / "all-warn.toml"
        rules.write_text("[severity]\nwarn = 0.0\nmin_saving_us = 0\n")
        findings = json.loads(cli("advise", path, "--rules", rules, "--format", "json").out)["findings"]
        assert all(f["severity"] in ("warn", "crit") for f in findings)
        assert cli("advise", path, "--rules", rules, "--fail-on", "warn").code == 1
        return
    rules = tmp_path / "no-crit.toml"
    # with a crit rule off, the idle time it explained may surface under another rule: off too, until no crit
    off = list(crit)
    for _ in range(10):
        rules.write_text("".join(f"[rules.{rule}]\nenabled = false\n" for rule in off))
        left = json.loads(cli("advise", path, "--rules", rules, "--format", "json").out)["findings"]
        more = [f["id"] for f in left if f["severity"] == "crit"]
        if not more:
            break
        off += more
    crit = off
    warn = [f["id"] for f in left if f["severity"] == "warn"]
    assert cli("advise", path, "--rules", rules, "--fail-on", "crit").code == 0  # only warn / info left
    assert cli("advise", path, "--rules", rules, "--fail-on", "warn").code == (1 if warn else 0)
    # with those rules off, the idle time they explained may surface under another rule (gpu_gaps): off too
    disabled = crit + warn
    for _ in range(10):
        rules.write_text("".join(f"[rules.{rule}]\nenabled = false\n" for rule in disabled))
        left = json.loads(cli("advise", path, "--rules", rules, "--format", "json").out)["findings"]
        more = [f["id"] for f in left if f["severity"] in ("warn", "crit")]
        if not more:
            break
        assert cli("advise", path, "--rules", rules, "--fail-on", "warn").code == 1
        disabled += more
    assert cli("advise", path, "--rules", rules, "--fail-on", "warn").code == 0


@pytest.mark.corpus
def test_advise_rules_file_changes_thresholds(cli, tmp_path: Path) -> None:
    path = corpus_path(RESNET_V100)
    rules = tmp_path / "rules.toml"
    rules.write_text(
        "[rules.dataloader_bound]\nthreshold = 0.5\n\n[rules.tensor_cores_unused]\nenabled = false\n"
    )
    data = json.loads(cli("advise", path, "--rules", rules, "--format", "json").out)
    ids = {f["id"] for f in data["findings"]}
    assert "dataloader_bound" not in ids and "tensor_cores_unused" not in data["rules_checked"]
    rules.write_text("[rules.dataloader_bound]\nthreshold = 0.01\n")
    data = json.loads(cli("advise", path, "--rules", rules, "--format", "json").out)
    (dl,) = [f for f in data["findings"] if f["id"] == "dataloader_bound"]
    assert dl["threshold"] == 0.01


@pytest.mark.parametrize(
    "text",
    [
        "[rules.nope]\nthreshold = 1\n",
        "[rules.gpu_gaps]\nthreshold = 'x'\n",
        "not toml [",
        "[other]\na = 1\n",
        "[rules.gpu_gaps]\nlimit = 3\n",
        "[severity]\ncrit = 2\n",
        "[severity]\ncrit = 0.01\nwarn = 0.5\n",
        "[severity]\nmin_saving_us = -1\n",
        "[severity]\nloud = true\n",
    ],
)
def test_advise_bad_rules_file_is_a_usage_error(cli, tmp_path: Path, text: str) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(text)
    out = cli("advise", "--list-rules", "--rules", rules)
    assert out.code == 2 and out.err.startswith("opscope: error: --rules") and "Traceback" not in out.err


def test_advise_list_rules(cli) -> None:
    out = cli("advise", "--list-rules", "--format", "json")
    assert out.code == 0
    data = json.loads(out.out)
    assert {r["id"] for r in data["rules"]} == ALL_IDS
    assert all(r["advice"] and r["source"] and r["metric"] for r in data["rules"])
    table = cli("advise", "--list-rules", "--width", "160")
    assert table.code == 0 and "pageable_memcpy" in table.out


@pytest.mark.corpus
def test_analyze_shows_findings_first(cli) -> None:
    out = cli("analyze", corpus_path(DDP), "--width", "200")
    assert out.code == 0
    lines = out.out.splitlines()
    head = out.out.split("trace:")[0]
    data = json.loads(cli("analyze", corpus_path(DDP), "--format", "json").out)
    first = data["findings"][0]
    assert first["id"] == "host_bound" and first["severity"] == "crit"  # the host's cause named (issue 59)
    assert lines[1].strip().startswith(f"crit {first['id']}") and "saving about" in head
    assert data["findings"] == json.loads(cli("advise", corpus_path(DDP), "--format", "json").out)["findings"]


@pytest.mark.corpus
def test_kernels_occupancy_not_recorded_is_na(cli) -> None:
    """Kineto writes est. achieved occupancy 0 for cutlass / cuBLAS GEMMs where it made no estimate."""
    events = raw(FALCON_H100)
    cutlass = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("void cutlass")]
    assert cutlass and all(ref.args(e)["est. achieved occupancy %"] == 0 for e in cutlass)
    data = json.loads(cli("kernels", corpus_path(FALCON_H100), "--format", "json", "--top", "0").out)
    rows = [r for r in data["rows"] if r["name"].startswith("void cutlass")]
    assert rows and all(r["est_achieved_occupancy_pct"] is None for r in rows)
    assert all("low_occupancy" not in r.get("flags", []) for r in rows)
    table = cli("kernels", corpus_path(FALCON_H100), "--width", "220")
    line = next(x for x in table.out.splitlines() if "cutlass_80" in x)
    assert "n/a" in line and " 0.000 " not in line


@pytest.mark.corpus
def test_diff_shows_findings_fixed_and_new(cli) -> None:
    """The same ResNet-50 with 4 DataLoader workers: the DataLoader finding is fixed."""
    before, after = corpus_path(RESNET_V100), corpus_path(RESNET_WORKERS4)
    data = json.loads(cli("diff", before, after, "--format", "json").out)
    fixed = {f["id"] for f in data["findings"]["fixed"]}
    assert "dataloader_bound" in fixed and data["findings"]["new"] == []
    remaining = {f["id"] for f in data["findings"]["remaining"]}
    advise_before = {f["id"] for f in json.loads(cli("advise", before, "--format", "json").out)["findings"]}
    not_comparable = {f["id"] for f in data["findings"]["not_comparable"]}  # not evaluated on one side
    assert fixed | remaining | not_comparable >= advise_before
    reverse = json.loads(cli("diff", after, before, "--format", "json").out)
    assert "dataloader_bound" in {f["id"] for f in reverse["findings"]["new"]}
    table = cli("diff", before, after, "--width", "120")
    assert "findings fixed: dataloader_bound (crit, saving " in table.out


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_advise_hostile_names(cli, tmp_path: Path, fmt: str) -> None:
    """Hand-made trace whose names are HTML / terminal injections: findings name them, escaped."""
    from rawfixtures import HOSTILE_OP, hostile_trace

    path = hostile_trace(tmp_path / "hostile <x>.json")
    # the low-utilisation finding would claim the idle time first: off, so host_bound (whose evidence names the
    # hostile op) is the finding shown
    rules = tmp_path / "rules.toml"
    rules.write_text("[rules.low_utilization_windows]\nenabled = false\n")
    out = cli("advise", path, "--format", fmt, "--no-cache", "--width", "150", "--rules", rules)
    assert out.code == 0, out.err
    assert "\x1b" not in out.out and "\r" not in out.out
    if fmt == "json":
        data = json.loads(out.out)
        ops = [e.get("cpu_op") for f in data["findings"] for e in f["evidence"]]
        assert HOSTILE_OP in ops
    if fmt == "markdown":
        assert HOSTILE_OP not in out.out  # escaped, never as markup
        assert "cpu_op=\\</script\\>\\<script\\>alert(2)\\</script\\>" in out.out


@pytest.mark.corpus
def test_sync_in_loop_names_the_python_line() -> None:
    """with_stack trace: the `.item()`-style sync is attributed to the user's source line around it (raw: the
    latest-starting python_function event outside torch that contains the call on its thread)."""
    events = raw(QWEN_H100)
    (call,) = [e for e in events if e.get("name") == "cudaStreamSynchronize" and ref.is_x(e)]
    a, b = ref.span(call)
    frames = [
        e
        for e in events
        if e.get("cat") == "python_function"
        and ref.is_x(e)
        and e["pid"] == call["pid"]
        and e["tid"] == call["tid"]
        and ref.span(e)[0] <= a
        and ref.span(e)[1] >= b
        and re.search(r"\.py\(\d+\)", e["name"])
        and not e["name"].startswith("torch")
    ]
    expected = max(frames, key=lambda e: ref.span(e)[0])["name"]
    found = finding(QWEN_H100, "sync_in_loop")
    assert found is not None
    (item,) = [e for e in found.evidence if e["call"] == "cudaStreamSynchronize"]
    assert item["python"] == expected and item["op"] == "aten::_local_scalar_dense"
    assert item["pattern"].startswith(".item()")


@pytest.mark.corpus
def test_steps_restrict_the_rules(cli) -> None:
    events = raw(RESNET_V100)
    steps = {n: (s, e) for n, s, e in ref.step_windows(events)}
    chosen = [steps[7], steps[8]]
    loads = [
        ref.span(e) for e in events if ref.is_x(e) and re.search(r"DataLoader.*__next__", e.get("name", ""))
    ]
    spent = sum(b - a for a, b in loads if ref.in_steps(a, chosen))
    data = json.loads(cli("advise", corpus_path(RESNET_V100), "--steps", "7-8", "--format", "json").out)
    assert data["steps_spec"] == "7-8"
    (dl,) = [f for f in data["findings"] if f["id"] == "dataloader_bound"]
    assert dl["time_at_stake_us"] * 1e3 == pytest.approx(spent)
    assert dl["value"] == pytest.approx(spent / sum(b - a for a, b in chosen), abs=1e-6)


@pytest.mark.corpus
def test_pageable_memcpy_nsys_from_src_and_dst_kinds() -> None:
    """Nsight Systems SQLite: pageable copies are those whose srcKind or dstKind is the pageable memory kind
    (ENUM_CUDA_MEM_KIND), read here with sqlite3."""
    import sqlite3

    rel = "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite"
    with sqlite3.connect(f"file:{corpus_path(rel)}?mode=ro", uri=True) as db:
        (pageable,) = db.execute("select id from ENUM_CUDA_MEM_KIND where label = 'Pageable'").fetchone()
        calls, total, nbytes = db.execute(
            "select count(*), sum(end - start), sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY "
            "where srcKind = ? or dstKind = ?",
            (pageable, pageable),
        ).fetchone()
    found = finding(rel, "pageable_memcpy")
    assert found is not None and found.value == calls and found.time_at_stake_ns == total
    assert sum(e["bytes"] for e in found.evidence) == nbytes
    assert all(not e["async"] and e["launch_call"] == "cudaMemcpy" for e in found.evidence)


@pytest.mark.corpus
def test_predicted_saving_is_at_most_the_critical_path_what_if(cli) -> None:
    """dataloader_bound's remedy is a removal (the DataLoader waits gone): its saving is the smaller of the
    critical path's what-if summed over the steps (as `opscope critical-path --what-if` prints it) and the
    idle time it claims, and `analyze` gives the same findings as `advise`."""
    path = corpus_path(RESNET_V100)
    advise = json.loads(cli("advise", path, "--format", "json").out)
    (dl,) = [f for f in advise["findings"] if f["id"] == "dataloader_bound"]
    pattern = r"^(enumerate\(DataLoader\)#_SingleProcessDataLoaderIter\.__next__)$"
    cp = json.loads(cli("critical-path", path, "--what-if", f"{pattern}:0", "--format", "json").out)
    expected = sum(s["what_if"]["saving_us"] for s in cp["steps"])
    assert expected > 0 and 0 < dl["predicted_saving_us"] <= expected + 1e-3
    assert dl["predicted_saving_us"] <= dl["time_at_stake_us"] + 1e-6
    assert dl["saving_model"] == "data_loading_overlapped, critical path"
    analyze = json.loads(cli("analyze", path, "--format", "json").out)
    assert analyze["findings"] == advise["findings"]


@pytest.mark.corpus
def test_pageable_memcpy_predicted_saving_is_the_pinned_what_if(cli) -> None:
    """pageable_memcpy: the pageable copies of at least 64 KiB at pinned speed (factor 0.5, docs/advice.md):
    the saving is at most the critical path's what-if of those copies x 0.5 and at most half their time."""
    path = corpus_path(RESNET_V100)
    advise = json.loads(cli("advise", path, "--format", "json").out)
    (found,) = [f for f in advise["findings"] if f["id"] == "pageable_memcpy"]
    events = [e for e in raw(RESNET_V100) if ref.is_x(e) and "Pageable" in e.get("name", "")]
    big = [e for e in events if e.get("cat") in ("Memcpy", "gpu_memcpy") and ref.args(e)["bytes"] >= 65536]
    half = sum(ref.span(e)[1] - ref.span(e)[0] for e in big) / 2 / 1e3
    from opscope.analysis.rules.model import exact_names

    pattern = exact_names(sorted({e["name"] for e in big}))
    cp = json.loads(cli("critical-path", path, "--what-if", f"{pattern}:0.5", "--format", "json").out)
    expected = sum(s["what_if"]["saving_us"] for s in cp["steps"])
    assert 0 < found["predicted_saving_us"] <= min(expected, half) + 1e-3


def test_exact_names_regex_matches_only_those_names() -> None:
    import polars as pl

    from opscope.analysis.rules.model import exact_names

    names = [
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(x)",
        "a.b|c [d] {e} ^f$ #g &h -i ~j *k +l ?m",
    ]
    pattern = exact_names(names)
    series = pl.Series([*names, names[0] + " ", "x" + names[1], "other"])
    assert series.str.contains(pattern).to_list() == [True, True, False, False, False]
    assert [bool(re.search(pattern, n)) for n in series] == [True, True, False, False, False]


@pytest.mark.corpus
def test_low_efficiency_predicted_saving_is_the_faster_kernel_what_if(cli) -> None:
    """low_efficiency (a faster kernel): the kernels of the low op shapes rescaled as if each shape ran at the
    threshold (30% of peak): factor = the time-weighted mean of pct / 30 over the low shapes; the saving is at
    most the critical path's what-if with that selector and factor, summed over the steps."""
    from opscope.analysis.base.linking import link
    from opscope.analysis.rules.context import RuleContext
    from opscope.analysis.rules.efficiency import low_efficiency
    from opscope.analysis.rules.model import Hit
    from opscope.analysis.timeline.activity import TimelineOptions, gpu_activity

    path = corpus_path(RESNET_V100)
    found = finding(RESNET_V100, "low_efficiency")
    assert found is not None
    trace = opscope.load(path)
    linkage = link(trace)
    ctx = RuleContext(
        trace, analyze(trace, linkage=linkage), linkage, gpu_activity(trace, TimelineOptions(), linkage)
    )
    hit = low_efficiency(ctx, 30)
    assert isinstance(hit, Hit) and hit.what_if is not None and hit.estimate_ns is not None
    pattern, factor = hit.what_if
    ev = found.evidence
    if len(ev) < 10:  # every low shape is in the evidence: the factor can be recomputed from it
        time = sum(e["gpu_time_us"] for e in ev)
        recomputed = sum(e["gpu_time_us"] * min(e["pct_of_peak"] / 30, 1.0) for e in ev) / time
        assert factor == pytest.approx(recomputed, rel=1e-2)  # the evidence is rounded (pct to 0.01)
        assert hit.estimate_ns == pytest.approx(time * (1 - recomputed) * 1e3, rel=1e-2)
    assert 0 < factor < 1
    cp = json.loads(cli("critical-path", path, "--what-if", f"{pattern}:{factor!r}", "--format", "json").out)
    expected = sum(s["what_if"]["saving_us"] for s in cp["steps"])
    assert 0 <= (found.predicted_saving_ns or 0) / 1e3 <= min(expected, hit.estimate_ns / 1e3) + 1e-3
