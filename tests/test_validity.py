"""No silent wrong numbers (issue 52, docs/validity.md): every trace is checked for what would make its figures
wrong, and every view says so.

Three kinds of test. On every Kineto trace of the corpus, each check's count equals the independent
recomputation from the raw JSON events (`reference.py`, plain loops over the definitions of docs/validity.md),
and the warn / error checks are exactly those docs/validity.md lists for it (silent where the raw events show
nothing wrong). On real traces with a defect injected (durations stretched over their neighbours, one event
made huge, the first 30% of the GPU records removed, the GPU clock shifted, graph launches without their
kernels, steps emptied, a file cut off) the count is exact: the number injected. And through the real CLI: every
command's JSON carries `validity`, the terminal, Markdown, `brief`, the HTML report (in Chromium) and the MCP
answers put the banner first, `--strict` exits 1 on an error check, and `--repair overlaps` clips the flagged
durations and says so.
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import opscope
import reference as ref
from browser import chromium, open_report  # noqa: F401  (fixtures)
from conftest import TRACES, corpus_path
from opscope.analysis.validity import Validity, validity

QWEN_MI300 = "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"  # 1,516 kernels on an MI300X
QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"  # the same model on an H100 (CUDA)
STEPPED = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # 5 steps, 6,095 GPU records

# What fires at warn or error on the corpus (docs/validity.md, "What fires on the corpus"); every other Kineto
# trace of the corpus fires nothing above info.
EXPECTED_ALERTS = {
    "zoology/trace.json": {"launch_without_record": "error"},
    "hta/cupti_profiler_benchmark_result_924719_1679055439_trace.json.gz": {"launch_without_record": "error"},
    "hta/trace_compare_base_base.json.gz": {"record_without_launch": "warn"},
    "hta/trace_compare_test_test.json.gz": {"record_without_launch": "warn", "launch_without_record": "warn"},
}


def kineto_corpus() -> list[str]:
    if not TRACES.is_dir():
        return []
    found = sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json*") if p.is_file())
    return [p for p in found if "rocprof__" not in p and "execution_trace" not in p and "_et." not in p]


def by_check(found: Validity) -> dict[str, Any]:
    return {c.check: c for c in found.checks}


# ---- the corpus: each count equals the recomputation from the raw events --------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("name", kineto_corpus())
def test_each_check_counts_what_the_raw_events_show(name: str) -> None:
    path = corpus_path(name)
    trace = opscope.load(path)
    if trace.meta.format != "kineto":
        pytest.skip(f"{name}: a {trace.meta.format} file (the reference reads Chrome-trace JSON)")
    events = ref.load(path)
    fired = by_check(validity(trace))

    count, claimed = ref.overlaps(events)
    assert (fired["stream_overlap"].events if "stream_overlap" in fired else 0) == count
    if count:
        assert fired["stream_overlap"].gpu_time_ns == claimed

    missing, start, middle, end = ref.launches_without_records(events)
    check = fired.get("launch_without_record")
    assert (check.events if check else 0) == missing
    if check:
        assert (check.detail["start"], check.detail["middle"], check.detail["end"]) == (start, middle, end)

    missing, start, middle, end, held = ref.records_without_launches(events)
    check = fired.get("record_without_launch")
    assert (check.events if check else 0) == missing
    if check:
        assert (check.detail["start"], check.detail["middle"], check.detail["end"]) == (start, middle, end)
        assert check.gpu_time_ns == held

    early, offset = ref.before_launch(events)
    check = fired.get("kernel_before_launch")
    assert (check.events if check else 0) == early
    if check:
        assert check.detail["offset_us"] == round(offset / 1e3, 3)

    launches, without, graph_records = ref.graphs(events)
    check = fired.get("graph_kernels_hidden")
    if check:
        assert check.detail == {
            "graph_launches": launches,
            "without_kernels": without,
            "graph_kernels": graph_records,
        }
    else:
        assert without == 0

    windows = ref.steps(events)
    check = fired.get("outlier_duration")
    assert (check.events if check else 0) == ref.outliers(events, windows)
    check = fired.get("step_collapse")
    assert (check.events if check else 0) == ref.collapsed_steps(events, windows)

    alerts = {c.check: c.severity for c in validity(trace).at_least("warn")}
    assert alerts == EXPECTED_ALERTS.get(name, {})


@pytest.mark.corpus
def test_the_other_formats_of_the_corpus_fire_nothing_above_info() -> None:
    """nsys, xplane, rocprof: no check warns (what does fire, at info, is in docs/validity.md)."""
    names = [
        "tracelens/rocprof__908_results.json.gz",
        "tracelens/mi300__jax_conv_minimal_legacy__chi-mi300x-013.ord.vultr.cpe.ice.amd.com.xplane.pb",
        "tracelens/mi300__jax08_gemm__tw003.xplane.pb",
    ]
    names += (
        [str(p.relative_to(TRACES)) for p in sorted(TRACES.rglob("*.sqlite"))][:3] if TRACES.is_dir() else []
    )
    for name in names:
        try:
            trace = opscope.load(corpus_path(name))
        except opscope.OpscopeError:  # an AMD database opscope says it does not read yet (issue 56)
            continue
        assert validity(trace).at_least("warn") == (), name


# ---- injected defects: the count is exact ---------------------------------------------------------------------


def read_doc(name: str) -> dict[str, Any]:
    with gzip.open(corpus_path(name), "rt", encoding="utf-8") as handle:
        return json.load(handle)


def write_doc(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def gpu_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("cat") in ref.GPU_CATS and e.get("ph") == "X"]


def lanes(doc: dict[str, Any]) -> dict[tuple[Any, Any], list[dict[str, Any]]]:
    out: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in gpu_events(doc):
        a = e.get("args", {})
        out[(a.get("device", e.get("pid")), a.get("stream", e.get("tid")))].append(e)
    for lane in out.values():
        lane.sort(key=lambda e: e["ts"])
    return out


def stretched(doc: dict[str, Any], count: int, by_us: float) -> list[dict[str, Any]]:
    """Stretch `count` kernels, spread over the busiest stream, to end `by_us` after the next one starts."""
    lane = max(lanes(doc).values(), key=len)
    picked = [e for e in lane[10:-10:150] if e.get("cat") == "kernel"][:count]
    nexts = {id(a): b for a, b in itertools.pairwise(lane)}
    for e in picked:
        e["dur"] = nexts[id(e)]["ts"] - e["ts"] + by_us
    return picked


def test_stretched_durations_are_counted_exactly(tmp_path: Path) -> None:
    """The first report of issue 52 (AMD-AGI/TraceLens#669): seven kernels on a real MI300X trace stretched over
    their neighbours."""
    doc = read_doc(QWEN_MI300)
    picked = stretched(doc, 7, by_us=2_000.0)
    path = write_doc(doc, tmp_path / "stretched.json")
    check = by_check(validity(opscope.load(path)))["stream_overlap"]
    assert check.events == 7
    assert check.gpu_time_ns == 7 * 2_000_000 == ref.overlaps(ref.load(path))[1]
    assert check.severity == "error"  # 14 ms of a ~40 ms GPU time
    assert {e["name"] for e in check.examples} <= {e["name"] for e in picked}


def test_one_huge_event_is_an_outlier(tmp_path: Path) -> None:
    """TraceLens#972: one malformed event holding almost all the GPU time."""
    doc = read_doc(QWEN_MI300)
    host = [
        e
        for e in doc["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") not in ref.GPU_CATS and "dur" in e
    ]
    window_us = max(e["ts"] + e["dur"] for e in host) - min(e["ts"] for e in host)
    victim = gpu_events(doc)[len(gpu_events(doc)) // 2]
    victim["dur"] = 10 * window_us
    path = write_doc(doc, tmp_path / "huge.json")
    check = by_check(validity(opscope.load(path)))["outlier_duration"]
    assert check.events == 1 == ref.outliers(ref.load(path), ref.steps(ref.load(path)))
    assert check.detail["longer_than_window"] == 1
    assert check.severity == "error" and check.share > 0.9
    assert check.examples[0]["name"] == victim["name"]


def test_records_dropped_at_the_start_are_counted_exactly(tmp_path: Path) -> None:
    """pytorch/pytorch#192021: kernel records dropped at the start of a profiling run. The first 30% of the GPU
    records (by start) removed: every kernel launch or copy whose records are all gone is counted."""
    doc = read_doc(STEPPED)
    records = sorted(gpu_events(doc), key=lambda e: e["ts"])
    gone = records[: int(0.3 * len(records))]
    kept_ids = {e["args"].get("correlation") for e in records[len(gone) :]}
    gone_ids = {e["args"].get("correlation") for e in gone} - kept_ids
    dropped = {id(e) for e in gone}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in dropped]
    calls = ref.launch_calls(doc["traceEvents"])
    expected = sum(
        1
        for e in calls
        if e["args"].get("correlation") in gone_ids and not ref.NOT_LAUNCHES.search(e["name"])
    )
    path = write_doc(doc, tmp_path / "dropped.json")
    check = by_check(validity(opscope.load(path)))["launch_without_record"]
    assert expected > 100
    assert check.events == expected == ref.launches_without_records(ref.load(path))[0]
    assert check.detail["start"] >= 0.9 * expected  # nearly all of them before the first kept record's id
    assert check.severity == "warn"


def test_a_shifted_gpu_clock_is_found_with_its_offset(tmp_path: Path) -> None:
    """Every GPU record moved 50 ms earlier: each one with a launch call starts before it, by its launch delay
    plus 50 ms; the offset is the largest of those gaps."""
    doc = read_doc(QWEN_H100)
    first_call: dict[int, float] = {}
    for e in ref.launch_calls(doc["traceEvents"]):
        corr = e["args"].get("correlation")
        if corr is not None:
            first_call[corr] = min(first_call.get(corr, e["ts"]), e["ts"])
    linked = []
    for e in gpu_events(doc):
        e["ts"] -= 50_000.0
        corr = e.get("args", {}).get("correlation")
        if corr in first_call:
            linked.append(first_call[corr] - e["ts"])
    path = write_doc(doc, tmp_path / "shifted.json")
    check = by_check(validity(opscope.load(path)))["kernel_before_launch"]
    assert check.events == len(linked) == ref.before_launch(ref.load(path))[0]
    assert check.detail["offset_us"] == pytest.approx(max(linked), abs=1e-3)
    assert 49_000 < check.detail["offset_us"] < 50_000  # 50 ms less the shortest launch delay


def test_graph_launches_without_kernels_are_counted(tmp_path: Path) -> None:
    """CUDA graphs (TraceLens#827): five kernel launches turned into graph launches whose kernels are missing."""
    doc = read_doc(QWEN_H100)
    kernels = {e["args"].get("correlation"): e for e in gpu_events(doc) if e.get("cat") == "kernel"}
    launches = [e for e in ref.launch_calls(doc["traceEvents"]) if e["name"] == "cudaLaunchKernel"]
    chosen = [e for e in launches if e["args"].get("correlation") in kernels][100:600:100]
    gone = set()
    for call in chosen:
        call["name"] = "cudaGraphLaunch"
        gone.add(id(kernels[call["args"]["correlation"]]))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in gone]
    path = write_doc(doc, tmp_path / "graphs.json")
    fired = by_check(validity(opscope.load(path)))
    check = fired["graph_kernels_hidden"]
    assert check.detail["without_kernels"] == 5 and check.severity == "warn"
    assert "launch_without_record" not in fired or fired["launch_without_record"].detail["middle"] == 0


