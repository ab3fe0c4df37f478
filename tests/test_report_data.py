"""The HTML report's data (`opscope.report/1`) against independent recomputations from the raw JSON, the JSON
escaping of the embedded data, and the `report` command's other formats."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict

import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.attribution.tree import TreeOptions, op_tree
from opscope.analysis.bundle import FLAME_MIN_SHARE, trace_bundle
from opscope.errors import MissingDependency
from opscope.extras import install_command
from opscope.report.html.page import json_for_script, render_html
from opscope.report.html.trace_report import ReportOptions, trace_report
from rawfixtures import HOSTILE_KERNEL, HOSTILE_OP, hostile_trace
from reference import gpu_events, ns, window
from reference import load as raw_events
from reference import union_length as union

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
NCCL = "hta/nccl_parser_config_nccl_data.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"  # 24 Qwen2DecoderLayer instances


@pytest.fixture(scope="module")
def v100() -> tuple[dict, list[dict]]:
    path = corpus_path(V100)
    return trace_report(trace_bundle(opscope.load(path))), raw_events(path)


def test_headline_against_raw_json(v100) -> None:
    data, events = v100
    head = data["headline"]
    lo, hi = window(events)
    assert head["window_start_ns"] == lo
    assert head["window_us"] == pytest.approx((hi - lo) / 1e3, abs=1e-3)
    gpu = gpu_events(events)
    busy = union([(max(ns(e["ts"]), lo), min(ns(e["ts"]) + ns(e["dur"]), hi)) for e in gpu])
    assert head["busy_pct"] == pytest.approx(100 * busy / (hi - lo), abs=1e-3)
    assert head["devices"][0]["busy_us"] == pytest.approx(busy / 1e3, abs=1e-3)
    assert head["idle_pct"] == pytest.approx(100 - head["busy_pct"], abs=1e-3)
    assert head["gpu_time_us"] == pytest.approx(sum(ns(e["dur"]) for e in gpu) / 1e3, abs=1e-3)


def test_kernel_rows_and_flame_total_against_raw_json(v100) -> None:
    data, events = v100
    strings = data["strings"]
    totals: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    for e in gpu_events(events):
        totals[e["name"]] += ns(e["dur"])
        calls[e["name"]] += 1
    rows = data["kernels"]["rows"]
    assert len(rows) == len(totals)  # every row, not just the top
    for row in rows:
        name = strings[row["name"]]
        assert row["calls"] == calls[name]
        assert row["total_us"] == pytest.approx(totals[name] / 1e3, abs=1e-3)
    flame = data["flame"]
    assert flame["total_ns"] == sum(totals.values())
    assert flame["value"][0] == flame["total_ns"]
    children: dict[int, int] = defaultdict(int)
    for parent, value in zip(flame["parent"][1:], flame["value"][1:]):
        children[parent] += value
    for node, total in children.items():  # a frame's time is the sum of its children's (leaves are events)
        assert total == flame["value"][node]


def _sums_hold(flame: dict) -> None:
    children: dict[int, int] = defaultdict(int)
    for parent, value in zip(flame["parent"][1:], flame["value"][1:]):
        children[parent] += value
    for node, total in children.items():
        assert total == flame["value"][node]


def test_flame_carries_the_type_and_the_instance_view(v100) -> None:
    """`flame` merges module instances by type (as `opscope tree`), `flame_instances` keeps one node per
    instance (as `--modules instances`): the same GPU time, more nodes, and per module type the instances add up
    to the merged node. A trace where no module type repeats ships no second tree (V100: no nn.Module frames)."""
    trace = opscope.load(corpus_path(QWEN))
    data = trace_report(trace_bundle(trace))
    strings, types, instances = data["strings"], data["flame"], data["flame_instances"]
    assert set(types) == set(instances) == {"parent", "name", "value", "total_ns"}
    assert instances["value"][0] == types["value"][0] == instances["total_ns"] == types["total_ns"] > 0
    assert len(instances["parent"]) > len(types["parent"])
    _sums_hold(types)
    _sums_hold(instances)
    merged = {strings[n]: v for n, v in zip(types["name"], types["value"], strict=True)}
    layer = "nn.Module: Qwen2DecoderLayer"
    assert layer in merged and not any(strings[n].startswith(layer + "_") for n in types["name"])
    per_instance = [
        v
        for n, v in zip(instances["name"], instances["value"], strict=True)
        if re.fullmatch(re.escape(layer) + r"_\d+", strings[n])
    ]
    assert len(per_instance) == 24 and sum(per_instance) == merged[layer]
    tree = op_tree(trace, TreeOptions(depth=0, min_share=FLAME_MIN_SHARE, modules="instances"))
    assert len(instances["parent"]) == tree.nodes + 1  # bounded as `flame`: siblings under 1/5000 folded
    assert v100[0]["flame_instances"] is None


def test_timeline_arrays(v100) -> None:
    data, events = v100
    tl = data["timeline"]
    gpu = gpu_events(events)
    assert tl["events"] == tl["shipped"] == len(gpu) == len(tl["lane"]) == len(tl["dur"])
    starts, acc = [], 0
    for delta in tl["start"]:
        acc += delta
        starts.append(acc)
    lo, _ = window(events)
    assert tl["t0_ns"] == lo
    assert sorted(zip(starts, tl["dur"])) == sorted((ns(e["ts"]) - lo, ns(e["dur"])) for e in gpu)


def test_steps_and_launch_delay_against_raw_json(v100) -> None:
    data, events = v100
    steps = sorted(
        (
            e
            for e in events
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
        ),
        key=lambda e: e["ts"],
    )
    assert [s["name"] for s in data["steps"]] == [e["name"] for e in steps]
    gpu = gpu_events(events)
    spans = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in gpu]
    for shown, raw in zip(data["steps"], steps):
        lo, hi = ns(raw["ts"]), ns(raw["ts"]) + ns(raw["dur"])
        busy = union([(max(s, lo), min(e, hi)) for s, e in spans if s < hi and e > lo])
        assert shown["busy_us"] == pytest.approx(busy / 1e3, abs=1e-3)
        assert shown["wall_us"] == pytest.approx(ns(raw["dur"]) / 1e3, abs=1e-3)
    launches = {
        e["args"]["correlation"]: e["ts"]
        for e in sorted(events, key=lambda e: e.get("ts", 0))[::-1]
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    delays = sorted(
        max(ns(e["ts"]) - ns(launches[e["args"]["correlation"]]), 0)
        for e in gpu
        if e["cat"] == "kernel" and e["args"].get("correlation") in launches
    )
    delay = data["launch_delay"]
    assert delay["kernels"] == len(delays) == sum(delay["counts"])
    assert delay["max_us"] == pytest.approx(delays[-1] / 1e3, abs=1e-3)
    median = (delays[(len(delays) - 1) // 2] + delays[len(delays) // 2]) / 2
    assert delay["p50_us"] == pytest.approx(median / 1e3, abs=1e-3)


def test_step_cpu_busy_against_raw_json(v100) -> None:
    """Each step's CPU busy time (computed on the thread beside the advice): the union of the step's `cpu_op`
    operators (the step markers left out), cut to the step, from the raw events."""
    data, events = v100
    ops = [
        (ns(e["ts"]), ns(e["ts"]) + max(ns(e["dur"]), 0))
        for e in events
        if e.get("cat") == "cpu_op"
        and e.get("ph") == "X"
        and not e.get("name", "").startswith("ProfilerStep#")
    ]
    marks = sorted(
        (
            e
            for e in events
            if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#")
        ),
        key=lambda e: e["ts"],
    )
    assert len(data["steps"]) == len(marks) > 1
    for shown, raw in zip(data["steps"], marks, strict=True):
        lo, hi = ns(raw["ts"]), ns(raw["ts"]) + ns(raw["dur"])
        busy = union([(max(s, lo), min(e, hi)) for s, e in ops if s < hi and e > lo])
        assert shown["cpu_busy_us"] == pytest.approx(busy / 1e3, abs=1e-3)


def test_step_cpu_busy_of_the_step_table_when_the_windows_differ(monkeypatch) -> None:
    """The thread beside the advice measures the steps `select_windows` gives; should they ever differ from the
    step table's, the table's are measured again (hand-made disagreement: no steps beside)."""
    import opscope.analysis.bundle as bundle

    trace = opscope.load(corpus_path(V100))
    expected = trace_bundle(trace).step_cpu_busy
    monkeypatch.setattr(bundle, "select_windows", lambda trace, steps: ())
    again = trace_bundle(opscope.load(corpus_path(V100)))
    assert again.step_cpu_busy == expected and len(expected) == len(again.steps.rows) > 1


def test_device_selection_and_max_events() -> None:
    trace = opscope.load(corpus_path(NCCL))
    data = trace_report(trace_bundle(trace), ReportOptions(max_events=500))
    tl = data["timeline"]
    assert tl["shipped"] == 500 < tl["events"]
    assert len(tl["bins"]["fill"]) == len(tl["lanes"])
    shipped = sorted(tl["dur"], reverse=True)
    assert shipped[-1] >= 0 and len(shipped) == 500


def test_json_for_script_escapes_markup() -> None:
    text = json_for_script({"name": "</script><script>alert(1)</script>", "amp": "a&b", "ls": "\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"name": "</script><script>alert(1)</script>", "amp": "a&b", "ls": "\u2028"}


def test_json_for_script_writes_non_finite_numbers_as_null() -> None:
    """A NaN or infinity in the data (none in the corpus; a hand-made value) becomes `null`, as in the JSON
    formats (both encode with msgspec): the page's data stays strict JSON that `JSON.parse` accepts, where
    `json.dumps(allow_nan=False)` raised. docs/reports.md states it."""
    data = {"nan": float("nan"), "inf": float("inf"), "neg": -float("inf"), "ok": 1.5}
    text = json_for_script(data)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "nan": None,
        "inf": None,
        "neg": None,
        "ok": 1.5,
    }


def test_the_page_data_reads_back_as_the_report_data(v100) -> None:
    """The page's embedded JSON (msgspec-encoded, unsafe characters replaced) parses back to exactly the report
    data, floats and all (what `json.dumps` wrote before; only an exponent's spelling may differ: 1e16 for
    1e+16)."""
    data, _ = v100
    assert json.loads(json_for_script(data)) == json.loads(json.dumps(data))


def test_hostile_names_never_appear_as_markup(tmp_path) -> None:
    path = hostile_trace(tmp_path / "hostile.json")  # hand-made fixture
    page = render_html(
        trace_report(trace_bundle(opscope.load(path, cache=False))), title=f"report <{path.name}>"
    )
    assert HOSTILE_KERNEL not in page and HOSTILE_OP not in page and "<svg onload" not in page
    assert "report &lt;hostile.json&gt;" in page
    assert page.count("</script>") == page.count("<script")  # every script element closes where it should


def test_missing_jinja2_is_one_line_hint(tmp_path, cli, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "jinja2", None)
    with pytest.raises(MissingDependency, match=re.escape(install_command("html"))):
        render_html({"kind": "trace"}, "t")
    path = hostile_trace(tmp_path / "t.json")
    result = cli("report", path, "-o", tmp_path / "r.html", "--no-cache")
    assert result.code == 2 and result.err.count("\n") == 1 and install_command("html") in result.err


def test_report_formats(cli, tmp_path) -> None:
    path = hostile_trace(tmp_path / "t.json")
    md = cli("report", path, "--format", "markdown", "--no-cache")
    banners, _, body = md.out.partition("### opscope report")
    assert md.code == 0 and body and "| Name |" in md.out
    assert all(line.startswith("> **") for line in banners.splitlines() if line)  # validity banners only
    js = cli("report", path, "--format", "json", "--no-cache")
    data = json.loads(js.out)
    assert data["schema"] == "opscope.report/1" and data["kind"] == "trace"
    assert HOSTILE_KERNEL in data["strings"]
    csv_out = cli("report", path, "--format", "csv", "--no-cache")
    assert csv_out.code == 0 and csv_out.out.splitlines()[0] == "name,category,calls,total_us,avg_us,share"
    bad = cli("report", path, "--max-events", "0", "--no-cache")
    assert bad.code == 2 and "--max-events" in bad.err


@pytest.mark.parametrize("name", [V100, NCCL])
def test_report_equals_analyze(cli, name) -> None:
    """The report's headline, categories, launch delay and memcpy rows are `opscope analyze`'s figures."""
    path = corpus_path(name)
    report = json.loads(cli("report", path, "--format", "json").out)
    analysis = json.loads(cli("analyze", path, "--format", "json", "--top", "0").out)
    head = report["headline"]
    assert head["window_us"] == analysis["window_us"]
    devices = analysis["devices"]
    assert [d["busy_us"] for d in head["devices"]] == [d["busy_us"] for d in devices]
    assert head["busy_pct"] == pytest.approx(
        100 * sum(d["utilization"] for d in devices) / len(devices), abs=1e-3
    )
    assert [(c["category"], c["total_us"], c["calls"]) for c in report["categories"]] == [
        (c["category"], c["total_us"], c["calls"]) for c in analysis["categories"]
    ]
    assert head["top_category"] == analysis["categories"][0]["category"]
    delay = report["launch_delay"]
    assert delay["kernels"] == analysis["launch_delay"]["kernels"] == sum(delay["counts"])
    assert (delay["p50_us"], delay["p95_us"], delay["max_us"]) == tuple(
        analysis["launch_delay_us"][k] for k in ("p50", "p95", "max")
    )
    assert report["memcpy"] == analysis["memcpy"]["rows"]


@pytest.mark.corpus
def test_the_payload_is_the_same_on_every_run(cli) -> None:
    """The string table follows first-seen order everywhere: the Python stacks' distinct frame names came out of
    a hash set in a different order on each run, so the same trace gave a different JSON (same values)."""
    path = corpus_path("tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")  # with_stack frames
    runs = {cli("report", path, "--format", "json").out for _ in range(3)}
    assert len(runs) == 1
