"""Issue 18, operators and modules: ops ranked by self time (wrappers do not top the table), CPU time surfaced
in ops and diff (a DataLoader), summary --steps, the module-type view in the folded export. Figures are
recomputed from the raw events (tests/reference.py)."""

from __future__ import annotations

import json
from collections import defaultdict

import reference as ref
from conftest import corpus_path

QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
STEPPED = "hta/trace_compare_base_base.json.gz"  # steps 100 and 101, GPU work in both
WORKERS_0 = "kineto/tb_plugin_samples_resnet50_num_workers_0_worker0.1623143089861.pt.trace.json.gz"
WORKERS_4 = "kineto/tb_plugin_samples_resnet50_profiler_api_num_workers_4_worker0.pt.trace.json.gz"
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_ops_rank_by_self_time_so_wrappers_do_not_top_the_table(cli) -> None:
    path = corpus_path(QWEN)
    events = ref.load(path)
    raw = ref.link(events)
    gpu_self: dict[str, int] = defaultdict(int)  # GPU time launched directly inside each op name
    for g in raw.gpu:
        op = raw.op[g]
        if op is not None:
            name = events[op]["name"]
            gpu_self["ProfilerStep#*" if ref.STEP.match(name) else name] += ref.gpu_dur(events, g)
    data = json.loads(cli("ops", path, "--format", "json", "--top", "5", "--no-cache").out)
    assert data["sort"] == "self"
    names = [r["name"] for r in data["rows"]]
    assert "ProfilerStep#*" not in names
    assert names == [n for n, _ in sorted(gpu_self.items(), key=lambda kv: (-kv[1], kv[0]))][:5]
    old = json.loads(cli("ops", path, "--format", "json", "--top", "5", "--sort", "total", "--no-cache").out)
    assert old["rows"][0]["name"] == "ProfilerStep#*"  # the wrapper, still there when asked for


def test_ops_and_diff_surface_the_dataloader(cli) -> None:
    path = corpus_path(WORKERS_0)
    data = json.loads(cli("ops", path, "--format", "json", "--no-cache").out)
    top_cpu = data["cpu_rows"][0]
    assert top_cpu["name"] == DATALOADER and top_cpu["gpu_total_us"] == 0
    events = ref.load(path)
    raw_total = sum(ref.ns(e["dur"]) for e in events if e.get("name") == DATALOADER and ref.is_x(e))
    step_total = sum(hi - lo for _, lo, hi in ref.step_windows(events))
    assert abs(top_cpu["cpu_total_us"] * 1000 - raw_total) <= 1
    assert raw_total / step_total > 0.3  # a DataLoader taking over 30% of the steps
    table = cli("ops", path, "--no-cache", "--width", "200").out
    assert "Most CPU self time" in table and DATALOADER in table
    diff = cli("diff", corpus_path(WORKERS_4), path, "--no-cache", "--width", "220")
    assert diff.code == 0
    section = diff.out.split("Operators by CPU self time")[1]
    first = next(line for line in section.splitlines() if "DataLoader" in line or "aten::" in line)
    assert DATALOADER in first  # the biggest CPU change of the pair
    cpu_ops = json.loads(cli("diff", corpus_path(WORKERS_4), path, "--no-cache", "--format", "json").out)[
        "cpu_ops"
    ]
    assert cpu_ops["metric"] == "cpu_self" and cpu_ops["rows"][0]["name"] == DATALOADER


def test_summary_takes_steps(cli) -> None:
    path = corpus_path(STEPPED)
    events = ref.load(path)
    windows = ref.step_windows(events)
    step, lo, hi = windows[0]
    first = {corr: ref.ns(e["ts"]) for corr, e in ref.launches(events).items()}
    chosen = [
        e
        for e in ref.gpu_events(events)
        if lo <= first.get(ref.args(e).get("correlation"), ref.ns(e["ts"])) < hi
    ]
    want = ref.kernel_totals(chosen)
    data = json.loads(
        cli("summary", path, "--steps", str(step), "--top", "0", "--format", "json", "--no-cache").out
    )
    assert data["steps"] == str(step)
    assert {(r["name"], r["kind"]): (r["calls"], round(r["total_us"] * 1000)) for r in data["rows"]} == want
    whole = json.loads(cli("summary", path, "--top", "0", "--format", "json", "--no-cache").out)
    assert whole["totals"]["calls"] > data["totals"]["calls"]
    assert cli("summary", path, "--steps", "99", "--no-cache").code == 2


def test_folded_export_merges_module_instances(cli) -> None:
    path = corpus_path(QWEN)
    types = cli("export", path, "--folded", "--no-cache").out
    instances = cli("export", path, "--folded", "--modules", "instances", "--no-cache").out
    assert "nn.Module: Qwen2DecoderLayer;" in types and "Qwen2DecoderLayer_13" not in types
    assert "nn.Module: Qwen2DecoderLayer_13;" in instances
    total = lambda text: sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines())  # noqa: E731
    assert total(types) == total(instances)  # the same GPU time, fewer distinct stacks
    assert len(types.splitlines()) < len(instances.splitlines())