def test_steps_left_without_gpu_work_collapse(tmp_path: Path) -> None:
    """The GPU records of every step but the first removed: four of five steps hold no GPU work."""
    doc = read_doc(STEPPED)
    windows = ref.steps(ref.load(corpus_path(STEPPED)))
    assert len(windows) == 5
    first_end_us = windows[0][1] / 1e3
    later = {id(e) for e in gpu_events(doc) if e["ts"] > first_end_us}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in later]
    path = write_doc(doc, tmp_path / "collapsed.json")
    check = by_check(validity(opscope.load(path)))["step_collapse"]
    assert check.events == 4 == ref.collapsed_steps(ref.load(path), ref.steps(ref.load(path)))
    assert check.detail == {"steps": 5, "empty": 4, "holding": 1}


def test_a_cut_off_trace_says_it_lost_its_end(tmp_path: Path) -> None:
    raw = gzip.decompress(corpus_path(QWEN_MI300).read_bytes())
    path = tmp_path / "cut.json"
    path.write_bytes(raw[: len(raw) * 2 // 3])
    check = by_check(validity(opscope.load(path)))["dropped_events"]
    assert check.detail["truncated"] is True and check.severity == "warn"


def test_a_counter_of_lost_records_in_the_metadata_is_reported(tmp_path: Path) -> None:
    doc = read_doc(QWEN_MI300)
    doc["droppedRecords"] = 123  # HAND-MADE: a top-level counter as a profiler would write it
    path = write_doc(doc, tmp_path / "counted.json")
    check = by_check(validity(opscope.load(path)))["dropped_events"]  # the reader keeps top-level scalars
    assert check.detail["reported:droppedRecords"] == 123 and check.events == 123


# ---- every view says it --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stretched_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MI300X trace with seven kernels stretched 2 ms past the next one: `stream_overlap` at error level,
    nothing else above info."""
    doc = read_doc(QWEN_MI300)
    stretched(doc, 7, by_us=2_000.0)
    return write_doc(doc, tmp_path_factory.mktemp("validity") / "stretched.json")


TRACE_COMMANDS = [
    ["summary"],
    ["analyze"],
    ["advise"],
    ["ops"],
    ["tree"],
    ["steps"],
    ["lines"],
    ["kernels"],
    ["efficiency"],
    ["memory"],
    ["critical-path"],
    ["brief"],
    ["report", "--format", "json", "-o", "-"],
    ["compile-check"],
]


@pytest.mark.parametrize("command", TRACE_COMMANDS, ids=lambda c: c[0])
def test_every_command_json_carries_validity(cli, stretched_trace: Path, command: list[str]) -> None:
    args = [*command, str(stretched_trace)]
    if "--format" not in command:
        args += ["--format", "json"]
    done = cli(*args)
    assert done.code == 0, done.err
    data = json.loads(done.out)
    assert list(data)[:2] == ["schema", "validity_banners"]
    first = data["validity"][0]
    assert first["check"] == "stream_overlap" and first["severity"] == "error" and first["events"] == 7
    assert set(first) >= {"check", "severity", "events", "gpu_time_us", "share", "message", "examples"}
    assert data["validity_banners"][0].startswith("ERROR stream_overlap: 7 kernels")


def test_several_traces_name_theirs(cli, stretched_trace: Path) -> None:
    clean = corpus_path(QWEN_MI300)
    for args in (
        ["diff", clean, stretched_trace],
        ["ranks", clean, stretched_trace],
        ["summary", clean, stretched_trace],
    ):
        done = cli(*args, "--format", "json")
        assert done.code == 0, done.err
        data = json.loads(done.out)
        alerts = [v for v in data["validity"] if v["severity"] != "info"]
        assert [(v["trace"], v["check"]) for v in alerts] == [(str(stretched_trace), "stream_overlap")]
        assert data["validity_banners"][0].startswith(f"{stretched_trace}: ERROR stream_overlap")


def test_commands_that_read_no_trace_have_an_empty_list(cli, tmp_path: Path) -> None:
    for args in (["formats"], ["cache", "info"]):
        done = cli(*args, "--format", "json")
        assert done.code == 0, done.err
        assert json.loads(done.out)["validity"] == []


def test_history_add_says_it(cli, stretched_trace: Path, tmp_path: Path) -> None:
    done = cli(
        "history", "add", stretched_trace, "--db", tmp_path / "h.sqlite", "--no-git", "--format", "json"
    )
    assert done.code == 0, done.err
    assert json.loads(done.out)["validity"][0]["check"] == "stream_overlap"


def test_the_banner_comes_first_in_the_terminal_markdown_and_brief(cli, stretched_trace: Path) -> None:
    table = cli("summary", stretched_trace, "--width", "200").out.splitlines()
    assert table[0].startswith("ERROR stream_overlap: 7 kernels run past the start of the next work")
    assert "figures below include them as recorded" in table[0]
    markdown = cli("advise", stretched_trace, "--format", "markdown").out.splitlines()
    assert markdown[0].startswith("> **ERROR stream\\_overlap") or markdown[0].startswith(
        "> **ERROR stream_overlap"
    )
    brief = cli("brief", stretched_trace, "--width", "200").out.splitlines()
    assert brief[0].startswith("ERROR stream_overlap")


def test_a_clean_trace_shows_no_banner(cli) -> None:
    out = cli("summary", corpus_path(QWEN_MI300), "--width", "200").out
    assert not out.startswith(("ERROR", "WARN"))


def test_strict_fails_on_an_error_check_after_the_output(cli, stretched_trace: Path) -> None:
    done = cli("summary", stretched_trace, "--strict", "--format", "json")
    assert done.code == 1
    assert json.loads(done.out)["schema"] == "opscope.summary/1"  # the output first
    assert (
        done.err.strip()
        .splitlines()[-1]
        .startswith(f"opscope: error: --strict: {stretched_trace}: stream_overlap")
    )
    assert cli("summary", corpus_path(QWEN_MI300), "--strict").code == 0  # info checks do not fail it
    assert cli("summary", stretched_trace, "--strict", "--repair", "overlaps").code == 0  # repaired


def test_repair_overlaps_clips_the_durations_and_says_so(cli, stretched_trace: Path) -> None:
    recorded = json.loads(cli("summary", stretched_trace, "--format", "json", "--top", "0").out)
    repaired = json.loads(
        cli("summary", stretched_trace, "--format", "json", "--top", "0", "--repair", "overlaps").out
    )
    claimed_us = recorded["validity"][0]["gpu_time_us"]
    total = sum(r["total_us"] for r in recorded["rows"])
    assert sum(r["total_us"] for r in repaired["rows"]) == pytest.approx(total - claimed_us, abs=0.01)
    assert [v["check"] for v in repaired["validity"]][-1] == "repaired"
    assert repaired["validity_banners"][0].endswith(
        "figures below cut them to the next start (--repair overlaps)"
    )
    assert repaired["validity_banners"][-1].startswith(
        "REPAIRED: repaired reading (--repair overlaps): 7 GPU records"
    )
    table = cli("summary", stretched_trace, "--repair", "overlaps", "--width", "200").out
    assert "REPAIRED:" in table.split("GPU time by kernel")[0]  # above the figures


def test_repair_in_python_matches_the_cli(stretched_trace: Path) -> None:
    trace = opscope.load(stretched_trace, repair=("overlaps",))
    assert trace.meta.repairs and opscope.validity(trace).repaired == trace.meta.repairs
    assert opscope.validity(trace).checks == opscope.validity(opscope.load(stretched_trace)).checks
    recorded = opscope.summary(opscope.load(stretched_trace), top=0).to_polars()["total_ns"].sum()
    clipped = opscope.summary(trace, top=0).to_polars()["total_ns"].sum()
    assert recorded - clipped == by_check(opscope.validity(trace))["stream_overlap"].gpu_time_ns
    with pytest.raises(opscope.UsageError, match="unknown repair 'gaps'"):
        opscope.load(stretched_trace, repair="gaps")


def test_an_unknown_repair_is_a_usage_error(cli, stretched_trace: Path) -> None:
    done = cli("summary", stretched_trace, "--repair", "everything")
    assert done.code == 2 and "unknown repair 'everything'" in done.err


@pytest.mark.browser
def test_the_html_report_opens_with_the_banner(
    cli,
    stretched_trace: Path,
    tmp_path: Path,
    open_report: Any,  # noqa: F811
) -> None:
    page_path = tmp_path / "report.html"
    assert cli("report", stretched_trace, "-o", page_path).code == 0
    opened = open_report(page_path)
    banners = opened.page.locator("#validity .banner")
    assert banners.count() == 1
    assert banners.first.text_content().startswith("ERROR stream_overlap: 7 kernels")
    assert "error" in (banners.first.get_attribute("class") or "")
    top = opened.page.evaluate("document.body.firstElementChild.id")
    assert top == "validity"  # above the header, the title and everything else
    assert opened.problems() == [] and opened.dialogs == []
    clean = tmp_path / "clean.html"
    assert cli("report", corpus_path(QWEN_MI300), "-o", clean).code == 0
    assert open_report(clean).page.locator("#validity .banner").count() == 0


def test_paged_answers_keep_the_banner_first() -> None:
    """An MCP answer cut into pages: the banners on every page, right after the schema; the checks are rows."""
    from opscope.serve.bounds import bounded

    payload = {
        "schema": "opscope.summary/1",
        "validity_banners": ["ERROR stream_overlap: x"],
        "rows": [{"n": i} for i in range(500)],
        "validity": [{"check": "stream_overlap"}],
    }
    offset: int | None = 0
    checks = []
    while offset is not None:
        text, offset = bounded(payload, 2_000, offset, lambda o: f"c.{o}")
        page = json.loads(text)
        assert list(page)[:2] == ["schema", "validity_banners"]
        assert page["validity_banners"] == ["ERROR stream_overlap: x"]
        checks += page["validity"]
    assert checks == payload["validity"]
