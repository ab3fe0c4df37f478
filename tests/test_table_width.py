"""Issue 18: every terminal table fits the default pipe width (100 columns) with readable names - optional
columns are hidden (and named under the table) before names are cut below a readable size, long text wraps -
and a shortened name never shows two ellipses for one cut (`elemen……::λ1> #717e`)."""

from __future__ import annotations

import pytest

from conftest import corpus_path
from opscope.report import names
from opscope.report.document import LAST_RESORT, MS, NAME, TEXT, Column, Document, Table
from opscope.report.render import NAME_MIN, NAME_READABLE, RenderOptions, render

H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
MI300 = "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"  # wide numbers: summary was 102
COMMANDS = (
    "summary",
    "kernels",
    "ops",
    "tree",
    "lines",
    "steps",
    "analyze",
    "diff",
    "advise",
    "critical-path",
    "efficiency",
    "memory",
)


def _argv(command: str, trace: str) -> list[str]:
    paths = [corpus_path(trace), corpus_path(MI300)] if command == "diff" else [corpus_path(trace)]
    return [command, *map(str, paths), "--width", "100"]


@pytest.mark.corpus
@pytest.mark.parametrize("trace", [H100, V100])
@pytest.mark.parametrize("command", COMMANDS)
def test_every_table_fits_100_columns_without_double_ellipses(cli, command, trace):
    result = cli(*_argv(command, trace))
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) > 3
    # a word longer than a line (the trace's path, whose length depends on where the corpus lives) keeps a
    # line of its own, whole (free text wraps between words only): not a table too wide
    too_wide = [line for line in lines if len(line) > 100 and len(line.split()) > 1]
    assert not too_wide, too_wide[:3]
    assert not [line for line in lines if "……" in line]


def test_the_formats_table_fits_100_columns(cli):
    """`opscope formats` (no trace): its description column wraps instead of widening the table to 158."""
    result = cli("formats", "--width", "100")
    assert result.code == 0, result.err
    too_wide = [line for line in result.out.splitlines() if len(line) > 100]
    assert not too_wide, too_wide[:3]


@pytest.mark.corpus
def test_kernels_hides_launch_details_and_says_so(cli):
    """Before: 142 columns at width 100 with 16-character names. Now the name is readable and the hidden
    columns are named; a wider table shows them all again."""
    out = cli("kernels", corpus_path(H100), "--width", "100").out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("Name"))
    assert "Theo occ %" in header and "Flags" in header and "Smem B" not in header
    assert "Hidden to fit 100 columns: " in out and "Smem B" in out.split("Hidden to fit")[1]
    first = out.splitlines()[out.splitlines().index(header) + 2]
    assert len(first.split("  ")[0].strip()) >= NAME_READABLE
    wide = cli("kernels", corpus_path(H100), "--width", "220").out
    assert "Smem B" in wide and "Hidden to fit" not in wide


def _doc(name_len: int, rows: int = 3) -> Document:
    columns = (
        Column("name", "Name", NAME),
        Column("t", "Total ms", MS),
        Column("extra", "Optional detail", TEXT, drop=1),
        Column("last", "Last resort", TEXT, drop=LAST_RESORT),
        Column("why", "Why", TEXT, wrap=True),
    )
    data = tuple(
        {
            "name": f"kernel_{i}_" + "x" * name_len,
            "t": 1e6 * i,
            "extra": "d" * 14,
            "last": "l" * 11,
            "why": "a long explanation that wraps onto several lines",
        }
        for i in range(rows)
    )
    return Document(title="t", data={}, tables=(Table("t", "", columns, data),))


def test_hand_made_drop_order_wrap_and_wide():
    """Hand-made table: `drop` columns go first (names kept at NAME_READABLE), last-resort columns only once the
    names are at NAME_MIN; wrapping text never widens the table; --wide keeps everything whole."""
    out = render(_doc(60), "table", RenderOptions(width=80))
    assert max(map(len, out.splitlines())) <= 80
    assert "Optional detail" not in out.splitlines()[2] and "Last resort" in out
    assert "Hidden to fit 80 columns: Optional detail" in out.replace("\n", " ")
    narrow = render(_doc(60), "table", RenderOptions(width=50))
    assert "Last resort" not in narrow.split("Hidden")[0] and max(map(len, narrow.splitlines())) <= 50
    wide = render(_doc(60), "table", RenderOptions(width=80, wide=True))
    assert "Optional detail" in wide and "Hidden" not in wide and "x" * 60 in wide
    short = render(_doc(2), "table", RenderOptions(width=120))
    assert "Optional detail" in short and "Hidden" not in short


def test_one_ellipsis_per_cut():
    """Real shapes from the H100 trace: `_fold` left an ellipsis next to where `middle` cut."""
    name = (
        "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
        "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::"
        "TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
        "MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::"
        "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::"
        "TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::"
        "MulFunctor<float> > const&)::{lambda(int)#1})"
    )
    for width in range(NAME_MIN - 6, 60):
        shown = names.shorten(name, width)
        assert "……" not in shown and len(shown) <= width, (width, shown)
        parts = shown.split(names.ELLIPSIS)
        assert all(len(p) >= 5 for p in parts[1:-1]), (width, shown)  # no `…ray…` fragment between two cuts
    assert names.middle("abcdefgh…ijklmnopqrstuvwxyz", 12).count(names.ELLIPSIS) == 1
    assert names.middle("abc", 12) == "abc"
