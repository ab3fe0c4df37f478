"""Memory everywhere else: `analyze` (peak per device), `diff` (before / after, `--fail-memory`), `ranks` (per
rank), and the HTML report's memory panel in a real browser (numbers equal `opscope memory`; hostile op names
stay text)."""

from __future__ import annotations

import json

import pytest

import memory_reference as mref
import opscope
import reference as ref
from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from opscope.analysis.bundle import MEMORY_TOP
from opscope.analysis.memory.peaks import pair_devices
from opscope.analysis.memory.summary import MemoryOptions, memory_stats
from opscope.report.html.memory_panel import MAX_POINTS, memory_panel
from rawfixtures import HOSTILE_OP

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT_MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"


def test_analyze_shows_peak_memory(cli) -> None:
    path = corpus_path(BERT)
    want = mref.summary(ref.load(path))
    doc = json.loads(cli("analyze", path, "--format", "json").out)
    peaks = {d["device"]: d for d in doc["memory"]["devices"]}
    assert peaks["cuda:0"]["peak_allocated_bytes"] == want["cuda:0"]["peak_allocated_bytes"]
    assert peaks["cuda:0"]["peak_reserved_bytes"] == want["cuda:0"]["peak_reserved_bytes"]
    assert "peak memory: cuda:0 96.6 MiB allocated / 116.0 MiB reserved" in cli("analyze", path).out


def test_diff_shows_peaks_and_gates_on_memory(cli) -> None:
    base, new = corpus_path(BERT), corpus_path(QWEN)
    b, n = mref.summary(ref.load(base))["cuda:0"], mref.summary(ref.load(new))["cuda:0"]
    r = cli("diff", base, new, "--format", "json")
    assert r.code == 0
    (cuda,) = [d for d in json.loads(r.out)["memory"]["devices"] if d["device"] == "cuda:0"]
    assert cuda["base"]["peak_allocated_bytes"] == b["peak_allocated_bytes"]
    assert cuda["new"]["peak_reserved_bytes"] == n["peak_reserved_bytes"]
    growth = (n["peak_allocated_bytes"] - b["peak_allocated_bytes"]) / b["peak_allocated_bytes"]
    assert cuda["peak_allocated_change"] == pytest.approx(growth)
    tripped = cli("diff", base, new, "--fail-memory", "5%")
    assert tripped.code == 1 and "cuda:0 peak allocated memory grew by" in tripped.err
    assert cli("diff", base, new, "--fail-memory", f"{growth * 100 + 1:.0f}").code == 0
    assert cli("diff", new, base, "--fail-memory", "0").code == 0  # it shrank
    assert "Peak memory per device (BASE -> NEW)" in cli("diff", base, new).out
    assert cli("diff", base, new, "--fail-memory", "lots").code == 2


def test_diff_pairs_cuda_with_hip_and_gates_across_vendors(cli) -> None:
    # the same BERT model on an H100 (cuda:0) and an MI300X (hip:0): one row, both names kept, the gate fires
    base, new = corpus_path(BERT), corpus_path(BERT_MI300)
    b, n = mref.summary(ref.load(base))["cuda:0"], mref.summary(ref.load(new))["hip:0"]
    growth = (n["peak_allocated_bytes"] - b["peak_allocated_bytes"]) / b["peak_allocated_bytes"]
    assert growth > 0.4  # the MI300X run peaks ~45% higher
    r = cli("diff", base, new, "--format", "json", "--fail-memory", "5")
    assert r.code == 1 and "cuda:0 -> hip:0 peak allocated memory grew by 44.5% (limit 5%)" in r.err
    gpu = [d for d in json.loads(r.out)["memory"]["devices"] if d["device"] != "cpu"]
    assert len(gpu) == 1
    (row,) = gpu
    assert row["device"] == "cuda:0 -> hip:0"
    assert row["base"]["device"] == "cuda:0" and row["new"]["device"] == "hip:0"
    assert row["base"]["peak_allocated_bytes"] == b["peak_allocated_bytes"]
    assert row["new"]["peak_reserved_bytes"] == n["peak_reserved_bytes"]
    assert row["peak_allocated_change"] == pytest.approx(growth)
    back = cli("diff", new, base, "--fail-memory", "5")  # the GPU shrank the other way round
    assert "hip:0 -> cuda:0" in back.out and "hip:0 -> cuda:0 peak" not in back.err


def test_pair_devices_by_index_only_when_unambiguous() -> None:
    # HAND-MADE device lists
    assert pair_devices(["cuda:0", "cuda:1", "cpu"], ["hip:1", "hip:0", "cpu"]) == [
        ("cuda:0", "hip:0"),
        ("cuda:1", "hip:1"),
        ("cpu", "cpu"),
    ]
    assert pair_devices(["cuda:0", "hip:0"], ["hip:0", "xpu:0"]) == [("cuda:0", "xpu:0"), ("hip:0", "hip:0")]
    assert pair_devices(["cuda:0"], ["hip:0", "xpu:0"]) == [
        ("cuda:0", None),
        (None, "hip:0"),
        (None, "xpu:0"),
    ]
    assert pair_devices(["cuda:0", "mps"], ["hip:1", "cpu"]) == [
        ("cuda:0", None),
        (None, "hip:1"),
        ("mps", None),
        (None, "cpu"),
    ]


