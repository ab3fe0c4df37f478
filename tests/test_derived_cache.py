"""The link table and the critical path's CPU table kept beside the trace cache (issue 25 item 3,
ingest/derived.py): a second command reads them back, equal to a fresh computation; a stale, damaged or
unwritable store is never an error, only a recompute."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.base import linking
from opscope.analysis.base.codetag import code_tag
from opscope.analysis.critical_path import graph
from opscope.ingest.derived import DerivedStore, derived_folder, wait_for_saves

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.fixture
def cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "trace.pt.trace.json.gz"
    shutil.copyfile(corpus_path(V100), source)
    return source


def fresh_link(path: Path) -> linking.Linkage:
    return linking._link(opscope.load(path, cache=False))


def same(a: linking.Linkage, b: linking.Linkage) -> bool:
    return (
        a.stats == b.stats
        and a.gpu.equals(b.gpu)
        and a.scopes.equals(b.scopes)
        and a.gpu.schema == b.gpu.schema
    )


def read_back(
    path: Path, monkeypatch: pytest.MonkeyPatch, owner: object, private: str, compute: Callable[[Any], Any]
) -> tuple[Any, Any, Any]:
    """`compute` of the trace at `path` three times: first (it is kept beside the cache), then read back with
    `owner.private` (the computation) made to fail, then fresh without the cache."""
    first = compute(opscope.load(path))
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(owner, private, lambda *a, **k: pytest.fail(f"{private} computed again"))
        second = compute(opscope.load(path))
    return first, second, compute(opscope.load(path, cache=False))


def test_a_second_command_reads_the_link_table_back(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = linking.link(opscope.load(cached))
    wait_for_saves()  # the store is written on a thread of its own
    assert any(derived_folder(p).is_dir() for p in (Path(os.environ["OPSCOPE_CACHE_DIR"])).glob("*.parquet"))

    def no_linking(trace: object) -> linking.Linkage:
        raise AssertionError("linked again instead of reading the stored table")

    with monkeypatch.context() as m:
        m.setattr(linking, "_announced_link", no_linking)
        second = linking.link(opscope.load(cached))
    assert same(second, first) and same(second, fresh_link(cached))
    assert second.gpu.schema[linking.Col.NAME] == pl.Categorical or isinstance(
        second.gpu.schema[linking.Col.NAME], pl.Categorical
    )


def test_outputs_are_the_same_with_the_stored_table(cached: Path, cli) -> None:
    cold = cli("analyze", cached, "--format", "json")
    warm = cli("analyze", cached, "--format", "json")  # reads the stored link table
    uncached = cli("analyze", cached, "--format", "json", "--no-cache")
    assert cold.code == warm.code == uncached.code == 0
    assert json.loads(warm.out) == json.loads(cold.out) == json.loads(uncached.out)


def test_a_changed_trace_is_linked_again(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    linking.link(opscope.load(cached))
    shutil.copyfile(corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"), cached)
    calls = []
    real = linking._announced_link

    def counting(trace: opscope.Trace) -> linking.Linkage:
        calls.append(1)
        return real(trace)

    monkeypatch.setattr(linking, "_announced_link", counting)
    relinked = linking.link(opscope.load(cached))
    assert calls == [1] and same(relinked, fresh_link(cached))


def test_a_damaged_store_is_recomputed_and_an_unwritable_one_is_no_error(cached: Path) -> None:
    linking.link(opscope.load(cached))
    wait_for_saves()
    cache = Path(os.environ["OPSCOPE_CACHE_DIR"])
    damaged = list(cache.glob("*.parquet.derived/*/*.parquet"))
    assert damaged  # the store was written, so there is something to damage
    for part in damaged:
        part.write_bytes(b"not parquet")
    assert same(linking.link(opscope.load(cached)), fresh_link(cached))
    for folder in cache.glob("*.parquet.derived"):
        shutil.rmtree(folder)
        folder.write_text("a file where the store's folder would go")  # unwritable, even for root
    assert same(linking.link(opscope.load(cached)), fresh_link(cached))


@pytest.mark.parametrize(
    "program",
    [
        "from opscope.analysis.base.linking import _code_tag; print(_code_tag())",
        "from opscope.analysis.critical_path.graph import _cpu_key; print(_cpu_key())",
    ],
)
def test_the_code_tag_is_the_same_in_every_process(program: str) -> None:
    """Also under other hash seeds: a set's order (a constant `x in {...}`) varies with the seed."""
    import subprocess
    import sys

    tags = {
        subprocess.run(
            [sys.executable, "-c", program],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "1", "12345")
    }
    assert len(tags) == 1 and len(tags.pop().strip()) >= 16


