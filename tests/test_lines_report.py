"""The HTML report's "By source" panel and the Python stacks of its timeline: the panel's rows are `opscope lines`'
rows; each shipped kernel's stack is the raw stack of frames open on the launch's thread at the launch's start
(json walk), innermost first, with the user's frames marked and its innermost one the frame `opscope lines`
charges; in a real browser (headless Debian Chromium), the table shows and clicking a kernel shows its launch call
and frames, hostile names as text."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import reference as ref
from browser import chromium, open_report, wait_for  # noqa: F401  (fixtures)
from conftest import corpus_path
from test_lines import NO_STACKS, QWEN, VIT, framework, raw_frames


def raw_stacks(events: list[dict]) -> dict[int, list[str]]:
    """{GPU event index: the names of every python_function open on its launch's thread at the launch's start,
    innermost (latest start, shorter on ties, later in the file on full ties) first}."""
    frames: dict[tuple[str, str], list[tuple[int, int, int]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("cat") == "python_function" and ref.is_x(e):
            s, end = ref.span(e)
            frames[(str(e.get("pid")), str(e.get("tid")))].append((s, end, i))
    linked = ref.link(events)
    out = {}
    for g in linked.gpu:
        launch = linked.launch[g]
        if launch is None:
            continue
        call = events[launch]
        at = ref.span(call)[0]
        open_ = [
            f for f in frames.get((str(call.get("pid")), str(call.get("tid"))), []) if f[0] <= at <= f[1]
        ]
        open_.sort(key=lambda f: (-f[0], f[1] - f[0], -f[2]))
        if open_:
            out[g] = [events[i]["name"] for _, _, i in open_]
    return out


def shipped_events(data: dict) -> list[tuple[tuple[int | None, int | None, int, int, str], int]]:
    """The timeline's shipped events as ((device, stream, start ns, dur ns, name), index)."""
    t = data["timeline"]
    start, out = 0, []
    for i, delta in enumerate(t["start"]):
        start += delta
        lane = t["lanes"][t["lane"][i]]
        key = (lane["device"], lane["stream"], t["t0_ns"] + start, t["dur"][i], data["strings"][t["name"][i]])
        out.append((key, i))
    return out


@pytest.mark.corpus
@pytest.mark.parametrize("relative", [VIT, QWEN])
def test_report_packs_lines_and_the_launch_stacks(cli, relative: str) -> None:
    path = corpus_path(relative)
    data = json.loads(cli("report", path, "--format", "json").out)
    strings = data["strings"]
    lines = json.loads(cli("lines", path, "--format", "json", "--top", "200").out)
    panel = data["lines"]
    assert panel["has_stacks"] and panel["gpu_time_us"] == lines["gpu_time_us"]
    assert [(strings[r["frame"]], r["gpu_time_us"], r["kernels"]) for r in panel["rows"]] == [
        (r["frame"], r["gpu_time_us"], r["kernels"]) for r in lines["rows"]
    ]
    events = ref.load(path)
    stacks, charged = raw_stacks(events), raw_frames(events)
    by_key = {}
    for g in ref.link(events).gpu:
        e = events[g]
        a = ref.args(e)
        s, end = ref.span(e)
        by_key[(a.get("device", e.get("pid")), a.get("stream", e.get("tid")), s, end - s, e["name"])] = g
    python, timeline = data["timeline"]["python"], data["timeline"]
    checked = 0
    for key, i in shipped_events(data):
        g = by_key[key]
        p = timeline["py"][i]
        if g not in stacks:
            assert p == -1
            continue
        names = [strings[n] for n in python["stacks"][p]]
        assert names == stacks[g]
        assert python["user"][p] == [int(not framework(n)) for n in names]
        users = [n for n, u in zip(names, python["user"][p], strict=True) if u]
        assert (users[0] if users else None) == charged[g]
        launch = ref.link(events).launch[g] if checked < 3 else None
        if launch is not None:
            assert strings[timeline["launch"][i]] == events[launch]["name"]
        checked += 1
    assert checked > 100