def test_ranks_show_peak_memory_per_rank(cli) -> None:
    paths = [corpus_path(BERT), corpus_path(QWEN)]
    doc = json.loads(cli("ranks", *paths, "--format", "json").out)
    by_path = {m["path"]: m for m in doc["memory"]}
    for p in paths:
        want = mref.summary(ref.load(p))["cuda:0"]["peak_allocated_bytes"]
        got = next(d for d in by_path[str(p)]["devices"] if d["device"] == "cuda:0")
        assert got["peak_allocated_bytes"] == want
    assert "Peak memory per rank" in cli("ranks", *paths).out


def _series_keeps_both_peaks(panel: dict) -> None:
    for d in panel["devices"]:
        s = panel["series"][d["device"]]
        assert len(s["t_us"]) <= MAX_POINTS and s["t_us"] == sorted(s["t_us"])
        assert max(s["allocated"]) == d["peak_allocated_bytes"], d["device"]
        if d["peak_reserved_bytes"] is not None:
            assert max(s["reserved"]) == d["peak_reserved_bytes"], d["device"]


def test_report_memory_chart_thinning_keeps_the_reserved_peak(tmp_path) -> None:
    # HAND-MADE: 3,000 events (thinned to <= 2,000 points): allocated alternates 100 / 0 bytes; reserved is
    # 1 KiB except right after one free, where it is 4 KiB: the allocated maximum of that bucket is elsewhere
    def mem(i: int) -> dict:
        alloc = i % 2 == 0
        return {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "args": {
                "Addr": 7,
                "Bytes": 100 if alloc else -100,
                "Total Allocated": 100 if alloc else 0,
                "Total Reserved": 4096 if i == 1501 else 1024,
                "Device Type": 1,
                "Device Id": 0,
            },
        }

    path = tmp_path / "many.json"
    path.write_text(json.dumps({"traceEvents": [mem(i) for i in range(3000)]}))
    panel = memory_panel(memory_stats(opscope.load(path, cache=False), MemoryOptions(top=MEMORY_TOP)))
    (d,) = panel["devices"]
    assert d["peak_reserved_bytes"] == 4096
    s = panel["series"]["cuda:0"]
    assert len(s["t_us"]) < 3000
    _series_keeps_both_peaks(panel)
    at = s["reserved"].index(4096)
    assert s["t_us"][at] == 1501.0 and s["allocated"][at] == 0  # the very event, both values as they were
    assert min(s["allocated"]) == 0 and min(s["reserved"]) == 1024  # the lows stay too


def test_report_memory_chart_payload_of_real_traces() -> None:
    # the Qwen traces have more than 2,000 GPU events: the chart's data is thinned, the peaks stay exact
    for relative in (QWEN, "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"):
        panel = memory_panel(
            memory_stats(opscope.load(corpus_path(relative), cache=False), MemoryOptions(top=MEMORY_TOP))
        )
        gpu = next(d for d in panel["devices"] if d["device"] != "cpu")
        assert gpu["alloc_count"] + gpu["free_count"] > MAX_POINTS
        _series_keeps_both_peaks(panel)


@pytest.mark.browser
def test_report_memory_panel(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = corpus_path(BERT)
    out = tmp_path / "report.html"
    assert cli("report", path, "-o", out).code == 0
    mem = json.loads(cli("memory", path, "--format", "json", "--top", "20").out)
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeMemoryReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    peak = mem["devices"][0]["peak_allocated_bytes"]
    # binary units, labelled, as the terminal's MiB columns (issue 28: the panel said decimal "MB")
    assert page.locator('[data-card="memory-cuda:0"] .value').inner_text() == f"{peak / 2**20:,.2f} MiB"
    assert page.locator("#memory-body canvas").count() >= 2  # one chart per device
    reserved = page.evaluate('Math.max(...OPS.D.memory.series["cuda:0"].reserved)')  # the chart's own data
    assert reserved == mem["devices"][0]["peak_reserved_bytes"]
    assert page.locator("#memory-ops tbody tr").count() == len(mem["top_ops"])
    first = page.locator("#memory-ops tbody tr").first.locator("td").first
    assert first.inner_text() == mem["top_ops"][0]["op"]


@pytest.mark.browser
def test_report_memory_panel_hostile_names(cli, tmp_path, open_report) -> None:  # noqa: F811
    # HAND-MADE: an op whose name is a script injection allocates and never frees
    events = [
        {"ph": "X", "cat": "cpu_op", "name": HOSTILE_OP, "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 12,
            "args": {
                "Addr": 7,
                "Bytes": 4096,
                "Total Allocated": 4096,
                "Total Reserved": 8192,
                "Device Type": 1,
                "Device Id": 0,
            },
        },
    ]
    trace = tmp_path / "hostile.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    out = tmp_path / "hostile.html"
    assert cli("report", trace, "-o", out).code == 0
    opened = open_report(out)
    wait_for(opened.page, "window.opscopeMemoryReady !== undefined")
    assert opened.dialogs == [] and opened.errors == []
    assert opened.page.locator("#memory-live tbody tr td").nth(2).inner_text() == HOSTILE_OP
