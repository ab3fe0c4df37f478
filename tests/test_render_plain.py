"""The terminal tables' fast path (`report/render.py` `_plain_table`) writes exactly what Rich would: checked
byte for byte against Rich itself (the same document rendered with the fast path turned off) on every table
command over real traces, and on random hand-made tables (hypothesis: words, long words that fold, wide
characters, trailing spaces, narrow widths). Rich measured and rendered each cell (a millisecond per row, 1.2 s
of an 880-row critical-path table: issue 25); the fast path must never change a character of the output."""

from __future__ import annotations

import importlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import corpus_path
from opscope.cli import common
from opscope.report.document import MS, NAME, PCT, TEXT, Column, Document, Table

render_module = importlib.import_module("opscope.report.render")  # the package re-exports `render`
RenderOptions = render_module.RenderOptions

TRACES = (
    "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",  # V100 ResNet, 5 steps
    "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",  # AMD names with '…' when shortened
)
COMMANDS = (
    ("summary",),
    ("summary", "--width", "60"),
    ("analyze",),
    ("advise",),  # findings wrap
    ("steps",),  # an empty last column
    ("ops", "--by-shape"),  # shapes wrap between tensors
    ("tree",),
    ("critical-path",),
    ("efficiency",),
    ("kernels", "--wide"),
)


def _both(monkeypatch, produce):  # type: ignore[no-untyped-def]
    """(fast path output, Rich's output, how many tables took the fast path)."""
    original = render_module._plain_table
    used = []

    def counting(*args):  # type: ignore[no-untyped-def]
        result = original(*args)
        used.append(result is not None)
        return result

    monkeypatch.setattr(render_module, "_plain_table", counting)
    fast = produce()
    monkeypatch.setattr(render_module, "_plain_table", lambda *args: None)
    rich = produce()
    monkeypatch.setattr(render_module, "_plain_table", original)
    return fast, rich, sum(used)


@pytest.mark.corpus
@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("trace", TRACES)
def test_every_command_table_is_what_rich_draws(cli, monkeypatch, trace: str, color: bool) -> None:
    """Without colour (a pipe, CI) and with it (a terminal: bold titles and headers)."""
    path = corpus_path(trace)
    if color:
        chosen = common.render_options
        monkeypatch.setattr(common, "render_options", lambda *a: replace(chosen(*a), color=True))
    fast_tables = 0
    for command in COMMANDS:
        argv = [command[0], path, *command[1:]]
        fast, rich, used = _both(monkeypatch, lambda argv=argv: cli(*argv).out)
        assert fast == rich, command
        fast_tables += used
    assert fast_tables >= len(COMMANDS)  # not vacuous: the fast path drew the tables
    if color:
        assert "\x1b[1m" in cli("summary", path).out  # not vacuous: the output was in colour


WORD = st.text(alphabet=st.sampled_from("abcdefghij_:()0123456789…é中"), min_size=1, max_size=30)
CELL = st.lists(WORD, min_size=0, max_size=6).map(" ".join) | st.sampled_from(["", " x", "y  ", "a  b"])


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(st.tuples(CELL, CELL, st.floats(0, 1e6), CELL), min_size=0, max_size=6),
    width=st.integers(30, 140),
    title=st.sampled_from(["", "Kernels", "A title longer than some of the narrow tables drawn here"]),
    color=st.booleans(),
)
def test_random_tables_are_what_rich_draws(rows, width: int, title: str, color: bool) -> None:  # type: ignore[no-untyped-def]
    """Hand-made tables (random text): a wrapping text column, a name column, numbers, a plain text column."""
    table = Table(
        "t",
        title,
        (
            Column("w", "Wrapped", TEXT, wrap=True),
            Column("n", "Name", NAME),
            Column("v", "Value ms", MS),
            Column("p", "Share", PCT),
            Column("t", "Text", TEXT),
        ),
        tuple({"w": w, "n": n, "v": v, "p": v / 2e6, "t": t} for w, n, v, t in rows),
    )
    doc = Document("Random", {"schema": "test/1"}, tables=(table,))
    options = RenderOptions(width=width, color=color)
    original = render_module._plain_table
    fast = render_module.render_table(doc, options)
    render_module._plain_table = lambda *args: None
    try:
        rich = render_module.render_table(doc, options)
    finally:
        render_module._plain_table = original
    assert fast == rich
