"""`opscope brief`: at most 15 template lines per trace, the same words in every format and in the HTML report's
first panel, every figure the one `analyze` / `advise` print for the same trace, the GPU events and busy time
also recomputed from the raw events (a json-module walk), the same bytes on every run."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from conftest import corpus_path
from opscope.report.brief_view import duration
from opscope.report.escape import md_text

QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
CORPUS = [
    QWEN,
    BERT,
    "hta/nccl_parser_config_nccl_data.json.gz",
    "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz",
    "pipit/cloverleaf-nsys__perlmutter-cloverleaf-cuda.sqlite",
    "tracelens/mi300__jax08_gemm__tw003.xplane.pb",
    "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
]


def brief(cli, trace, fmt: str = "json", *more: str):
    result = cli("brief", trace, "--format", fmt, *more)
    assert result.code == 0, result.err
    return json.loads(result.out) if fmt == "json" else result.out


@pytest.mark.parametrize("name", CORPUS)
def test_at_most_15_lines_the_same_in_every_format(cli, name) -> None:
    trace = corpus_path(name)
    data = brief(cli, trace)
    lines = data["lines"]
    assert data["schema"] == "opscope.brief/1" and 3 <= len(lines) <= 15
    assert [line["label"] for line in lines[:2]] == ["Capture", "GPU time"]
    table = brief(cli, trace, "table", "--width", "1000")
    assert [row.strip() for row in table.splitlines()[1:]] == [f"{x['label']}: {x['text']}" for x in lines]
    markdown = brief(cli, trace, "markdown")
    assert [f"- **{md_text(x['label'])}**: {md_text(x['text'])}" for x in lines] == [
        row for row in markdown.splitlines() if row.startswith("- ")
    ]
    assert brief(cli, trace, "table", "--width", "1000") == table  # deterministic


def test_the_figures_are_those_of_analyze_and_advise(cli) -> None:
    trace = corpus_path(QWEN)
    lines = {x["label"]: x["text"] for x in brief(cli, trace)["lines"] if x["label"] != "How"}
    fixes = [x["text"] for x in brief(cli, trace)["lines"] if x["label"].startswith("Fix ")]
    analyze = json.loads(cli("analyze", trace, "--format", "json").out)
    advise = json.loads(cli("advise", trace, "--format", "json").out)
    gpu = analyze["devices"][0]
    assert lines["GPU time"].startswith(
        f"GPU 0 busy {duration(gpu['busy_us'] * 1e3)} = {gpu['utilization'] * 100:.1f}% of the window; "
        f"idle {duration(gpu['idle_us'] * 1e3)}: {duration(gpu['idle_breakdown']['host_wait_us'] * 1e3)} waiting"
    )
    top = analyze["categories"][:3]
    assert lines["Where it goes"].startswith(
        ", ".join(f"{c['category']} {c['share'] * 100:.1f}%" for c in top)
    )
    kernel = analyze["kernels"][0]
    assert f"{kernel['share'] * 100:.1f}% of GPU time, {kernel['calls']:,} calls" in lines["Top kernel"]
    assert lines["Top op"].startswith(analyze["ops"][0]["name"] + ": ")
    assert len(fixes) == min(3, len(advise["findings"]))
    for text, finding in zip(fixes, advise["findings"], strict=False):
        assert text.startswith(f"{finding['title']} [{finding['severity']}]: ")
        assert (
            f"{duration(finding['time_at_stake_us'] * 1e3)} at stake ({finding['share'] * 100:.1f}%" in text
        )
        saving = finding["predicted_saving_us"]
        assert ("no predicted saving" in text) == (saving is None)
        if saving:
            assert f"predicted saving {duration(saving * 1e3)} " in text
    assert any("predicted saving" in t and "no predicted" not in t for t in fixes)  # this trace has one
    assert re.search(r"Code: .*\.py\(\d+\)", "".join(x["text"] for x in brief(cli, trace)["lines"]))


def test_gpu_events_and_busy_time_from_the_raw_events(cli) -> None:
    """Independent of opscope: a json-module walk over the Kineto events (kernels, memcpy, memset), busy time as
    the length of the union of their intervals."""
    trace = corpus_path(BERT)
    with gzip.open(trace) as f:
        events = json.load(f)["traceEvents"]
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    busy_us, end = 0.0, None
    for start, stop in sorted((e["ts"], e["ts"] + e["dur"]) for e in gpu):
        if end is None or start > end:
            busy_us, end = busy_us + (stop - start), stop
        elif stop > end:
            busy_us, end = busy_us + (stop - end), stop
    lines = {x["label"]: x["text"] for x in brief(cli, trace)["lines"]}
    assert f": {len(gpu):,} GPU events in a " in lines["Capture"]
    assert lines["GPU time"].startswith(f"GPU 0 busy {duration(busy_us * 1e3)} = ")


def test_a_trace_without_gpu_work_says_so(cli) -> None:
    data = brief(cli, corpus_path("hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"))
    lines = {x["label"]: x["text"] for x in data["lines"]}
    assert lines["Capture"].startswith("PyTorch profiler (Kineto) trace, rank 34 of 300: 0 GPU events")
    assert lines["GPU time"].startswith("No GPU activity")
    assert lines["Fixes"].startswith("none found")


def test_the_html_report_shows_the_same_lines_first(cli) -> None:
    trace = corpus_path(QWEN)
    report = json.loads(cli("report", trace, "--format", "json").out)
    assert report["brief"] == brief(cli, trace)["lines"]
    advise = json.loads(cli("advise", trace, "--format", "json").out)
    assert report["findings"] == advise["findings"]  # predicted savings included: the brief tells them


def test_trace_text_is_text_in_every_format(cli, tmp_path) -> None:
    from handmade_traces import write
    from test_hostile_names import check_json, check_markdown, check_table, hostile_doc

    trace = write(tmp_path / "hostile\x1b[2J.json", hostile_doc())  # HAND-MADE: hostile kernel and op names
    table = cli("brief", trace, "--no-cache", "--width", "200")
    assert table.code == 0, table.err
    check_table(table.out)
    check_table(table.err)
    check_json(cli("brief", trace, "--format", "json").out)
    check_markdown(cli("brief", trace, "--format", "markdown").out)
