"""Free text never wraps inside a word, and a pipe gets lines, not a page (docs/reports.md, "Terminal output"):
on a terminal (or with --width) banners, facts, notes and footers wrap between words only, a path or a kernel
name longer than the line keeping a line of its own; piped without --width, each is one line. `brief` stays
within 15 lines on every corpus trace, and no trace path is split across lines in any command's piped output."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import corpus_path
from opscope.report.render import word_lines
from test_categories import corpus_traces

WORDS = st.lists(st.text(alphabet="abcdefghijklmnop/._-0123456789", min_size=1, max_size=40), max_size=30)


@given(WORDS, st.integers(min_value=10, max_value=120), st.integers(min_value=0, max_value=4))
def test_word_lines_break_between_words_only(words: list[str], width: int, indent: int) -> None:
    text = " " * indent + " ".join(words)
    lines = [text[lo:hi] for lo, hi in word_lines(text, width)]
    assert " ".join(" ".join(lines).split()) == " ".join(words)  # every word, whole, in order
    for line in lines:
        assert len(line) <= width or len(line.split()) == 1  # longer only where one word is
    assert lines[0].startswith(" " * indent) or not words


@pytest.mark.corpus
@pytest.mark.parametrize("rel", corpus_traces())
def test_brief_is_at_most_15_lines_and_keeps_its_path_whole(cli, rel: str) -> None:
    path = str(corpus_path(rel))
    for fmt in ("table", "markdown"):  # JSON is one document, not lines
        out = cli("brief", path, "--format", fmt)
        assert out.code == 0, out.err
        lines = out.out.splitlines()
        assert len(lines) <= 15, (fmt, len(lines))
        assert any(path in line.replace("\\", "") for line in lines), fmt  # Markdown escapes `_` as `\_`


@pytest.mark.corpus
@pytest.mark.parametrize(
    "command", ["summary", "analyze", "advise", "steps", "critical-path", "lines", "memory"]
)
def test_piped_output_never_splits_the_trace_path(cli, command: str) -> None:
    rel = "tracelens/mi300__google_owlv2-large-patch14-ensemble__1016001.json.gz"
    path = str(corpus_path(rel))
    out = cli(command, path)
    assert out.code == 0, out.err
    assert any(path in line for line in out.out.splitlines())
    wrapped = cli(command, path, "--width", "60").out  # a terminal's width: wrapped between words
    assert any(path in line for line in wrapped.splitlines())
    assert not any(
        re.search(r"\S", line) and path.startswith(line.strip()) and line.strip() != path
        for line in wrapped.splitlines()
        if "/" in line and len(line.strip()) > 20
    )
