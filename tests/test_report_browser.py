"""The HTML trace report in a real browser (headless Debian Chromium via Playwright): it loads from file://
with no console errors, shows the same numbers as opscope's other outputs, survives hostile names, and
stays bounded in what it paints for 100k+ kernels. Screenshots land in test-artifacts/."""

from __future__ import annotations

import json
import re

import pytest

from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from rawfixtures import HOSTILE_KERNEL, HOSTILE_KERNEL_2, HOSTILE_OP, hostile_trace, many_kernels_trace

pytestmark = pytest.mark.browser

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"  # 24 Qwen2DecoderLayer instances


def fmt_ms(us: float) -> str:
    """The page's formatting of a duration of 1 ms to 1 s (common.js fmtUs)."""
    return f"{us / 1e3:.3f} ms"


def card_value(opened, key: str) -> str:
    return opened.page.locator(f'[data-card="{key}"] .value').inner_text()


def test_trace_report_views_and_numbers(cli, tmp_path, open_report) -> None:  # noqa: F811
    trace = corpus_path(V100)
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    summary = json.loads(cli("summary", trace, "--top", "3", "--format", "json").out)
    data = json.loads(cli("report", trace, "--format", "json").out)
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == []

    # Numbers on the page equal `opscope summary` and the report's own JSON.
    first = page.locator("#kernel-table tbody tr").first.locator("td")
    assert first.nth(0).get_attribute("title") == summary["rows"][0]["name"]
    assert first.nth(4).inner_text() == fmt_ms(summary["rows"][0]["total_us"])
    assert card_value(opened, "gpu-time") == fmt_ms(summary["totals"]["gpu_time_us"])
    analysis = json.loads(cli("analyze", trace, "--format", "json").out)
    assert card_value(opened, "busy") == f"{analysis['devices'][0]['utilization'] * 100:.1f}%"
    assert card_value(opened, "window") == fmt_ms(analysis["window_us"])
    assert card_value(opened, "top-category") == analysis["categories"][0]["category"]
    assert page.locator("#kernels-table .count").inner_text() == f"{len(data['kernels']['rows'])} rows"

    # Every chart drew, the timeline painted, hovering an event describes it.
    assert (
        page.locator(
            "#kernels-chart canvas, #categories-chart canvas, #steps-chart canvas, #launch-delay-chart canvas"
        ).count()
        >= 4
    )
    draw = page.evaluate("window.opscopeTimeline.lastDraw")
    assert draw["lanes"] == len(data["timeline"]["lanes"]) and draw["rects"] + draw["columns"] > 0
    # Wheel zooms around the cursor, dragging pans, double-click resets (the canvas scrolled into view first:
    # the brief and the findings above it can push it below the window).
    page.locator("#timeline-canvas").scroll_into_view_if_needed()
    box = page.locator("#timeline-canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + 34)
    page.mouse.wheel(0, -600)
    zoomed = page.evaluate("window.opscopeTimeline.lastDraw")
    assert zoomed["v1"] - zoomed["v0"] < 0.5 * (draw["v1"] - draw["v0"])
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + 34, steps=4)
    page.mouse.up()
    panned = page.evaluate("window.opscopeTimeline.lastDraw")
    assert panned["v0"] > zoomed["v0"] and panned["v1"] - panned["v0"] == pytest.approx(
        zoomed["v1"] - zoomed["v0"]
    )
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, box["y"] + 34)
    assert page.evaluate("window.opscopeTimeline.lastDraw.v1") == draw["v1"]
    page.evaluate("window.opscopeTimeline.show(0)")
    index = page.evaluate(
        "window.opscopeTimeline.hit(window.opscopeTimeline.pixelOf(0).x, window.opscopeTimeline.pixelOf(0).y)"
    )
    assert index == 0
    pixel = page.evaluate("window.opscopeTimeline.pixelOf(0)")
    page.mouse.move(box["x"] + pixel["x"], box["y"] + pixel["y"])
    tip = page.locator("#tooltip")
    assert tip.is_visible()
    name = data["strings"][data["timeline"]["name"][0]]
    assert tip.locator(".t-name").inner_text() == name and "launched by" in tip.inner_text()
    opened.screenshot("trace-timeline-hover.png", "#timeline")
    page.mouse.move(0, 0)
    assert page.evaluate("window.opscopeFlame.lastDraw.drawn") > 10
    # No module type repeats in this trace: the instance view would be the type view, its button is disabled.
    assert page.locator("#flame-instances").is_disabled()
    assert page.locator("#flame-types").get_attribute("aria-pressed") == "true"

    # The first step's bar tooltip shows the GPU busy time of `opscope steps` for that step.
    steps = json.loads(cli("steps", trace, "--format", "json").out)["steps"]
    chart = page.locator("#steps-chart")
    chart.scroll_into_view_if_needed()
    bar = chart.bounding_box()
    first_bar_x = bar["x"] + 80 + (bar["width"] - 100) / (2 * len(steps))  # grid left 80, right 20
    page.mouse.move(first_bar_x, bar["y"] + bar["height"] / 2)
    tooltip = chart.locator("div", has_text="GPU busy").last
    tooltip.wait_for(state="visible")
    assert f"GPU busy: {fmt_ms(steps[0]['devices'][0]['busy_us'])}" in tooltip.inner_text()
    assert steps[0]["name"] in tooltip.inner_text()
    opened.screenshot("trace-report.png")
    assert opened.problems() == []


