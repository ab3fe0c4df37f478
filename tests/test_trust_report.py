"""Issue 18, the HTML report people can read: the mismatch warning opens the page, value axes start at zero
and use one unit, launch-delay bins keep one unit and say what the delay means, the diff shows CPU self
time; and `opscope report` writes a file, not 1.7 MB of HTML to the terminal. Browser tests run headless
Chromium (tests/browser.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path

A100_PCIE = "particle_transformer/run1_chrome_traces__single_epoch_forward_pass_batch_size_2.json"
V100 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"
V100_QUEUED = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SMALL = "hta/trace_compare_base_base.json.gz"

AXIS = """(id, which) => { const c = echarts.getInstanceByDom(document.getElementById(id));
  const axis = c.getModel().getComponent(which, 0);
  const fmt = c.getOption()[which][0].axisLabel.formatter;
  const ticks = axis.axis.scale.getTicks().map((t) => t.value);
  return { extent: axis.axis.scale.getExtent(), name: axis.get("name"),
           labels: axis.axis.type === "category" ? axis.axis.scale.getOrdinalMeta().categories
                                                 : ticks.map((v) => fmt(v)) }; }"""


def axis(page, chart_id: str, which: str = "xAxis") -> dict:
    return page.evaluate(f"(a) => ({AXIS})(a[0], a[1])", [chart_id, which])


@pytest.mark.browser
def test_diff_page_opens_with_the_mismatch_and_its_axes_start_at_zero(cli, tmp_path, open_report) -> None:  # noqa: F811
    out = tmp_path / "diff.html"
    assert cli("diff", corpus_path(A100_PCIE), corpus_path(V100), "--html", out, "--no-cache").code == 0
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    alert = page.locator("#alerts .alert")
    assert alert.count() == 1 and "different devices" in alert.inner_text()
    assert "A100-PCIE-40GB" in alert.inner_text() and "V100-SXM2-32GB" in alert.inner_text()
    # above every panel: the first thing after the header
    assert alert.bounding_box()["y"] < page.locator("#headline").bounding_box()["y"]
    wf = axis(page, "waterfall-chart")
    assert wf["extent"][0] == 0 and wf["name"] == "ms"
    assert all("µs" not in label and "ms" not in label for label in wf["labels"])  # the unit is the axis name
    assert wf["labels"][0] == "0"
    cats = axis(page, "categories-chart")
    assert cats["extent"][0] == 0 and cats["labels"][0] == "0"
    assert page.locator("#cpu-op-diff tbody tr").count() > 0
    opened.screenshot("diff-mismatch-top.png")


@pytest.mark.browser
def test_launch_delay_view_explains_a_deep_queue(cli, tmp_path, open_report) -> None:  # noqa: F811
    out = tmp_path / "report.html"
    trace = corpus_path(V100_QUEUED)
    assert cli("report", trace, "-o", out, "--no-cache").code == 0
    data = json.loads(cli("report", trace, "--format", "json", "--no-cache").out)
    p50_ms = data["launch_delay"]["p50_us"] / 1000
    assert p50_ms > 50  # this V100 trace queues kernels ~70 ms deep
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    text = page.locator("#launch-delay-explain").inner_text()
    assert "deep queue" in text and "GPU-bound" in text and f"{p50_ms:.3f} ms" in text
    ld = axis(page, "launch-delay-chart")
    assert ld["name"] == "µs" and all("µs" not in label for label in ld["labels"])
    assert any("," in label for label in ld["labels"])  # thousands separators: 10,000–20,000
    # nothing clipped: every bin label is drawn inside the chart (containLabel), none hidden by interval
    shown = page.evaluate("""() => { const c = echarts.getInstanceByDom(document.getElementById('launch-delay-chart'));
        return c.getOption().xAxis[0].axisLabel.interval; }""")
    assert shown == 0
    steps = axis(page, "steps-chart", "yAxis")
    assert steps["labels"][0] == "0" and steps["name"] in ("µs", "ms", "s")
    assert not any(unit in label for label in steps["labels"] for unit in ("µs", "ms", " s"))
    opened.screenshot("launch-delay.png", "#launch-delay")


def test_report_without_o_writes_a_file_beside_the_trace(cli, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = folder / "run.pt.trace.json.gz"
    shutil.copyfile(corpus_path(SMALL), trace)  # a copy in a writable temporary folder
    monkeypatch.chdir(tmp_path)
    result = cli("report", trace, "--no-cache")
    page = folder / "run.pt.trace.opscope.html"
    assert result.code == 0 and f"opscope: wrote {page}" in result.err and result.out == ""
    assert page.read_text().startswith("<!DOCTYPE html>")
    stdout = cli("report", trace, "-o", "-", "--no-cache")
    assert stdout.code == 0 and stdout.out.startswith("<!DOCTYPE html>") and not Path("-").exists()
    assert cli("report", trace, "-o", trace, "--no-cache").code == 2  # never over an input


def test_report_of_a_read_only_folder_goes_to_the_current_folder(cli, tmp_path, monkeypatch) -> None:
    # a read-only copy of its own (issue 30): the corpus is read-only only in CI, and on a writable checkout
    # this test wrote a report into the shared corpus
    import shutil

    folder = tmp_path / "read-only"
    folder.mkdir()
    trace = folder / corpus_path(SMALL).name
    shutil.copyfile(corpus_path(SMALL), trace)
    folder.chmod(0o555)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    try:
        result = cli("report", trace, "--no-cache")
    finally:
        folder.chmod(0o755)
    assert (
        result.code == 0 and f"opscope: wrote {here / 'trace_compare_base_base.opscope.html'}" in result.err
    )
    assert not (folder / "trace_compare_base_base.opscope.html").exists()


CPU_ONLY = "hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"
GPU_SECTIONS = ("timeline", "kernels", "categories", "flame", "launch-delay", "memcpy")


@pytest.mark.browser
def test_cpu_only_trace_shows_cpu_operators_not_empty_gpu_panels(cli, tmp_path, open_report) -> None:  # noqa: F811
    trace = corpus_path(CPU_ONLY)
    out = tmp_path / "cpu.html"
    assert cli("report", trace, "-o", out, "--no-cache").code == 0
    ops = json.loads(cli("ops", trace, "--top", "0", "--format", "json", "--no-cache").out)
    # every row of `ops` (operators and annotations) by CPU self time, as the panel ranks them (issue 28)
    want = sorted(((r["name"], r["cpu_self_us"]) for r in ops["rows"]), key=lambda nr: (-nr[1], nr[0]))[:30]
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    for section in GPU_SECTIONS:
        assert not page.locator(f"#{section}").is_visible()
    assert not page.locator('[data-card="gpu-time"]').is_visible()
    names = page.locator("#cpu-op-rows tbody tr td:first-child").all_inner_texts()
    assert names == [n for n, _ in want]
    assert "the operators that took the time" in page.locator("#cpu-note").inner_text()
    assert "No GPU activity" in page.locator("#brief").inner_text()  # said once, in the brief
    opened.screenshot("cpu-only-report.png")


@pytest.mark.browser
def test_demo_report_on_cpu_shows_the_terminal_diagnosis(cli, tmp_path, open_report) -> None:  # noqa: F811
    pytest.importorskip("torch", reason="torch is an optional extra (pip install opscope[torch])")
    result = cli(
        "demo", "--log-dir", tmp_path, "--denoise-steps", "2", "--profile-steps", "1", "--format", "json"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    if data["device"] != "cpu":
        pytest.skip("this machine ran the demo on a GPU")
    opened = open_report(Path(data["report"]))
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    shown = page.locator("#diagnosis .diagnosis").all_inner_texts()
    assert shown == [f"diagnosis: {line}" for line in data["diagnosis"]] and shown
    rows = page.locator("#cpu-op-rows tbody tr td:first-child").all_inner_texts()
    assert rows[:5] == [r["name"] for r in data["capture"]["cpu_ops"]["rows"][:5]]
    assert not page.locator("#timeline").is_visible() and not page.locator("#kernels").is_visible()


SIMPLE_ADD = "hta/critical_path_simple_add_benchmark_result_493459_1694039959_trace.json.gz"


@pytest.mark.browser
def test_timeline_has_cpu_lanes_idle_causes_and_flows(cli, tmp_path, open_report) -> None:  # noqa: F811
    import reference as ref

    trace = corpus_path(SIMPLE_ADD)
    out = tmp_path / "timeline.html"
    assert cli("report", trace, "-o", out, "--no-cache").code == 0
    data = json.loads(cli("report", trace, "--format", "json", "--no-cache").out)
    cpu = data["timeline"]["cpu"]
    analysis = json.loads(cli("analyze", trace, "--format", "json", "--no-cache").out)
    idle = analysis["devices"][0]["idle_breakdown"]
    # idle pieces by cause add up to analyze's idle breakdown (host wait, sync wait, other), in ns
    by_cause = [sum(d for d, c in zip(cpu["idle"]["dur"], cpu["idle"]["cause"]) if c == k) for k in range(3)]
    assert [round(v / 1000, 3) for v in by_cause] == [
        idle["host_wait_us"],
        idle["sync_wait_us"],
        idle["other_us"],
    ]
    # the CPU lane holds the launching thread's operators, launch calls and syncs: recount them from raw events
    events = ref.load(trace)
    raw = ref.link(events)
    launches = {raw.launch[g] for g in raw.gpu if raw.launch[g] is not None}
    threads = {(str(events[i]["pid"]), str(events[i]["tid"])) for i in launches}
    assert [(lane["pid"], lane["tid"]) for lane in cpu["lanes"]] == sorted(threads)
    assert cpu["kind"].count(1) == sum(1 for g in raw.gpu if raw.launch[g] is not None)
    ops = [
        e
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation")
        and ref.is_x(e)
        and (str(e["pid"]), str(e["tid"])) in threads
    ]
    assert cpu["kind"].count(0) == len(ops)
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == []
    view = page.evaluate(
        "() => ({ lanes: window.opscopeTimeline.cpu.lanes, idle: window.opscopeTimeline.cpu.idleLanes,"
        " count: window.opscopeTimeline.cpu.count })"
    )
    assert view == {"lanes": len(threads), "idle": 1, "count": len(cpu["kind"])}
    # hovering a launch call describes its kernel and draws the flow to it
    launch = cpu["kind"].index(1)
    page.evaluate(f"""() => {{ const v = window.opscopeTimeline, k = v.cpu.kernelOf({launch});
        const [a, b] = v.cpu.span({launch}), [c, d] = v.span(k); v.zoomTo(Math.min(a, c) - 2000, Math.max(b, d) + 2000); }}""")
    kernel = page.evaluate(f"window.opscopeTimeline.cpu.kernelOf({launch})")
    assert kernel >= 0
    pixel = page.evaluate(f"window.opscopeTimeline.cpu.pixelOf({launch})")
    page.locator("#timeline-canvas").scroll_into_view_if_needed()
    box = page.locator("#timeline-canvas").bounding_box()
    page.mouse.move(box["x"] + pixel["x"] + 1, box["y"] + pixel["y"])
    tip = page.locator("#tooltip").inner_text()
    name = data["strings"][data["timeline"]["name"][kernel]]
    assert "launch call" in tip and f"launched: {name}" in tip
    assert page.evaluate("window.opscopeTimeline.flow.kernel") == kernel
    # and hovering the kernel finds its launch back
    assert page.evaluate(f"window.opscopeTimeline.cpu.launchOf({kernel})") == launch
    opened.screenshot("timeline-cpu-lanes.png", "#timeline")