def test_the_code_tag_follows_the_code_and_its_constants() -> None:
    """Hand-made modules: a changed function, a changed constant (also one imported by name), and a changed
    set inside a function each give another tag; the same code gives the same tag."""
    import types

    def module(source: str) -> types.ModuleType:
        made = types.ModuleType("hand_made")
        exec(compile(source, "hand_made", "exec"), made.__dict__)
        return made

    base = "PATTERN = 'a|b'\nKINDS = ('x', 'y')\ndef f(v):\n    return v in {'p', 'q'}\n"
    tags = {
        code_tag(module(source))
        for source in (
            base,
            base.replace("'a|b'", "'a|c'"),
            base.replace("('x', 'y')", "('x',)"),
            base.replace("{'p', 'q'}", "{'p', 'r'}"),
            base.replace("return v in", "return v not in"),
        )
    }
    assert len(tags) == 5
    assert code_tag(module(base)) == code_tag(module(base))


def test_results_of_other_code_are_removed_when_one_is_saved(cached: Path) -> None:
    """A result stored by other code (another tag, the same name) is removed once this code's is written;
    other names, and names that only start alike, are kept."""
    linking.link(opscope.load(cached))
    wait_for_saves()
    (store,) = Path(os.environ["OPSCOPE_CACHE_DIR"]).glob("*.parquet.derived")
    (mine,) = store.iterdir()
    stale = [store / "link-0123456789abcdef", store / "link-fedcba9876543210"]
    kept = [store / "links-0123456789abcdef", store / "other-0123456789abcdef"]
    for folder in stale + kept:
        shutil.copytree(mine, folder)
    shutil.rmtree(mine)  # this code's result is gone: the next command links and saves again
    linking.link(opscope.load(cached))
    wait_for_saves()
    assert sorted(p.name for p in store.iterdir()) == sorted([mine.name, *(p.name for p in kept)])


def test_a_second_command_reads_the_cpu_table_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The critical path's CPU table: stored by the first command, read back by the next (equal to a fresh
    computation, one chunk), the command's output the same either way and without the cache."""
    first = graph.cpu_table(opscope.load(cached))
    wait_for_saves()

    def no_table(trace: object, span: object = None) -> pl.DataFrame:
        raise AssertionError("computed again instead of reading the stored table")

    with monkeypatch.context() as m:
        m.setattr(graph, "_cpu_table", no_table)
        second = graph.cpu_table(opscope.load(cached))
    fresh = graph._cpu_table(opscope.load(cached, cache=False))
    assert second.equals(first) and second.equals(fresh) and second.schema == fresh.schema
    assert second.n_chunks() == 1
    outputs = [
        cli("critical-path", cached, "--format", "json", *extra) for extra in ((), (), ("--no-cache",))
    ]
    assert {o.code for o in outputs} == {0}
    assert json.loads(outputs[0].out) == json.loads(outputs[1].out) == json.loads(outputs[2].out)


