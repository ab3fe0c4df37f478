"""`opscope analyze` in-process: the opscope.analyze/1 JSON contract, every output format, device selection,
and the edge cases (CPU-only, GPU-only, launches without kernels, negative durations, bad input)."""

from __future__ import annotations

import json

import pytest

from conftest import corpus_path

VALIDITY_KEYS = {"validity", "validity_banners"}  # every document's (docs/validity.md)

DLRM = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
TOP_KEYS = {
    "schema",
    "trace",
    "gpu",
    "window_us",
    "window",
    "devices",
    "categories",
    "unattributed_share",
    "launch_delay_us",
    "launch_delay",
    "kernels",
    "ops",
    "syncs",
    "memcpy",
    "steps",
    "steps_spec",
    "linking",
    "warnings",
    "findings",
    "memory",
}


def analyze_json(cli, *args) -> dict:
    result = cli("analyze", *args, "--format", "json")
    assert result.code == 0, result.err
    return json.loads(result.out)


@pytest.mark.corpus
def test_json_contract(cli) -> None:
    data = analyze_json(cli, corpus_path(DLRM))
    assert data["schema"] == "opscope.analyze/1" and set(data) == TOP_KEYS | VALIDITY_KEYS
    (device,) = data["devices"]
    assert {"device", "busy_us", "idle_us", "utilization", "idle_breakdown"} <= set(device)
    assert set(device["idle_breakdown"]) >= {"host_wait_us", "sync_wait_us", "other_us"}
    parts = device["idle_breakdown"]
    assert parts["host_wait_us"] + parts["sync_wait_us"] + parts["other_us"] == pytest.approx(
        device["idle_us"]
    )
    assert device["busy_us"] + device["idle_us"] == pytest.approx(data["window_us"])
    assert all({"category", "total_us", "share"} <= set(c) for c in data["categories"])
    assert sum(c["share"] for c in data["categories"]) == pytest.approx(1.0, abs=1e-5)
    assert set(data["launch_delay_us"]) >= {"p50", "p95", "max"}
    assert 0.0 <= data["unattributed_share"] <= 1.0
    assert data["ops"] and data["steps"] and data["steps"][0]["name"] == "ProfilerStep#10"
    assert data["launch_delay_us"]["p50"] <= data["launch_delay_us"]["p95"] <= data["launch_delay_us"]["max"]


@pytest.mark.corpus
@pytest.mark.parametrize("fmt", ["table", "csv", "markdown"])
def test_other_formats(cli, fmt: str) -> None:
    result = cli("analyze", corpus_path(DLRM), "--format", fmt, "--width", "120")
    assert result.code == 0, result.err
    if fmt == "csv":
        header = result.out.splitlines()[0]
        assert header == (
            "device,busy_us,idle_us,utilization,host_wait_us,sync_wait_us,other_idle_us,comm_us,"
            "exposed_comm_us,multi_stream_us"
        )
    else:
        for needle in (
            "Busy and idle per device",
            "GPU time by kernel category",
            "Top kernels",
            "Memory copies",
            "Synchronisations",
            "launch delay",
        ):
            assert needle in result.out


