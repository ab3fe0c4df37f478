"""Issue 18, the notebook API: every result has .to_polars(), .to_pandas() and a compact _repr_html_, all
exported at the top level; `opscope.link` is the public kernel-to-operator table. Figures are checked against
the raw events (tests/reference.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import opscope
import reference
from conftest import corpus_path
from opscope.errors import MissingDependency
from opscope.extras import install_command

H100 = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="module")
def trace() -> opscope.Trace:
    return opscope.load(corpus_path(H100), cache=False)


@pytest.fixture(scope="module")
def results(trace) -> dict[str, object]:
    return {
        "summary": opscope.summary(trace, top=0),
        "analyze": opscope.analyze(trace),
        "ops": opscope.ops(trace, top=0),
        "tree": opscope.tree(trace),
        "steps": opscope.steps(trace),
        "diff": opscope.diff(trace, corpus_path(MI300)),
        "ranks": opscope.ranks([trace]),
        "link": opscope.link(trace),
    }


@pytest.mark.parametrize("name", ["summary", "analyze", "ops", "tree", "steps", "diff", "ranks", "link"])
def test_every_result_is_a_table(results, name) -> None:
    result = results[name]
    assert isinstance(result, opscope.Tabular)
    frame = result.to_polars()
    assert frame.height > 0 and frame.width > 3
    pandas = result.to_pandas()
    assert list(pandas.columns) == frame.columns and len(pandas) == frame.height
    view = result._repr_html_()
    assert view.startswith("<div>") and "<table>" in view and "dataclass" not in view
    assert view.count("<tr>") <= 21 and len(view) < 30_000  # header + at most 20 rows
    assert f"{frame.height:,} rows" in view


def test_tables_match_the_raw_events(results) -> None:
    events = reference.load(corpus_path(H100))
    totals = reference.kernel_totals(reference.gpu_events(events))
    frame = results["summary"].to_polars()
    got = {(r["name"], r["kind"]): (r["calls"], r["total_ns"]) for r in frame.iter_rows(named=True)}
    assert got == totals
    raw = reference.link(events)
    linked = results["link"].to_polars()
    assert linked.height == len(raw.gpu)
    want_ops = sorted((events[o]["name"] if o is not None else None) for o in raw.op.values())
    assert sorted(linked["op_name"].cast(str).to_list(), key=lambda v: (v is None, v or "")) == sorted(
        want_ops, key=lambda v: (v is None, v or "")
    )
    tree = results["tree"].to_polars()
    assert tree["depth"][0] == 0 and tree["gpu_ns"][0] == sum(t for _, t in totals.values())
    diff = results["diff"].to_polars()
    assert set(diff["table"]) == {"kernel", "op", "op_cpu_self"}


def test_notebook_view_escapes_names(tmp_path) -> None:
    from handmade_traces import document, kernel, launch, write

    # hand-made: a kernel name that is markup
    path = write(tmp_path / "t.json", document([launch(1, 1), kernel("<script>alert(1)</script>", 5, 10, 1)]))
    view = opscope.summary(opscope.load(path, cache=False))._repr_html_()
    assert "<script>" not in view and "&lt;script&gt;" in view


def test_to_pandas_without_pandas_is_a_one_line_hint(results, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)
    hint = re.escape(install_command("pandas"))
    with pytest.raises(MissingDependency, match=hint):
        results["ops"].to_pandas()
    with pytest.raises(MissingDependency, match=hint):
        results["link"].to_pandas()


def test_top_level_exports_stay_lazy() -> None:
    names = [
        "ops",
        "tree",
        "steps",
        "diff",
        "ranks",
        "link",
        "Tabular",
        "OpStats",
        "OpTree",
        "StepStats",
        "TraceDiff",
        "RanksReport",
        "Linkage",
    ]
    assert all(n in opscope.__all__ for n in names)
    code = (
        "import sys, opscope; assert 'polars' not in sys.modules; "
        f"print(all(getattr(opscope, n) is not None for n in {names!r}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr


def test_capture_summary_is_a_table_of_what_it_prints() -> None:
    from opscope.capture.summary import summarize

    cpu_only = summarize(corpus_path("hta/cpu_only_rank-34.OLDVERSION_b8cce2cd9c.pt.trace.json.gz"))
    frame = cpu_only.to_polars()  # no GPU activity: the CPU operators, by self time
    assert frame.columns[:3] == ["name", "kind", "calls"] and frame["self_ns"].is_sorted(descending=True)
    assert frame.height == len(cpu_only.cpu_ops.rows) and "<table>" in cpu_only._repr_html_()
    gpu = summarize(corpus_path(H100))
    assert gpu.to_polars()["name"].to_list() == [r.name for r in gpu.kernels.rows]