def test_reading_one_result_does_not_wait_for_the_save_of_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hand-made store: while one key's save is held, reading another key answers at once (None: not stored);
    reading the held key waits for its save and then finds it."""
    import threading

    parquet = tmp_path / "cache.parquet"
    parquet.write_bytes(b"stand-in for a cache file")
    store = DerivedStore(parquet)
    release, writing, written = threading.Event(), threading.Event(), threading.Event()
    real = DerivedStore._save

    def held(self: DerivedStore, key: str, frames: dict[str, pl.DataFrame]) -> None:
        writing.set()
        release.wait(10)
        real(self, key, frames)
        written.set()

    monkeypatch.setattr(DerivedStore, "_save", held)
    store.save("slow-0123456789abcdef", {"part": pl.DataFrame({"a": [1, 2]})})
    assert writing.wait(10)
    assert store.load("other-0123456789abcdef") is None
    assert not written.is_set()  # it returned while the other save was held
    threading.Timer(0.2, release.set).start()
    loaded = store.load("slow-0123456789abcdef")
    assert loaded is not None and loaded["part"]["a"].to_list() == [1, 2]


def test_saves_of_one_key_at_once_leave_one_whole_result(tmp_path: Path) -> None:
    """Hand-made store: several threads saving the same key at once (`diff A A`: each trace's task keeps its
    advice) each write a temporary folder of their own; what is read back is one whole result, and no
    temporary folder is left behind."""
    import threading

    parquet = tmp_path / "cache.parquet"
    parquet.write_bytes(b"stand-in for a cache file")
    store = DerivedStore(parquet)
    frames = {f"part{i}": pl.DataFrame({"a": list(range(20_000))}) for i in range(4)}
    for round_ in range(10):
        key = f"same-{round_:016d}"
        start = threading.Barrier(6)

        def write(key: str = key, start: threading.Barrier = start) -> None:
            start.wait(5)
            store._save(key, frames)

        writers = [threading.Thread(target=write) for _ in range(6)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(30)
        loaded = store.load(key)
        assert loaded is not None and sorted(loaded) == sorted(frames)
        assert all(loaded[name].equals(frame) for name, frame in frames.items())
    assert not list(store.folder.glob(".tmp-*"))


def test_the_name_table_and_the_step_windows_are_read_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The (kind, name) table and the step windows, stored by the first command and read back by the next
    (their computations made to fail), equal to a fresh computation; `steps` the same either way."""
    from opscope.analysis.base import names, windows

    first = (names.kind_names(opscope.load(cached)), windows.marker_windows(opscope.load(cached)))
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(windows, "_marker_windows", lambda trace: pytest.fail("step windows computed again"))
        m.setattr(pl.LazyFrame, "group_by", lambda *a, **k: pytest.fail("name table computed again"))
        again = opscope.load(cached)
        second = (names.kind_names(again), windows.marker_windows(again))
    fresh = opscope.load(cached, cache=False)
    assert second[0].equals(first[0]) and second[0].equals(names.kind_names(fresh))
    assert second[1] == first[1] == windows.marker_windows(fresh) and len(second[1]) > 1
    outputs = [cli("steps", cached, "--format", "json", *extra) for extra in ((), (), ("--no-cache",))]
    assert {o.code for o in outputs} == {0}
    assert json.loads(outputs[0].out) == json.loads(outputs[1].out) == json.loads(outputs[2].out)


@pytest.mark.parametrize(
    ("module", "public", "private"),
    [
        ("opscope.analysis.timeline.syncs", "sync_calls", "_sync_calls"),
        ("opscope.analysis.timeline.syncs", "gpu_sync_events", "_gpu_sync_events"),
        ("opscope.analysis.critical_path.graph", "stream_waits", "_stream_waits"),
    ],
)
def test_small_tables_of_the_events_are_read_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch, module: str, public: str, private: str
) -> None:
    """The synchronising calls, Kineto's GPU sync records and the stream waits: stored by the first command,
    read back by the next (the computation made to fail), equal to a fresh computation."""
    import importlib

    owner = importlib.import_module(module)
    first = getattr(owner, public)(opscope.load(cached))
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(owner, private, lambda trace: pytest.fail(f"{public} computed again"))
        second = getattr(owner, public)(opscope.load(cached))
    fresh = getattr(owner, private)(opscope.load(cached, cache=False))
    assert second.schema == fresh.schema and second.sort(second.columns).equals(fresh.sort(fresh.columns))
    assert first.height == second.height