@pytest.mark.corpus
def test_cpu_only_trace(cli) -> None:
    data = analyze_json(cli, corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"))
    assert data["devices"] == [] and data["categories"] == [] and data["window_us"] > 0
    assert data["launch_delay_us"] == {"p50": None, "p95": None, "max": None, "mean": None}
    table = cli("analyze", corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"))
    assert table.code == 0 and "No GPU kernels" in table.out


@pytest.mark.corpus
def test_gpu_only_trace(cli) -> None:
    data = analyze_json(cli, corpus_path("tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"))
    (device,) = data["devices"]
    assert device["busy_us"] > 0 and data["ops"] == [] and data["unattributed_share"] == 1.0
    assert data["launch_delay"]["kernels"] == 562


@pytest.mark.corpus
def test_launches_without_kernels(cli) -> None:
    data = analyze_json(cli, corpus_path("zoology/trace.json"))
    assert data["devices"] == [] and data["linking"]["gpu_events"] == 0
    assert data["linking"]["launches_without_gpu"] > 0


@pytest.mark.corpus
def test_device_selection_and_top(cli) -> None:
    data = analyze_json(cli, corpus_path(DLRM), "--device", "0", "--top", "3")
    assert [d["device"] for d in data["devices"]] == [0] and len(data["kernels"]) == 3
    assert analyze_json(cli, corpus_path(DLRM), "--device", "5")["devices"] == []


def test_negative_and_zero_durations(cli, tmp_path) -> None:
    """Hand-made: a negative duration is left empty at ingest and counted in a warning (an error with
    --strict), so the kernel has no GPU time; a zero-length one counts as a call with no time."""
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "ok",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 10,
            "args": {"device": 0},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "zero",
            "pid": 0,
            "tid": 7,
            "ts": 30,
            "dur": 0,
            "args": {"device": 0},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "bad",
            "pid": 0,
            "tid": 7,
            "ts": 40,
            "dur": -5,
            "args": {"device": 0},
        },
    ]
    path = tmp_path / "durations.json"
    path.write_text(json.dumps({"traceEvents": evs}))
    data = analyze_json(cli, path, "--no-cache")
    assert data["devices"][0]["busy_us"] == 10.0 and data["devices"][0]["events"] == 2
    assert data["linking"]["negative_gpu_durations"] == 0
    assert {k["name"]: k["calls"] for k in data["kernels"]} == {"ok": 1, "zero": 1}
    assert "1 negative durations were left empty" in cli("analyze", path, "--no-cache").err
    assert cli("analyze", path, "--no-cache", "--strict").code == 2


def test_bad_input_is_one_line(cli, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    result = cli("analyze", bad)
    assert result.code == 2 and result.err.count("\n") == 1 and "error" in result.err
    assert cli("analyze", tmp_path / "missing.json").code == 2
    assert cli("analyze", bad, "--top", "-1").code == 2


@pytest.mark.corpus
def test_api_matches_cli(cli) -> None:
    import opscope
    from opscope.analysis.memory.peaks import peak_memory
    from opscope.report.analyze_view import analyze_document
    from opscope.report.memory_brief import with_peaks

    path = corpus_path(DLRM)
    trace = opscope.load(path)
    cli_data = {k: v for k, v in analyze_json(cli, path).items() if k not in VALIDITY_KEYS}  # the CLI's own
    assert with_peaks(analyze_document(opscope.analyze(trace)), peak_memory(trace)).data == cli_data


@pytest.mark.corpus
def test_steps_option(cli) -> None:
    path = corpus_path("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    whole = analyze_json(cli, path)
    data = analyze_json(cli, path, "--steps", "102-103")
    assert data["window"]["source"] == "steps" and data["steps_spec"] == "102-103"
    assert [s["name"] for s in data["steps"]] == ["ProfilerStep#102", "ProfilerStep#103"]
    walls = sum(s["wall_us"] for s in data["steps"])
    assert data["window_us"] == pytest.approx(walls, abs=0.01)
    assert (
        data["window_us"] < whole["window_us"]
        and data["devices"][0]["busy_us"] < whole["devices"][0]["busy_us"]
    )
    assert cli("analyze", path, "--steps", "99").code == 2


def test_device_gaps_are_shared_and_a_copy_starts_afresh() -> None:
    """`idle.device_gaps` is computed once per activity and device (the idle breakdown and the report's idle
    pieces read the same result), and a `dataclasses.replace` copy with other events does not see the
    original's memo."""
    import dataclasses

    import opscope
    from opscope.analysis.timeline.activity import gpu_activity
    from opscope.analysis.timeline.idle import device_gaps

    act = gpu_activity(
        opscope.load(corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"))
    )
    device = act.events["device"].drop_nulls()[0]
    first = device_gaps(act, device)
    assert device_gaps(act, device) is first
    fewer = dataclasses.replace(act, events=act.events.head(10))
    assert fewer.memo == {} and device_gaps(fewer, device)[0].height <= first[0].height


def test_the_clipped_events_are_cut_once_per_activity() -> None:
    """`Activity.clipped` (the overview, the timeline, the idle breakdown and the rules each ask): one cut per
    activity, equal to cutting afresh; a copy with other events cuts its own."""
    import dataclasses

    import opscope
    from opscope.analysis.base import window
    from opscope.analysis.timeline.activity import gpu_activity

    act = gpu_activity(
        opscope.load(corpus_path("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"))
    )
    first = act.clipped()
    assert act.clipped() is first and first.equals(window.restrict(act.events, act.window))
    fewer = dataclasses.replace(act, events=act.events.head(10))
    assert fewer.clipped().height <= 10 < first.height