@pytest.mark.browser
@pytest.mark.corpus
def test_by_source_panel_and_kernel_click(cli, tmp_path, open_report) -> None:  # noqa: F811
    path = corpus_path(VIT)
    out = tmp_path / "report.html"
    assert cli("report", path, "-o", out).code == 0
    lines = json.loads(cli("lines", path, "--format", "json").out)
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == []
    first = page.locator("#lines-rows tbody tr").first.locator("td")
    assert (
        first.nth(0).inner_text()
        == "modeling_vit.py(252): forward"
        == lines["rows"][0]["frame"].split("/")[-1]
    )
    assert first.nth(7).get_attribute("title") == lines["rows"][0]["frame"]
    assert "unattributed: 0.000 ms" in page.locator("#lines-note").inner_text()
    # Click the longest kernel: its launch call, the innermost frame of the user's code, the frames above it.
    i = page.evaluate(
        "(() => { const T = OPS.D.timeline; let best = -1; for (let i = 0; i < T.dur.length; i++)"
        " if (T.py[i] >= 0 && (best < 0 || T.dur[i] > T.dur[best])) best = i; return best; })()"
    )
    detail = page.evaluate(f"window.opscopeTimeline.detail({i})")
    page.evaluate(f"window.opscopeTimeline.show({i})")
    canvas = page.locator("#timeline-canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    pixel = page.evaluate(f"window.opscopeTimeline.pixelOf({i})")
    page.mouse.click(box["x"] + pixel["x"], box["y"] + pixel["y"])
    wait_for(page, f"window.opscopeTimeline.selected === {i}")
    panel = page.locator("#timeline-detail")
    assert panel.is_visible()
    assert panel.locator('[data-key="launch"]').inner_text() == f"launch call: {detail['launch']}"
    assert detail["frame"] and panel.locator('[data-key="at"]').inner_text() == (
        "at " + detail["frame"].split("/")[-1]
    )
    items = panel.locator("ol.frames").first.locator("li")
    assert items.first.inner_text() == detail["frame"] and items.first.get_attribute("class") == "user"
    assert items.count() == len(detail["above"])
    assert (
        panel.locator("details.frames-below summary")
        .inner_text()
        .startswith(f"{len(detail['below'])} framework")
    )
    opened.screenshot("lines-timeline-click.png", "#timeline")
    opened.screenshot("lines-by-source.png", "#lines")
    assert opened.problems() == []


@pytest.mark.browser
def test_hostile_frames_and_a_trace_without_stacks(cli, tmp_path, open_report) -> None:  # noqa: F811
    """HAND-MADE hostile frame names reach the page as text (no dialog, no markup); a trace without stacks says
    how to record them."""
    from handmade_traces import HOSTILE_FRAME, document, with_stack_trace, write

    events, _, _, _ = with_stack_trace()
    trace = write(tmp_path / "stack.json", document(events))
    out = tmp_path / "hostile.html"
    assert cli("report", trace, "-o", out).code == 0
    opened = open_report(out)
    page = opened.page
    assert opened.problems() == [] and opened.dialogs == [] and page.locator("img").count() == 0
    cells = page.locator("#lines-rows tbody td").all_inner_texts()
    assert any(HOSTILE_FRAME.split("/")[-1].replace("\x1b", "") in c.replace("\x1b", "") for c in cells)
    i = page.evaluate(
        "OPS.D.timeline.py.findIndex((p, i) => p >= 0 && OPS.S(OPS.D.timeline.name[i]) === 'k5')"
    )
    page.evaluate(f"window.opscopeTimeline.select({i})")
    assert HOSTILE_FRAME in page.locator("#timeline-detail ol.frames li").first.get_attribute("title")
    assert opened.dialogs == [] and page.locator("img").count() == 0

    if not Path(corpus_path(NO_STACKS[0])).exists():
        return
    plain = tmp_path / "plain.html"
    assert cli("report", corpus_path(NO_STACKS[0]), "-o", plain).code == 0
    opened = open_report(plain)
    assert "no Python stacks" in opened.page.locator("#lines-note").inner_text()
    opened.page.evaluate("window.opscopeTimeline.select(0)")
    assert "with_stack=True" in opened.page.locator("#timeline-detail").inner_text()
    assert opened.problems() == []