@pytest.mark.parametrize("options", [{}, {"by_shape": True}, {"sort": "total"}])
def test_the_op_table_is_read_back(cached: Path, monkeypatch: pytest.MonkeyPatch, options: dict) -> None:
    """The whole trace's op table: stored by the first command, read back by the next (its computation made
    to fail), equal to a fresh computation without the cache, floats and null shapes included; a selection
    (steps, devices) or a link table other than the trace's own is computed, never read back."""
    from opscope.analysis.attribution import ops

    opts = ops.OpOptions(top=0, **options)
    first = ops.op_stats(opscope.load(cached), opts)
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(ops, "_op_stats", lambda *a: pytest.fail("op table computed again"))
        again = opscope.load(cached)
        second = ops.op_stats(again, opts)
        top = ops.op_stats(again, ops.OpOptions(top=5, **options))
    fresh = opscope.load(cached, cache=False)
    assert second == first == ops.op_stats(fresh, opts) and len(second.rows) > 10 and second.cpu_rows
    assert top.rows == second.rows[:5] and top.total_rows == second.total_rows
    computed: list[object] = []
    real = ops._op_stats
    with monkeypatch.context() as m:
        m.setattr(ops, "_op_stats", lambda *a: computed.append(a[1]) or real(*a))
        again = opscope.load(cached)
        ops.op_stats(again, ops.OpOptions(top=0, steps="102", **options))
        ops.op_stats(again, opts, fresh_link(cached))  # a link table built here, not the trace's
    assert len(computed) == 2 and all(isinstance(c, ops.OpOptions) for c in computed)


@pytest.mark.parametrize("by_shape", [True, False])
def test_the_efficiency_table_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_shape: bool
) -> None:
    """The whole trace's efficiency table: stored by the first command, read back by the next (its computation
    made to fail), equal to a fresh computation without the cache; given peaks or a device selection are
    computed, never read back (the stored table was measured against the peak table's entry)."""
    from opscope.analysis.efficiency import table

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    cached = tmp_path / "trace.json.gz"  # an MI300X trace with shapes: sized and unsized rows
    shutil.copyfile(corpus_path("tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"), cached)

    opts = table.EfficiencyOptions(by_shape=by_shape, top=0)
    first, second, fresh = read_back(
        cached, monkeypatch, table, "_efficiency", lambda trace: table.efficiency(trace, opts)
    )
    assert second == first == fresh and second.rows and second.unsized and second.peaks is not None
    computed: list[object] = []
    real = table._efficiency
    with monkeypatch.context() as m:
        m.setattr(table, "_efficiency", lambda *a: computed.append(a[1]) or real(*a))
        again = opscope.load(cached)
        given = table.efficiency(again, table.EfficiencyOptions(by_shape=by_shape, top=0, peak_tflops=100.0))
        table.efficiency(again, table.EfficiencyOptions(by_shape=by_shape, top=0, devices=(0,)))
    assert len(computed) == 2 and given.rows[0].peak_tflops == 100.0


def test_result_rows_are_stored_with_their_dataclass_columns() -> None:
    """Rows round-trip through a frame whose schema is their dataclass's fields (nulls and floats exact); a
    frame of other columns is refused (computed again), and a field no column can hold is an error."""
    from dataclasses import dataclass

    from opscope.analysis.attribution.ops import OpRow
    from opscope.analysis.base import stored

    rows = (
        OpRow("aten::mm", "cpu_op", None, 3, 10, 5, 7, 7, 2, 2, 2 / 3, 0.1 + 0.2),
        OpRow("", "user_annotation", "[[1,2]]", 1, 0, 0, 0, 0, 0, 0, 0.0, 1e-300),
    )
    frame = stored.rows_frame(OpRow, rows)
    assert frame.schema == stored.row_schema(OpRow) and stored.rows_of(OpRow, frame) == rows
    with pytest.raises(ValueError):
        stored.rows_of(OpRow, frame.drop("gpu_share"))

    @dataclass(frozen=True)
    class Nested:
        parts: tuple[int, ...]

    with pytest.raises(TypeError):
        stored.row_schema(Nested)


