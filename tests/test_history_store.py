"""The history database on SQLite and PostgreSQL: migrations from empty, another schema version, another tool's
database, unreachable servers, idempotent and atomic adds, two processes adding at once, prune; and the stored
figures against an independent recomputation from the raw trace (tests/reference.py)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import reference
from conftest import REPO, corpus_path
from history_support import ALEXNET, BERT, BERT_MI300, db, perturbed, real_trace  # noqa: F401
from opscope.errors import InputError
from opscope.history import metrics as metrics_module
from opscope.history.api import History
from opscope.history.keys import MAX_KEY_CHARS, normalise, series_key
from opscope.history.schema import SCHEMA_VERSION, VERSION_TABLE
from opscope.history.store import HistoryError, Store

pytestmark = pytest.mark.corpus
MINITOY = "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # 2 non-empty ProfilerSteps


def raw_sql(url: str, sql: str) -> None:
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql)
    else:
        with sqlite3.connect(url) as conn:
            conn.execute(sql)


def test_migrates_an_empty_database(db) -> None:  # noqa: F811
    if not db.startswith("postgresql://"):
        Path(db).touch()  # an existing empty file is an empty database
    store = Store(db)
    with store.transaction() as tx:
        assert tx.execute(f"SELECT version FROM {VERSION_TABLE}") == [(SCHEMA_VERSION,)]
        assert tx.execute("SELECT COUNT(*) FROM opscope_runs") == [(0,)]
    store.close()
    Store(db).close()  # opening again migrates nothing
    if not db.startswith("postgresql://"):
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_another_schema_version_is_one_line_error(db, cli) -> None:  # noqa: F811
    Store(db, create=True).close()
    raw_sql(db, f"UPDATE {VERSION_TABLE} SET version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        History(db).runs()
    result = cli("history", "list", "--db", db)
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and "upgrade opscope" in result.err


def test_another_tools_sqlite_file_is_refused_and_left_untouched(tmp_path, cli) -> None:
    copy = tmp_path / "nsys.sqlite"
    shutil.copyfile(corpus_path("pipit/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"), copy)
    before = copy.read_bytes()
    for args in (("list",), ("add", corpus_path(BERT), "--no-git")):
        result = cli("history", *args, "--db", copy)
        assert result.code == 2 and result.err.count("\n") == 1
        assert "not an opscope history database" in result.err
    assert copy.read_bytes() == before  # not even switched to WAL
    assert not (tmp_path / "nsys.sqlite-wal").exists()


@pytest.mark.parametrize(
    "url", ["postgresql://opscope@127.0.0.1:1/nothing", "postgresql://who:secret@no-such-host.invalid/db"]
)
def test_unreachable_server_is_one_line_error_without_password(url, cli) -> None:
    result = cli("history", "list", "--db", url)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("opscope: error: cannot connect to postgresql://")
    assert result.err.count("\n") == 1 and "secret" not in result.err


def test_missing_sqlite_history_for_reading(tmp_path, cli) -> None:
    result = cli("history", "check", "--db", tmp_path / "none.sqlite")
    assert result.code == 2 and "no history database" in result.err and result.err.count("\n") == 1
    assert not (tmp_path / "none.sqlite").exists()


def test_add_is_idempotent_by_content(db, tmp_path) -> None:  # noqa: F811
    copy = tmp_path / "same-bytes.json.gz"
    shutil.copyfile(corpus_path(BERT), copy)
    with History(db) as history:
        first = history.add(corpus_path(BERT), git=False)
        again = history.add(corpus_path(BERT), {"extra": "tag"}, git=False)
        renamed = history.add(copy, git=False)
        trace = perturbed(7)
        in_memory = [history.add(trace, git=False), history.add(trace, git=False)]
        runs = history.runs()
    assert first.new and not again.new and not renamed.new
    assert first.run_id == again.run_id == renamed.run_id
    assert in_memory[0].new and not in_memory[1].new and in_memory[0].run_id == in_memory[1].run_id
    assert len(runs) == 2 and "extra" not in runs[0].tags


def test_non_trace_file_writes_nothing(db, tmp_path, cli) -> None:  # noqa: F811
    junk = tmp_path / "notes.txt"
    junk.write_text("not a trace\n")
    result = cli("history", "add", corpus_path(BERT), junk, "--db", db, "--no-git")
    # issue 32: reported and skipped (one line for it, one for the count), exit 1; the others are added
    assert result.code == 1 and result.err.count("\n") == 2 and "not a trace" in result.err
    with History(db) as history:
        assert [r.path for r in history.runs()] == [str(corpus_path(BERT))]  # the one before it stays


def test_a_failing_write_leaves_no_half_run(db, monkeypatch) -> None:  # noqa: F811
    """The metric rows clash on their primary key after the run row went in: the whole add rolls back."""
    original = metrics_module.extract

    def doubled(trace):
        got = original(trace)
        return metrics_module.RunMetrics(rows=got.rows + got.rows[:1], names=got.names, facts=got.facts)

    monkeypatch.setattr("opscope.history.api.extract", doubled)
    with History(db) as history:
        with pytest.raises(HistoryError):
            history.add(perturbed(1), {"k": "v"}, git=False)
        monkeypatch.setattr("opscope.history.api.extract", original)
        assert history.runs() == []
        added = history.add(perturbed(1), git=False)  # the database is still usable
        assert added.new and len(history.runs()) == 1


def test_two_processes_adding_at_once(db, tmp_path) -> None:  # noqa: F811
    """Real processes, each adding two traces (one of them the same), started together."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    script = "from opscope.cli.main import main; import sys; sys.exit(main(sys.argv[1:]))"
    jobs = [
        [
            sys.executable,
            "-c",
            script,
            "history",
            "add",
            str(corpus_path(BERT)),
            str(corpus_path(ALEXNET)),
            "--db",
            db,
            "--no-git",
            "--format",
            "json",
        ],
        [
            sys.executable,
            "-c",
            script,
            "history",
            "add",
            str(corpus_path(BERT_MI300)),
            str(corpus_path(BERT)),
            "--db",
            db,
            "--no-git",
            "--format",
            "json",
        ],
    ]
    procs = [
        subprocess.Popen(
            job, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
        )
        for job in jobs
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    ids = [{r["path"]: r["run_id"] for r in json.loads(o[0])["runs"]} for o in outs]
    assert ids[0][str(corpus_path(BERT))] == ids[1][str(corpus_path(BERT))]
    with History(db) as history:
        runs = history.runs()
        assert sorted(Path(r.path or "").name for r in runs) == sorted(
            Path(p).name for p in (corpus_path(BERT), corpus_path(ALEXNET), corpus_path(BERT_MI300))
        )
        assert len(history.frame()["run_id"].unique()) == 3


def test_prune_keeps_the_newest(db) -> None:  # noqa: F811
    with History(db) as history:
        ids = [history.add(perturbed(seed), git=False).run_id for seed in range(4)]
        assert history.prune(2) == ids[:2]
        assert [r.id for r in history.runs()] == ids[2:]
        assert set(history.frame()["run_id"].unique()) == set(ids[2:])
        assert history.add(perturbed(9), git=False).run_id > ids[-1]  # ids are never reused


def test_prune_drops_full_names_no_remaining_figure_uses(db) -> None:  # noqa: F811
    long_key = series_key(LONG_NAME)[0]
    with History(db) as history:
        history.add(renamed(3), git=False)
        history.add(renamed(4), git=False)
        others = set(history.names()) - {long_key}  # the BERT trace's own long kernel names
        history.add(perturbed(5), git=False)
        assert history.names()[long_key] == LONG_NAME[:-3]
        history.prune(2)  # the newer renamed run still uses the name
        assert history.names()[long_key] == LONG_NAME[:-3]
        history.prune(1)
        assert set(history.names()) == others  # still used by the remaining run
        history.prune(0)
        assert history.names() == {}


def test_git_tags_are_added_in_a_checkout(db, tmp_path, monkeypatch) -> None:  # noqa: F811
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "project"
    repo.mkdir()
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=repo, check=True)
    (repo / "f").write_text("x")
    subprocess.run([*git, "add", "f"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.chdir(repo)
    with History(db) as history:
        history.add(perturbed(1), {"model": "bert"})
        history.add(perturbed(2), {"commit": "given"})
        (first, second) = history.runs()
    assert first.tags == {"commit": head, "branch": "main", "dirty": "false", "model": "bert"}
    assert second.commit == "given"  # a tag given on the command line wins


# ---- what a run stores, against the raw events ---------------------------------------------------------------------


def test_kernel_figures_match_the_raw_events() -> None:
    path = corpus_path(ALEXNET)
    got = metrics_module.extract(real_trace(ALEXNET))
    stored = defaultdict(dict)
    for scope, key, metric, value in got.rows:
        stored[(scope, key)][metric] = value
    durations: dict[str, list[int]] = defaultdict(list)
    for event in reference.gpu_events(reference.load(path)):
        durations[series_key(event["name"])[0]].append(reference.ns(event["dur"]))
    total = sum(sum(v) for v in durations.values())
    assert {k for s, k in stored if s == "kernel"} == set(durations)
    for key, values in durations.items():
        row = stored[("kernel", key)]
        assert row["calls"] == len(values)
        assert row["total_us"] == pytest.approx(sum(values) / 1e3, abs=1e-9)
        assert row["mean_us"] == pytest.approx(sum(values) / len(values) / 1e3)
        assert row["median_us"] == pytest.approx(float(np.median(values)) / 1e3)
        assert row["p95_us"] == pytest.approx(float(np.percentile(values, 95)) / 1e3)
        assert row["share"] == pytest.approx(sum(values) / total)
    assert stored[("global", "run")]["gpu_time_us"] == pytest.approx(total / 1e3)
    assert got.facts.gpu_name == "NVIDIA A100-PG509-200" and got.facts.source_format == "kineto"


def test_step_figures_match_the_raw_windows() -> None:
    got = metrics_module.extract(real_trace(MINITOY))
    values = {(s, k, m): v for s, k, m, v in got.rows}
    windows = reference.step_windows(reference.load(corpus_path(MINITOY)))
    walls = sorted((hi - lo) / 1e3 for _, lo, hi in windows)
    assert len(walls) == 2 and values[("global", "run", "steps")] == 2
    assert values[("global", "run", "step_time_us")] == pytest.approx(float(np.median(walls)))
    assert values[("step", "1", "wall_us")] == pytest.approx((windows[0][2] - windows[0][1]) / 1e3)
    assert values[("global", "run", "step_time_p95_us")] == pytest.approx(float(np.percentile(walls, 95)))


def test_keys_normalise_triton_suffixes_whitespace_and_long_names() -> None:
    assert (
        normalise("triton_poi_fused_add_mul_0")
        == normalise("triton_poi_fused_add_mul_17")
        == "triton_poi_fused_add_mul"
    )
    assert normalise("  void  gemm<int,\n float>  ") == "void gemm<int, float>"
    assert normalise("ampere_sgemm_128x64_nn_1") == "ampere_sgemm_128x64_nn_1"  # only Triton's counter goes
    long = "k" * (MAX_KEY_CHARS + 50)
    key, full = series_key(long)
    assert full == long and len(key) < MAX_KEY_CHARS and key != series_key(long + "x")[0]
    assert series_key("short") == ("short", None)


LONG_NAME = "triton_per_fused_" + "x" * 400 + "_12"


def renamed(seed: int):
    """A hand-made rename of one kernel of the (perturbed) real trace to a 400-character name."""
    import polars as pl

    from opscope.model.schema import Col
    from opscope.model.trace import Trace

    base = perturbed(seed)
    name = pl.col(Col.NAME).cast(pl.String)
    events = base.events.with_columns(
        pl.when(name.str.starts_with("void at::native::(anonymous namespace)::vectorized_layer_norm"))
        .then(pl.lit(LONG_NAME))
        .otherwise(name)
        .cast(pl.Categorical)
        .alias(Col.NAME)
    )
    return Trace.from_frame(base.meta, events)


def test_long_kernel_names_keep_their_full_name(db) -> None:  # noqa: F811
    long = LONG_NAME
    with History(db) as history:
        history.add(renamed(3), git=False)
        series = history.series("kernel", "x{300}")
    assert series.height == 1 and series["name"][0] == long[:-3] and len(series["key"][0]) < MAX_KEY_CHARS


def test_reading_a_missing_trace_is_an_input_error(db) -> None:  # noqa: F811
    with History(db) as history, pytest.raises(InputError, match="no such trace file"):
        history.add("/nonexistent/trace.json")


def test_busy_sqlite_errors_are_retried(tmp_path) -> None:
    """SQLite can answer 'database is locked' without waiting for its busy timeout (seen on CI while two
    processes created the same history): such errors are DatabaseBusy, and the operation is run again."""
    import sqlite3

    from opscope.history.store import DatabaseBusy, HistoryError, _sqlite_error, retrying

    path = tmp_path / "locked.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0)
    with pytest.raises(sqlite3.OperationalError) as caught:
        other.execute("SELECT * FROM t")
    assert isinstance(_sqlite_error(str(path), caught.value), DatabaseBusy)
    holder.execute("COMMIT")
    other.close()
    holder.close()
    assert not isinstance(_sqlite_error("x", sqlite3.DatabaseError("file is not a database")), DatabaseBusy)

    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise DatabaseBusy("history database x: database is locked")
        return "done"

    assert retrying(flaky) == "done" and len(calls) == 3

    def always() -> str:
        raise DatabaseBusy("history database x: database is locked")

    with pytest.raises(HistoryError, match="locked"):
        retrying(always, timeout_s=0.05)


@pytest.mark.corpus
def test_peak_memory_is_stored_and_matches_the_raw_events() -> None:
    """Global peak allocated / reserved bytes, recomputed from the `[memory]` events' allocator totals."""
    import memory_reference as mref

    qwen = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
    values = {(s, k, m): v for s, k, m, v in metrics_module.extract(real_trace(qwen)).rows}
    devices = mref.by_device(reference.load(corpus_path(qwen)))
    gpus = {d: items for d, items in devices.items() if d.startswith("cuda")}
    assert gpus, "the Qwen H100 trace was profiled with profile_memory=True"
    allocated = max(int(e["args"]["Total Allocated"]) for items in gpus.values() for _, _, e in items)
    reserved = max(int(e["args"]["Total Reserved"]) for items in gpus.values() for _, _, e in items)
    assert values[("global", "run", "peak_allocated_bytes")] == allocated
    assert values[("global", "run", "peak_reserved_bytes")] == reserved
    no_memory = {(s, k, m) for s, k, m, _ in metrics_module.extract(real_trace(ALEXNET)).rows}
    assert ("global", "run", "peak_allocated_bytes") not in no_memory


# ---- the run's facts, against the raw document -----------------------------------------------------------------------

DLRM_RANK0 = "param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json"  # 245 kernels, all on device 0


def raw_facts(relative: str) -> tuple[set[int | None], list[str]]:
    """The devices of the raw GPU events and the names in deviceProperties, read from the JSON itself."""
    doc = reference.load_doc(corpus_path(relative))
    used = {g.device for g in reference.gpu(reference.load(corpus_path(relative)))}
    props = doc.get("deviceProperties", []) if isinstance(doc, dict) else []
    return used, [str(p["name"]) for p in props]


def test_gpu_count_counts_the_devices_that_ran_work() -> None:
    """DLRM rank 0: deviceProperties lists the node's 8 V100s, but every GPU event ran on device 0."""
    used, listed = raw_facts(DLRM_RANK0)
    assert used == {0} and len(listed) == 8  # what the test relies on, from the raw document
    facts = metrics_module.run_facts(real_trace(DLRM_RANK0))
    assert facts.gpu_count == 1 and facts.gpu_name == listed[0] == "Tesla V100-SXM2-32GB"


def test_gpu_facts_of_a_single_gpu_trace() -> None:
    used, listed = raw_facts(BERT)
    facts = metrics_module.run_facts(real_trace(BERT))
    assert (facts.gpu_count, facts.gpu_name) == (len(used), listed[0]) == (1, "NVIDIA H100 80GB HBM3")
    assert facts.cuda_version == "12.4" and facts.hip_version is None and facts.tags() == {}


def test_gpu_facts_fall_back_to_the_device_table_without_event_devices() -> None:
    """The DLRM trace with the device column emptied: the 8 entries of deviceProperties are all there is."""
    import polars as pl

    from opscope.model.schema import Col
    from opscope.model.trace import Trace

    base = real_trace(DLRM_RANK0)
    events = base.events.with_columns(pl.lit(None, dtype=base.events.schema[Col.DEVICE]).alias(Col.DEVICE))
    facts = metrics_module.run_facts(Trace.from_frame(base.meta, events))
    assert facts.gpu_count == 8 and facts.gpu_name == "Tesla V100-SXM2-32GB"


def test_host_is_null_when_the_trace_records_none(db) -> None:  # noqa: F811
    """Kineto traces carry no host name; the machine that adds the trace is not it."""
    assert metrics_module.run_facts(real_trace(ALEXNET)).host is None
    with History(db) as history:
        history.add(corpus_path(ALEXNET), git=False)
        (run,) = history.runs()
    assert run.host is None and run.to_dict()["host"] is None


def nested_items(value: object) -> list[tuple[str, object]]:
    """Every (key, value) of a JSON document's objects, at any depth."""
    if isinstance(value, dict):
        return [(str(k), v) for k, v in value.items()] + [i for v in value.values() for i in nested_items(v)]
    if isinstance(value, list):
        return [i for v in value for i in nested_items(v)]
    return []


def test_rocm_trace_stores_its_hip_runtime_version(db) -> None:  # noqa: F811
    """Kineto AMD traces write HIP_VERSION (major * 10^7 + minor * 10^5 + patch) as `hip_runtime_version`; the
    same trace's metadata spells it out ("6.4.43483")."""
    doc = reference.load_doc(corpus_path(BERT_MI300))
    spelled = [v for k, v in nested_items(doc["metadata"]) if k == "hip_runtime_version"]
    assert int(doc["hip_runtime_version"]) == 60443483 and spelled == ["6.4.43483"]
    assert "cuda_runtime_version" not in doc
    facts = metrics_module.run_facts(real_trace(BERT_MI300))
    assert facts.hip_version == "6.4.43483" and facts.cuda_version is None
    with History(db) as history:
        history.add(corpus_path(BERT_MI300), git=False)
        history.add(corpus_path(BERT), {"hip_version": "given"}, git=False)
        (rocm, cuda) = history.runs()
        assert [r.id for r in history.runs({"hip_version": "6.4.43483"})] == [rocm.id]
    assert rocm.tags == {"hip_version": "6.4.43483"} and rocm.cuda_version is None
    assert cuda.tags == {"hip_version": "given"}  # a tag given on the command line wins


# ---- per-call spread of operators and categories, against the raw events ---------------------------------------------


def raw_op_calls(events: list[dict]) -> dict[str, list[int]]:
    """Op name -> the GPU time of each of its instances: the GPU events whose launch lies inside the instance
    (the innermost op of the launch and its enclosing ops, by the stack sweep), each counted for the outermost
    instance of a name only; ProfilerStep#N are instances of "ProfilerStep#*"."""
    raw = reference.link(events)

    def name(i: int) -> str:
        return "ProfilerStep#*" if reference.is_step(events[i]) else str(events[i]["name"])

    per_instance: dict[int, int] = defaultdict(int)
    for g in raw.gpu:
        outermost: dict[str, int] = {}
        op = raw.op[g]
        while op is not None:
            outermost[name(op)] = op  # walking outwards: the last one seen is the outermost
            op = raw.op_parent.get(op)
        for instance in outermost.values():
            per_instance[instance] += reference.gpu_dur(events, g)
    calls: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("cat") in reference.OP_CATS and reference.is_x(e):
            calls[name(i)].append(per_instance.get(i, 0))
    return calls


@pytest.mark.parametrize(
    "relative", [ALEXNET, MINITOY]
)  # MINITOY: two ProfilerStep#N, one "ProfilerStep#*" row
def test_op_spread_matches_the_raw_events(relative: str) -> None:
    events = reference.load(corpus_path(relative))
    stored: dict[str, dict[str, float]] = defaultdict(dict)
    for scope, key, metric, value in metrics_module.extract(real_trace(relative)).rows:
        if scope == "op":
            stored[key][metric] = value
    calls = raw_op_calls(events)
    assert set(stored) == {series_key(n, kernel=False)[0] for n in calls}
    for op, values in calls.items():
        row = stored[series_key(op, kernel=False)[0]]
        assert row["calls"] == len(values)
        assert row["total_us"] == pytest.approx(sum(values) / 1e3, abs=1e-9)  # the calls add up to the total
        assert row["mean_us"] == pytest.approx(sum(values) / len(values) / 1e3, abs=1e-9)
        assert row["median_us"] == pytest.approx(float(np.median(values)) / 1e3, abs=1e-9)
        assert row["p95_us"] == pytest.approx(float(np.percentile(values, 95)) / 1e3, abs=1e-9)
    assert sum(len(set(v)) > 1 for v in calls.values()) > 5  # calls of one op do differ: a non-trivial check


def test_category_spread_matches_the_raw_events() -> None:
    from opscope.analysis.kernels.categories import classify

    durations: dict[str, list[int]] = defaultdict(list)
    for g in reference.gpu(reference.load(corpus_path(ALEXNET))):
        durations[classify(g.name, g.kind)].append(g.end - g.start)
    stored: dict[str, dict[str, float]] = defaultdict(dict)
    for scope, key, metric, value in metrics_module.extract(real_trace(ALEXNET)).rows:
        if scope == "category":
            stored[key][metric] = value
    assert set(stored) == set(durations) and len(durations) >= 5
    for category, values in durations.items():
        row = stored[category]
        assert row["calls"] == len(values)
        assert row["total_us"] == pytest.approx(sum(values) / 1e3, abs=1e-9)
        assert row["mean_us"] == pytest.approx(sum(values) / len(values) / 1e3)
        assert row["median_us"] == pytest.approx(float(np.median(values)) / 1e3)
        assert row["p95_us"] == pytest.approx(float(np.percentile(values, 95)) / 1e3)