def test_flame_toggles_between_module_types_and_instances(cli, tmp_path, open_report) -> None:  # noqa: F811
    trace = corpus_path(QWEN)
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    data = json.loads(cli("report", trace, "--format", "json").out)
    opened = open_report(out)
    page = opened.page
    types, instances = page.locator("#flame-types"), page.locator("#flame-instances")
    flame = page.evaluate("window.opscopeFlame")

    def shown() -> tuple[str, int, str | None, str | None, float]:
        draw = page.evaluate("window.opscopeFlame.lastDraw")
        height = page.locator("#flame-canvas").bounding_box()["height"]
        return (
            draw["view"],
            draw["nodes"],
            types.get_attribute("aria-pressed"),
            instances.get_attribute("aria-pressed"),
            height,
        )

    assert flame["view"] == "types" and page.evaluate("window.opscopeFlame.lastDraw.drawn") > 10
    by_type = shown()
    assert by_type[:4] == ("types", len(data["flame"]["parent"]), "true", "false")
    page.locator("#flame-canvas").click(position={"x": 5, "y": 27})  # zoom into a frame: the toggle resets it
    assert page.evaluate("window.opscopeFlame.lastDraw.focus") > 0
    instances.click()
    by_instance = shown()
    assert by_instance[:4] == ("instances", len(data["flame_instances"]["parent"]), "false", "true")
    assert by_instance[1] > by_type[1]
    assert page.evaluate("window.opscopeFlame.lastDraw.focus") == 0
    opened.screenshot("flame-instances.png", "#flame")
    types.click()
    assert shown() == by_type
    assert opened.problems() == [] and opened.dialogs == []


def test_kernel_table_sorts_and_filters(cli, tmp_path, open_report) -> None:  # noqa: F811
    trace = corpus_path(V100)
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    rows = json.loads(cli("summary", trace, "--top", "0", "--format", "json").out)["rows"]
    page = open_report(out).page
    page.locator('#kernel-table th[data-key="calls"]').click()
    assert (
        page.locator("#kernel-table tbody tr").first.locator("td").nth(3).inner_text()
        == f"{max(r['calls'] for r in rows):,}"
    )
    page.locator("#kernels-table input").fill("sgemm")
    expected = sum("sgemm" in r["name"].lower() for r in rows)
    assert page.locator("#kernels-table .count").inner_text() == f"{expected} of {len(rows)} rows"
    page.locator("#kernels-table input").fill("/^volta_sgemm_64x64_(nn|nt)$/")
    assert page.locator("#kernel-table tbody tr").count() == 2