def test_the_busy_idle_analyses_and_the_step_table_are_read_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`analyze`'s busy / idle analyses (timeline, idle, categories, kernels, launch delay, syncs, copies) and
    its step table: stored by the first command, read back by the next (their computations made to fail),
    the whole `Analysis` equal to a fresh one without the cache; a step selection is computed."""
    from opscope.analysis import overview
    from opscope.analysis.attribution import steps

    first = overview.analyze(opscope.load(cached))
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(overview, "timeline", lambda *a, **k: pytest.fail("busy time computed again"))
        m.setattr(overview, "launch_delay", lambda *a, **k: pytest.fail("launch delay computed again"))
        m.setattr(steps, "_step_stats", lambda *a: pytest.fail("step table computed again"))
        second = overview.analyze(opscope.load(cached))
    fresh = overview.analyze(opscope.load(cached, cache=False))
    assert second == first == fresh and len(second.steps.rows) > 1 and second.kernels
    assert second.path == str(cached) and second.steps.path == str(cached)
    with monkeypatch.context() as m:
        m.setattr(
            overview, "launch_delay", lambda *a, **k: pytest.fail("computed: --top 3 is not stored yet")
        )
        with pytest.raises(pytest.fail.Exception):
            overview.analyze(opscope.load(cached), overview.AnalyzeOptions(top=3))
    chosen = overview.analyze(opscope.load(cached), overview.AnalyzeOptions(steps="102"))
    assert [r.window.step for r in chosen.steps.rows] == [102]


def test_a_stored_value_of_another_shape_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value stored by other code (another type) is refused by its decoder, so `Trace.persisted` computes
    it instead of reading it as this code's; the source tag follows the sources."""
    import msgspec

    from opscope.analysis.base import stored
    from opscope.analysis.base.codetag import analysis_tag, source_tag

    frames = stored.value_frames((1, "a", 2.5))
    assert stored.value_of(tuple[int, str, float], frames) == (1, "a", 2.5)
    with pytest.raises(msgspec.ValidationError):
        stored.value_of(tuple[int, int, float], frames)
    tag = analysis_tag()
    assert (
        tag is not None
        and len(tag) == 16
        and tag == source_tag("opscope.analysis", "opscope.model", "opscope.data")
    )
    assert (
        source_tag("opscope.analysis", "opscope.model") != tag
        and source_tag("opscope.no_such_package") is None
    )
    (tmp_path / "opscope_empty_pkg").mkdir()  # a package with no files to read (as under a zip import)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert source_tag("opscope_empty_pkg") is None


