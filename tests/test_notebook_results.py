"""Issue 28, the notebook API: every command's result is a top-level function (`advise`, `memory`,
`critical_path`, `kernels`, `efficiency` beside the others), each with `.to_polars()` / `.to_pandas()` whose text
columns are `pl.String` (the link table's `name` was Categorical: `.str.contains` raised), `_repr_html_`, and a
`str()` that is the command's own terminal table, character for character, at 100 columns."""

from __future__ import annotations

import polars as pl
import pytest

import opscope
import reference
from conftest import corpus_path

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.fixture(scope="module")
def trace() -> opscope.Trace:
    return opscope.load(corpus_path(BERT), cache=False)


# (API call, the CLI arguments that print the same table)
SAME = {
    "advise": (lambda t: opscope.advise(t), ["advise"]),
    "memory": (lambda t: opscope.memory(t), ["memory"]),
    "critical_path": (lambda t: opscope.critical_path(t), ["critical-path"]),
    "kernels": (lambda t: opscope.kernels(t), ["kernels"]),
    "efficiency": (lambda t: opscope.efficiency(t, top=30), ["efficiency"]),
    "steps": (lambda t: opscope.steps(t), ["steps"]),
    "summary": (lambda t: opscope.summary(t), ["summary"]),
    "ops": (lambda t: opscope.ops(t), ["ops"]),
    "analyze": (lambda t: opscope.analyze(t), ["analyze"]),
}


@pytest.mark.parametrize("name", list(SAME))
def test_print_shows_the_command_table(cli, trace, name: str) -> None:  # type: ignore[no-untyped-def]
    call, argv = SAME[name]
    result = call(trace)
    printed = cli(*argv, corpus_path(BERT), "--width", "100", "--no-color")
    assert printed.code == 0, printed.err
    assert str(result).rstrip("\n") == printed.out.rstrip("\n")


@pytest.mark.parametrize("name", list(SAME))
def test_every_result_is_a_frame_with_string_text(trace, name: str) -> None:
    result = SAME[name][0](trace)
    frame = result.to_polars()
    assert isinstance(frame, pl.DataFrame) and frame.height > 0
    assert not any(isinstance(d, (pl.Categorical, pl.Enum)) for d in frame.dtypes)
    assert result.to_pandas().shape == frame.shape
    assert result._repr_html_().startswith("<div><b>")


def test_link_names_are_strings(trace) -> None:
    frame = opscope.link(trace).to_polars()
    assert frame.schema["name"] == pl.String
    gemm = frame.filter(pl.col("name").str.contains("gemm"))
    raw = [e for e in reference.gpu_events(reference.load(corpus_path(BERT))) if "gemm" in e["name"]]
    assert gemm.height == len(raw) > 0


def test_results_figures_match_the_commands(trace) -> None:
    """The frames hold the figures the tables print: the critical path per step, the memory peaks."""
    path = opscope.critical_path(trace, top=0)
    frame = path.to_polars()
    assert frame["path_ns"].to_list() == frame["span_ns"].to_list() == [s.span_ns for s in path.steps]
    memory = opscope.memory(trace).to_polars()
    assert memory.filter(pl.col("device") == "cuda:0")["peak_allocated_bytes"].item() == 101305344
    advised = opscope.advise(trace)
    assert advised.to_polars()["id"].to_list() == [f.id for f in advised.advice.findings]