def test_hostile_names_render_as_text(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = hostile_trace(tmp_path / "hostile <x>.json")  # hand-made fixture: names are HTML injections
    out = tmp_path / "hostile.html"
    assert cli("report", path, "-o", out, "--no-cache").code == 0
    opened = open_report(out)
    page = opened.page
    # The names are visible, as text.
    cells = page.locator("#kernel-table td.name").all_inner_texts()
    assert HOSTILE_KERNEL in cells and HOSTILE_KERNEL_2 in cells
    assert HOSTILE_KERNEL in page.locator("body").inner_text()
    assert page.locator("img").count() == 0 and page.locator("svg[onload]").count() == 0
    assert "hostile <x>.json" in page.locator("#report-subtitle").inner_text()
    # Hover everything that shows names in a tooltip: timeline events, chart bars, flame frames.
    page.locator("#timeline-canvas").scroll_into_view_if_needed()  # below the brief and the findings
    box = page.locator("#timeline-canvas").bounding_box()
    for i in range(page.evaluate("window.opscopeTimeline.count")):
        page.evaluate(f"window.opscopeTimeline.show({i})")
        pixel = page.evaluate(f"window.opscopeTimeline.pixelOf({i})")
        page.mouse.move(box["x"] + 2, box["y"] + 2)  # off the event first, so that the next move is a move
        page.mouse.move(box["x"] + pixel["x"], box["y"] + pixel["y"])
        page.locator("#tooltip").wait_for(state="visible")
        text = page.locator("#tooltip").inner_text()
        assert HOSTILE_KERNEL in text or HOSTILE_KERNEL_2 in text or "Memcpy" in text
        if "Memcpy" not in text:
            assert HOSTILE_OP in text  # the launching op, shown literally
    chart = page.locator("#kernels-chart").bounding_box()
    for step in range(1, 20):
        page.mouse.move(chart["x"] + chart["width"] * 0.4, chart["y"] + chart["height"] * step / 20)
    flame = page.locator("#flame-canvas").bounding_box()
    for step in range(1, 20):
        page.mouse.move(flame["x"] + flame["width"] * step / 20, flame["y"] + 27)
        page.mouse.move(flame["x"] + flame["width"] * step / 20, flame["y"] + 45)
    page.wait_for_timeout(200)
    opened.screenshot("hostile-names.png")
    assert opened.dialogs == [], f"injected script ran: {opened.dialogs}"
    assert opened.problems() == []


def test_100k_kernels_paint_per_pixel_column(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = many_kernels_trace(tmp_path / "many.json.gz", 120_000)  # hand-made: the corpus has < 10k kernels
    out = tmp_path / "many.html"
    assert cli("report", path, "-o", out, "--no-cache", "--max-events", "60000").code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == []
    note = page.locator("#timeline-note").inner_text()
    assert re.search(r"120,000 GPU events in 4 lanes.*60,000 longest", note)
    draw = page.evaluate("window.opscopeTimeline.lastDraw")
    # Painted shapes are bounded by the screen (lanes x pixel columns), not by the 60,000 events visited.
    assert draw["visited"] == 60_000
    assert draw["rects"] + draw["columns"] <= 2 * draw["lanes"] * (draw["width"] + 2)
    zoomed = page.evaluate("window.opscopeTimeline.zoomTo(1e6, 1.2e6)")  # 200 us: events drawn one by one
    assert zoomed["rects"] > 0 and zoomed["visited"] < 1000
    opened.screenshot("many-kernels-timeline.png", "#timeline")
    page.locator("#kernels-table input").fill("kernel_4")
    assert page.locator("#kernels-table .count").inner_text() == "11 of 50 rows"


@pytest.mark.parametrize(
    "name",
    [
        "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",  # no GPU at all
        "zoology/trace.json",  # launches but no kernel events
        "hta/triton_example_triton_example.json.gz",  # one kernel
        "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite",  # Nsight Systems, not Kineto
        "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",  # AMD
    ],
)
def test_edge_traces_render_without_errors(cli, tmp_path, open_report, name) -> None:  # noqa: F811
    out = tmp_path / "edge.html"
    assert cli("report", corpus_path(name), "-o", out).code == 0
    opened = open_report(out)
    wait_for(opened.page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    data = json.loads(cli("report", corpus_path(name), "--format", "json").out)
    if not data["kernels"]["rows"]:
        assert "No GPU kernels" in opened.page.locator("#kernels").inner_text()
    opened.screenshot(f"edge-{name.split('/')[0]}.png")


QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
QWEN_MI300 = "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def test_diff_report(cli, tmp_path, open_report) -> None:  # noqa: F811
    base, new = corpus_path(QWEN_H100), corpus_path(QWEN_MI300)
    out = tmp_path / "diff.html"
    assert cli("diff", base, new, "--html", out).code == 0
    data = json.loads(cli("diff", base, new, "--top", "0", "--format", "json").out)
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    figures = {f["key"]: f for f in data["headline"]}
    assert card_value(opened, "gpu_time") == fmt_ms(figures["gpu_time"]["after"])
    # The waterfall runs from BASE's GPU time to NEW's: the kernel rows add up to the headline figure.
    rows = data["kernels"]["rows"]
    before, after = (sum(r[k] or 0 for r in rows) for k in ("total_before_us", "total_after_us"))
    assert before == pytest.approx(figures["gpu_time"]["before"], abs=0.01)
    assert after == pytest.approx(figures["gpu_time"]["after"], abs=0.01)
    note = page.locator("#waterfall-note").inner_text()
    assert f"{fmt_ms(before)} → {fmt_ms(after)}" in note
    first = page.locator("#kernel-diff tbody tr").first.locator("td")
    assert first.nth(0).get_attribute("title") == rows[0]["name"]
    assert page.locator("#kernels-table .count").inner_text() == f"{len(rows)} rows"
    assert page.locator("#headline-rows tbody tr").count() == len(data["headline"])
    opened.screenshot("diff-report.png")


def test_diff_report_of_hostile_names(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = hostile_trace(tmp_path / "hostile.json")  # hand-made fixture
    out = tmp_path / "diff.html"
    assert cli("diff", path, path, "--html", out, "--no-cache").code == 0
    opened = open_report(out)
    chart = opened.page.locator("#waterfall-chart").bounding_box()
    for step in range(1, 12):
        opened.page.mouse.move(chart["x"] + chart["width"] * 0.5, chart["y"] + chart["height"] * step / 12)
    assert HOSTILE_KERNEL in opened.page.locator("#kernel-diff").inner_text()
    assert opened.dialogs == [] and opened.problems() == []
    assert opened.page.locator("img").count() == 0


def test_ranks_report(cli, tmp_path, open_report) -> None:  # noqa: F811
    folder = corpus_path("param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json").parent
    out = tmp_path / "ranks.html"
    assert cli("ranks", folder, "--html", out).code == 0
    data = json.loads(cli("ranks", folder, "--format", "json").out)
    opened = open_report(out)
    page = opened.page
    wait_for(page, "window.opscopeReady !== undefined")
    assert opened.problems() == [] and opened.dialogs == []
    assert card_value(opened, "ranks") == f"{data['ranks_found']} / {data['world_size']}"
    if data["straggler"]:
        assert card_value(opened, "straggler") == f"rank {data['straggler']['rank']}"
    table_rows = page.locator("#rank-rows tbody tr")
    assert table_rows.count() == len(data["ranks"])
    busy = [r["busy_us"] for r in sorted(data["ranks"], key=lambda r: r["rank"])]
    assert [table_rows.nth(i).locator("td").nth(3).inner_text() for i in range(len(busy))] == [
        fmt_ms(b) if b >= 1000 else f"{b:.1f} µs" for b in busy
    ]
    for rank in data["ranks"]:  # the stacked parts add up to busy + idle
        union = rank["compute_us"] + rank["communication_us"] - rank["overlap_us"]
        assert union <= rank["busy_us"] + 1e-3
    assert page.locator("#heatmap-chart canvas").count() >= 1
    opened.screenshot("ranks-report.png")


def test_capped_kernel_table_says_what_it_left_out(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = many_kernels_trace(
        tmp_path / "names.json.gz", 3_000, names=3_000
    )  # hand-made: 3,000 distinct names
    out = tmp_path / "capped.html"
    assert cli("report", path, "-o", out, "--no-cache", "--max-rows", "100").code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == []
    assert page.locator("#kernels-table .count").inner_text() == "100 rows"
    note = page.locator("#kernels-capped")
    assert re.match(
        r"Showing the 100 rows with the most GPU time of 3,000; the other 2,900 hold ", note.inner_text()
    )
    links = note.locator("a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [
        "capped.kernels.csv",
        "capped.kernels.json",
    ]
    assert (tmp_path / "capped.kernels.csv").exists() and (tmp_path / "capped.kernels.json").exists()


def test_capped_diff_tables_say_what_they_left_out(cli, tmp_path, open_report) -> None:  # noqa: F811
    base = many_kernels_trace(
        tmp_path / "base.json.gz", 6_000, names=6_000
    )  # hand-made: 6,000 distinct names
    new = many_kernels_trace(tmp_path / "new.json.gz", 5_500, names=6_000)  # 500 kernels gone
    out = tmp_path / "diff.html"
    assert cli("diff", base, new, "--html", out, "--no-cache").code == 0
    opened = open_report(out)
    assert opened.problems() == []
    assert opened.page.locator("#kernel-hidden").inner_text().startswith("1,000 more kernel rows not shown")


def test_report_with_nsight_compute_metrics(cli, tmp_path, open_report) -> None:  # noqa: F811
    """`report TRACE --metrics FILE`: the kernels table gains the joined ncu means and says how many profiled
    launches matched. The ncu export is the HAND-MADE fixture naming the real saxpy trace's kernel."""
    from conftest import REPO

    trace = corpus_path("pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    ncu = REPO / "tests" / "fixtures" / "ncu_raw_handmade.csv"
    out = tmp_path / "report.html"
    assert cli("report", trace, "--metrics", ncu, "-o", out, "--no-cache").code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == []
    assert "3 of 4 profiled launches matched" in page.locator("#kernels-ncu").inner_text()
    headers = page.locator("#kernel-table thead th").all_inner_texts()
    assert "SM %" in headers and "Ach occ %" in headers
    row = page.locator("#kernel-table tbody tr", has_text="saxpy").first.locator("td")
    assert row.nth(headers.index("SM %")).inner_text() == "0.920"


def test_idle_causes_table_shows_analyze_figures(cli, tmp_path, open_report) -> None:  # noqa: F811
    """The CPU panel's "Why the GPU was idle" table: the non-zero causes of `opscope analyze --format json`,
    largest first, each with its time as the page formats it, the loader named."""
    trace = corpus_path(
        "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
    )
    out = tmp_path / "report.html"
    assert cli("report", trace, "-o", out).code == 0
    (device,) = json.loads(cli("analyze", trace, "--format", "json").out)["devices"]
    causes = sorted((c for c in device["idle_breakdown"]["causes"] if c["us"] > 0), key=lambda c: -c["us"])
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == []
    rows = page.locator("#idle-causes-table tbody tr")
    assert rows.count() == len(causes)
    first = rows.first.locator("td")
    assert first.nth(1).inner_text() == causes[0]["cause"] == "dataloader"
    assert first.nth(2).inner_text() == fmt_ms(causes[0]["us"])
    assert "enumerate(DataLoader)" in first.nth(5).inner_text()
    assert "add up to its idle time" in page.locator("#idle-causes-note").inner_text()
    # step by step: one row per step, the loader first in each
    steps = page.locator("#idle-cause-step-rows tbody tr")
    assert steps.count() == len(device["idle_breakdown"]["per_step"]) == 6
    assert steps.first.locator("td").nth(3).inner_text().startswith("dataloader ")
    opened.screenshot("trace-idle-causes.png", "#cpu")