def test_the_rule_checks_are_read_back(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The advice rules' checks: kept by the first command, read back by the next (every check made to fail),
    the advice equal to a fresh one without the cache; other thresholds are checked again, and a set with a
    failed check is not kept (the failure is reported again, not read back as a pass)."""
    from opscope.analysis.findings import RuleConfig
    from opscope.analysis.overview import AnalyzeOptions
    from opscope.analysis.rules import engine
    from opscope.analysis.rules.advise import advise

    first = advise(opscope.load(cached))
    wait_for_saves()
    failing = tuple(replace(r, check=lambda ctx, t: pytest.fail("checked again")) for r in engine.RULES)
    with monkeypatch.context() as m:
        m.setattr(engine, "RULES", failing)
        second = advise(opscope.load(cached))
    fresh = advise(opscope.load(cached, cache=False))
    assert first.advice is not None and first.advice.findings
    assert second.advice == first.advice == fresh.advice
    other = AnalyzeOptions(rules=RuleConfig(thresholds={"gpu_gaps": 0.5}))
    broken = tuple(replace(r, check=lambda ctx, t: 1 / 0) if r.id == "gpu_gaps" else r for r in engine.RULES)
    for _ in range(2):
        with monkeypatch.context() as m:
            m.setattr(engine, "RULES", broken)
            again = advise(opscope.load(cached), other)
            wait_for_saves()
        assert again.advice is not None
        assert any("gpu_gaps: not evaluated: ZeroDivisionError" in w for w in again.advice.warnings)


def test_a_report_with_other_limits_computes_its_page(
    cached: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """Another --max-events is another page: computed (the op trees and critical path are not kept on their
    own since the page is), the JSON the same as without the cache (the trace has fewer events than either
    bound)."""
    from opscope.analysis import bundle

    outputs = [cli("report", cached, "--format", "json")]
    wait_for_saves()
    built: list[object] = []
    real = bundle.op_trees
    with monkeypatch.context() as m:
        m.setattr(bundle, "op_trees", lambda *a, **k: built.append(a) or real(*a, **k))
        outputs.append(cli("report", cached, "--format", "json", "--max-events", "900000"))
    outputs.append(cli("report", cached, "--format", "json", "--no-cache"))
    assert [o.code for o in outputs] == [0, 0, 0] and len(built) == 1
    assert json.loads(outputs[0].out) == json.loads(outputs[1].out) == json.loads(outputs[2].out)


def test_the_report_page_is_read_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch, cli, tmp_path: Path
) -> None:
    """The report's page data: kept by the first report, read back by the next in any format (the bundle not
    built), the page and the JSON the same every time and
    without the cache; a selection is computed."""
    from opscope.analysis import bundle

    pages = [tmp_path / f"page{i}.html" for i in range(3)]
    assert cli("report", cached, "-o", pages[0]).code == 0
    wait_for_saves()
    computed: list[object] = []
    real = bundle.trace_bundle
    with monkeypatch.context() as m:
        m.setattr(bundle, "trace_bundle", lambda *a, **k: computed.append(a) or real(*a, **k))
        assert cli("report", cached, "-o", pages[1]).code == 0
        kept = cli("report", cached, "--format", "json")
        assert not computed
        assert cli("report", cached, "--device", "0", "--format", "json").code == 0
        assert len(computed) == 1
    assert pages[0].read_bytes() == pages[1].read_bytes()
    assert cli("report", cached, "--no-cache", "-o", pages[2]).code == 0
    assert pages[2].read_bytes() == pages[0].read_bytes()
    fresh = json.loads(cli("report", cached, "--format", "json", "--no-cache").out)
    assert kept.code == 0 and json.loads(kept.out) == fresh


def test_a_kept_report_page_imports_no_analysis(cached: Path, tmp_path: Path) -> None:
    """Reading the page back needs neither the analyses nor numpy: a second report is the trace's meta, the
    page data and the page template (issue 25: what made a second x4 `report` 4.4x a warm `summary`)."""
    import subprocess
    import sys

    program = (
        "import sys\n"
        "from opscope.cli.main import main\n"
        f"assert main(['report', {str(cached)!r}, '-o', {str(tmp_path / 'p.html')!r}]) == 0\n"
        "print(' '.join(m for m in ('opscope.analysis.bundle', 'numpy') if m in sys.modules))\n"
    )
    runs = [subprocess.run([sys.executable, "-c", program], capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert runs[0].stdout.split() == ["opscope.analysis.bundle", "numpy"] and runs[1].stdout.split() == []


def test_a_document_is_kept_only_if_it_reads_back_the_same() -> None:
    """`kept_document`'s check: a tuple (read back a list) or a value of another type is refused."""
    from opscope.analysis.base import stored

    document = {"a": [1, 2.5, None, True, "x"], "b": {"c": []}}
    assert stored.value_of(stored._DOCUMENT, stored._document_frames(document)) == document
    for bad in ({"a": (1, 2)}, {"a": float("nan")}):
        with pytest.raises(ValueError):
            stored._document_frames(bad)


