"""`opscope ranks`: per-rank figures and cross-rank aggregates checked against the raw JSON of the 8-rank DLRM
job, rank discovery, straggler and collective skew on hand-made traces, bad input."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

import opscope
import reference as ref
from conftest import TRACES, corpus_path
from handmade_traces import cpu_op, document, kernel, launch, step, write
from opscope.analysis.base.durations import merge_named
from opscope.analysis.compare.diff import DiffOptions, diff_traces
from opscope.analysis.compare.ranks import RanksOptions, compare_ranks, rank_from_name, rank_partial
from opscope.cli.main import main

DLRM = "param/dlrm_kineto"


def _dlrm_files() -> list[Path]:
    corpus_path(f"{DLRM}/worker0_step_12.1694128201545.pt.trace.json")
    return sorted((TRACES / DLRM).glob("*.json"))


@pytest.fixture(scope="module")
def dlrm_json() -> dict:
    folder = _dlrm_files()[0].parent
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["-q", "ranks", str(folder), "--format", "json", "--top", "0", "--jobs", "1"]) == 0
    return json.loads(buf.getvalue())


def test_dlrm_ranks_found_from_distributed_info(dlrm_json) -> None:
    assert dlrm_json["schema"] == "opscope.ranks/1"
    assert [r["rank"] for r in dlrm_json["ranks"]] == list(range(8))
    assert {r["rank_source"] for r in dlrm_json["ranks"]} == {"distributedInfo"}
    assert dlrm_json["complete"] is True and dlrm_json["missing_ranks"] == [] and dlrm_json["world_size"] == 8


def test_dlrm_per_rank_figures_match_raw_json(dlrm_json) -> None:
    for path, row in zip(_dlrm_files(), dlrm_json["ranks"]):
        events = ref.load(path)
        assert ref.load_doc(path)["distributedInfo"]["rank"] == row["rank"]
        windows = ref.steps(events)
        steps = len(windows)
        gpu = ref.gpu_events(events)
        kernels = [e for e in gpu if e["cat"] == "kernel"]
        comm = [e for e in kernels if ref.COMM.search(e["name"].lower())]
        compute = [e for e in kernels if not ref.COMM.search(e["name"].lower())]
        busy = ref.busy_in(gpu, windows)
        length = sum(hi - lo for lo, hi in windows)
        assert row["steps"] == steps
        assert row["step_us"] * 1e3 == length / steps
        assert row["busy_us"] * 1e3 == busy / steps
        assert row["communication_us"] * 1e3 == ref.busy_in(comm, windows) / steps
        assert row["compute_us"] * 1e3 == ref.busy_in(compute, windows) / steps
        overlap = ref.busy_in(comm, windows) + ref.busy_in(compute, windows) - ref.busy_in(kernels, windows)
        assert row["overlap_us"] * 1e3 == overlap / steps
        assert row["idle_us"] * 1e3 == (length - busy) / steps  # one GPU per rank
        assert row["utilization"] == pytest.approx(busy / length, abs=1e-6)


def test_dlrm_cross_rank_kernels_equal_per_file_results_merged_by_hand(dlrm_json) -> None:
    per_file = []
    for path in _dlrm_files():
        events = ref.load(path)
        by_name: dict[str, list[int]] = defaultdict(list)
        for e in ref.scoped_gpu(events, per_step=True):
            by_name[e["name"]].append(ref.ns(e["dur"]))
        per_file.append(by_name)
    names = set().union(*per_file)
    assert {k["name"] for k in dlrm_json["kernels"]} == names
    for row in dlrm_json["kernels"]:
        durs = [d for table in per_file for d in table.get(row["name"], [])]
        assert row["calls"] == len(durs)
        assert row["total_us"] * 1e3 == sum(durs)
        assert row["call_min_us"] * 1e3 == min(durs) and row["call_max_us"] * 1e3 == max(durs)
        per_rank = [sum(table.get(row["name"], [])) for table in per_file]  # one step per rank
        assert [v * 1e3 for v in row["per_rank_us"]] == per_rank
        assert row["max_us"] * 1e3 == max(per_rank) and row["min_us"] * 1e3 == min(per_rank)
        assert row["median_us"] * 1e3 == statistics.median(per_rank)
        assert row["worst_rank"] == per_rank.index(max(per_rank))
        ordered = sorted(durs)
        exact_p50 = ordered[(len(ordered) - 1) // 2]
        assert abs(row["call_p50_us"] * 1e3 - exact_p50) <= 0.01 * exact_p50 + 1


def test_partials_merged_by_hand_equal_the_report() -> None:
    partials = [rank_partial(opscope.load(p)) for p in _dlrm_files()]
    report = compare_ranks(partials, None)
    merged = merge_named(dict(p.kernels) for p in partials)
    for spread in compare_ranks(partials, RanksOptions(top=0)).kernels:
        stats = merged[spread.name]
        assert (spread.calls, spread.total_ns, spread.call_min_ns, spread.call_max_ns) == (
            stats.count,
            stats.total_ns,
            stats.min_ns,
            stats.max_ns,
        )
        assert spread.call_p99_ns == stats.sketch.quantile(0.99)
    assert report.skew is not None and report.skew.matched > 0 and report.skew.unmatched == 0


def test_parallel_processes_give_the_same_result(cli, dlrm_json) -> None:
    result = cli("-q", "ranks", *_dlrm_files(), "--format", "json", "--top", "0", "--jobs", "2")
    assert result.code == 0, result.err
    parallel = json.loads(result.out)
    serial = dict(dlrm_json)
    for data in (parallel, serial):
        for row in data["ranks"]:
            row.pop("path")
    assert parallel == serial


def _rank_doc(
    rank: int | None,
    world: int | None,
    compute_us: float,
    comm: list[tuple[float, float]],
    base_ns: int | None = None,
    device: str = "Hand-made GPU",
) -> dict:
    """hand-made: one 1000 us step with a compute kernel and NCCL kernels (start, duration) on another stream."""
    events = [step(1, 1000, 1000), launch(1001, 1), kernel("gemm_kernel", 1005, compute_us, 1)]
    for i, (start, dur) in enumerate(comm, start=2):
        events += [
            launch(start - 3, i),
            kernel("ncclKernel_AllReduce_RING_LL_Sum_float", start, dur, i, stream=20),
        ]
    return document(events, rank=rank, world_size=world, base_ns=base_ns, device=device)


def test_skew_and_straggler_on_hand_made_ranks(tmp_path) -> None:
    # rank 2 computes 300 us and reaches both collectives last; its peers wait inside their NCCL kernels.
    # Clocks differ: each rank's base time shifts its timestamps, so starts are compared after adding it.
    base = 1_700_000_000_000_000_000
    specs = {
        0: (100, [(1200, 250), (1600, 100)], base),
        1: (110, [(1210, 240), (1610, 90)], base - 10_000),
        2: (300, [(1440, 10), (1690, 10)], base + 5_000),
    }
    paths = [write(tmp_path / f"r{r}.json", _rank_doc(r, 3, c, comm, b)) for r, (c, comm, b) in specs.items()]
    report = compare_ranks([rank_partial(opscope.load(p, cache=False)) for p in paths])
    starts = {r: [(s * 1000 + b) for s, _ in comm] for r, (_, comm, b) in specs.items()}
    skews = sorted(max(starts[r][k] for r in starts) - min(starts[r][k] for r in starts) for k in range(2))
    assert report.skew is not None and report.skew.aligned
    assert report.skew.matched == 2 and report.skew.max_ns == skews[-1]
    assert report.skew.p50_ns == statistics.median(skews)
    assert report.skew.latest_rank_counts == ((2, 2),)
    assert report.straggler is not None and report.straggler.rank == 2
    assert report.straggler.slowest_compute_rank == 2 and report.straggler.shortest_wait_rank == 2
    assert report.ranks[2].compute_ns == 300_000 and report.ranks[2].comm_ns == 20_000


def test_rank_from_file_names_then_order(tmp_path, cli) -> None:
    assert [
        rank_from_name(n) for n in ("a_rank-3.json", "rank12.json", "worker 4.json", "job_5.json", "x.json")
    ] == [3, 12, 4, 5, None]
    for r in (1, 0):
        write(tmp_path / f"trace_rank{r}.json", _rank_doc(None, None, 100, [(1200, 50)]))
    data = json.loads(cli("ranks", tmp_path, "--format", "json", "--no-cache").out)
    assert [(r["rank"], r["rank_source"], Path(r["path"]).name) for r in data["ranks"]] == [
        (0, "file name", "trace_rank0.json"),
        (1, "file name", "trace_rank1.json"),
    ]
    write(tmp_path / "extra.json", _rank_doc(None, None, 100, [(1200, 50)]))
    data = json.loads(cli("ranks", tmp_path, "--format", "json", "--no-cache").out)
    assert [(r["rank"], r["rank_source"]) for r in data["ranks"]] == [
        (0, "order"),
        (1, "order"),
        (2, "order"),
    ]


def test_duplicate_and_missing_ranks(tmp_path, cli) -> None:
    write(tmp_path / "a.json", _rank_doc(0, 4, 100, [(1200, 50)]))
    write(tmp_path / "b.json", _rank_doc(0, 4, 100, [(1200, 50)]))
    result = cli("ranks", tmp_path, "--no-cache")
    assert result.code == 2 and "rank 0 appears twice" in result.err and result.err.count("\n") == 1
    write(tmp_path / "b.json", _rank_doc(2, 4, 100, [(1200, 50)], device="Other GPU"))
    result = cli("ranks", tmp_path, "--no-cache", "--format", "json")
    assert result.code == 0
    data = json.loads(result.out)
    assert data["complete"] is False and data["missing_ranks"] == [1, 3]
    assert data["missing_ranges"] == "1, 3"
    assert any("2 of 4 ranks missing" in w for w in data["warnings"]) and "missing" in result.err
    assert any("different devices" in w for w in data["warnings"])
    table = cli("ranks", tmp_path, "--no-cache").out
    assert "INCOMPLETE" in table and "missing: 1, 3" in table


def test_bad_inputs(tmp_path, cli) -> None:
    assert cli("ranks", tmp_path).code == 2  # empty folder
    (tmp_path / "bad.json").write_text("{not json")
    result = cli("ranks", tmp_path / "bad.json", "--no-cache")
    assert result.code == 2 and result.err.startswith("opscope: error:")
    assert (
        cli(
            "ranks", corpus_path(f"{DLRM}/worker0_step_12.1694128201545.pt.trace.json"), "--threshold", "x"
        ).code
        == 2
    )


def test_copies_of_one_rank_are_reported_as_duplicates(tmp_path, cli) -> None:
    source = _dlrm_files()[0]
    for i in range(2):
        shutil.copy(source, tmp_path / f"copy{i}.json")
    result = cli("ranks", tmp_path, "--jobs", "1")
    assert result.code == 2 and "appears twice" in result.err


def test_step_lookalikes_are_operators_in_ranks_as_in_diff_and_ops(tmp_path) -> None:
    # One step-marker pattern everywhere (`windows.STEP_NAME`, ^ProfilerStep#\d+$): an op whose name only starts
    # with "ProfilerStep#" is an operator. Before issue 17 `ranks` dropped it by prefix while `diff` and `ops`
    # counted it; now all three count it, and the real marker stays out of all three.
    doc = _rank_doc(0, 1, 100, [(1200, 50)])
    doc["traceEvents"] += [cpu_op("ProfilerStep#warmup", 1000.5, 10), cpu_op("aten::mm", 1100, 20)]
    trace = opscope.load(write(tmp_path / "r0.json", doc), cache=False)
    ops = dict(rank_partial(trace).ops)
    assert (ops["ProfilerStep#warmup"].count, ops["ProfilerStep#warmup"].total_ns) == (1, 10_000)
    assert set(ops) == {"ProfilerStep#warmup", "aten::mm"}
    diff = diff_traces(trace, trace, DiffOptions())
    rows = {r.name: (r.calls_before, r.cpu_before_ns) for r in diff.ops}
    assert rows == {"ProfilerStep#warmup": (1, 10_000), "aten::mm": (1, 20_000)}
    assert ref.op_totals(ref.load(tmp_path / "r0.json"), per_step=True) == {
        "ProfilerStep#warmup": (1, 10_000),
        "aten::mm": (1, 20_000),
    }


def test_each_trace_is_read_once_for_ranks_and_diff(monkeypatch, cli) -> None:
    """The memory peaks come from the same read as the rank (or diff) figures: reading every trace a second
    time cost as much again with --no-cache."""
    import opscope.scale.tasks as tasks

    reads: list[str] = []
    real = tasks.load

    def counting(path, *args, **kwargs):
        reads.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tasks, "load", counting)
    files = _dlrm_files()[:3]
    assert cli("-q", "ranks", *files, "--no-cache", "--jobs", "1", "--format", "json").code == 0
    assert sorted(reads) == sorted(str(f.resolve()) for f in files)
    reads.clear()
    assert cli("-q", "diff", *files[:2], "--no-cache", "--jobs", "1", "--format", "json").code == 0
    assert sorted(reads) == sorted(str(f.resolve()) for f in files[:2])