def test_kept_values_hold_arrays_and_frames_and_refuse_what_would_not_read_back() -> None:
    """One-dimensional numeric arrays and frames read back by value and type; a value that would read back
    as something else (a tuple in an untyped slot comes back a list) or cannot be kept is refused."""
    from typing import Any

    import numpy as np

    from opscope.analysis.base import stored

    value = (np.arange(5, dtype=np.int32), pl.DataFrame({"a": [1, None], "b": ["x", "y"]}), {"k": 1.5})
    kind = tuple[np.ndarray, pl.DataFrame, dict[str, float]]
    back = stored.value_of(kind, stored.value_frames(value, kind))
    assert stored.same_value(back, value) and back[0].dtype == np.int32
    assert not stored.same_value(np.arange(3), np.arange(3).astype(np.int32))
    with pytest.raises(ValueError):
        stored.value_frames(({"k": (1, 2)},), tuple[dict[str, Any]])
    with pytest.raises(TypeError):
        stored.value_frames((np.zeros((2, 2)),), tuple[np.ndarray])


@pytest.mark.parametrize("by_shape", [False, True])
def test_the_comparison_profile_is_read_back(
    cached: Path, monkeypatch: pytest.MonkeyPatch, by_shape: bool
) -> None:
    """`diff`'s profile of a trace: kept by the first comparison, read back by the next (its computation made
    to fail), equal to a fresh one without the cache, with the path it was opened by."""
    from opscope.analysis.compare import profile

    first, second, fresh = read_back(
        cached, monkeypatch, profile, "_profile_trace", lambda trace: profile.profile_trace(trace, by_shape)
    )
    assert second == first == fresh and second.stepped is not None and second.whole.ops
    assert second.path == str(cached)


def test_diffs_advice_is_read_back(cached: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """`diff`'s advice of each trace: kept by the first diff, read back by the next (the rules made to fail),
    the JSON the same as without the cache."""
    from opscope.analysis.rules import advise

    outputs = [cli("diff", cached, cached, "--format", "json")]
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(advise, "advise", lambda *a, **k: pytest.fail("advised again"))
        outputs.append(cli("diff", cached, cached, "--format", "json"))
    outputs.append(cli("diff", cached, cached, "--format", "json", "--no-cache"))
    assert [o.code for o in outputs] == [0, 0, 0], outputs[1].err
    assert json.loads(outputs[0].out) == json.loads(outputs[1].out) == json.loads(outputs[2].out)
    assert json.loads(outputs[1].out)["findings"]


def test_the_critical_path_command_is_read_back_up_to_its_step_bound(
    cached: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """`critical-path`: kept by the first run, read back by the next with the same options (the step paths
    made to fail), the JSON the same as without the cache; other options, or more steps than
    `KEPT_WINDOWS`, are computed."""
    from opscope.analysis.critical_path import stats

    outputs = [cli("critical-path", cached, "--format", "json", "--what-if", "gemm:0.5")]
    wait_for_saves()
    with monkeypatch.context() as m:
        m.setattr(stats, "step_path", lambda *a, **k: pytest.fail("a step's path computed again"))
        m.setattr(stats, "step_paths", lambda *a, **k: pytest.fail("the steps' paths computed again"))
        outputs.append(cli("critical-path", cached, "--format", "json", "--what-if", "gemm:0.5"))
    outputs.append(cli("critical-path", cached, "--format", "json", "--what-if", "gemm:0.5", "--no-cache"))
    assert [o.code for o in outputs] == [0, 0, 0]
    assert json.loads(outputs[0].out) == json.loads(outputs[1].out) == json.loads(outputs[2].out)
    calls: list[object] = []  # the steps laid out (together: `step_paths`)
    real = stats.step_paths
    monkeypatch.setattr(stats, "KEPT_WINDOWS", 2)  # the trace has 5 steps
    monkeypatch.setattr(
        stats,
        "step_paths",
        lambda tables, windows, *a, **k: calls.extend(windows) or real(tables, windows, *a, **k),
    )
    for _ in range(2):
        assert cli("critical-path", cached, "--format", "json").code == 0
        wait_for_saves()
    assert len(calls) == 10


def test_the_history_metrics_are_read_back(cached: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`history add`'s figures of a trace: kept by the first extraction, read back by the next (the
    extraction made to fail), equal to a fresh one without the cache."""
    from opscope.history import metrics

    first, second, fresh = read_back(cached, monkeypatch, metrics, "_extract", metrics.extract)
    assert second == first == fresh and len(second.rows) > 100
