"""Kernel names as people read them: piped output honours COLUMNS and --width and never drops a column silently,
shortened names stay distinct (structure first, then a short hash), --wide never wraps, Itanium-mangled AMD
names are demangled (raw name kept in JSON), and the HTML chart shortens like the terminal."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

import opscope
from conftest import corpus_path
from opscope.analysis.kernels.demangle import demangle_names
from opscope.report import names
from opscope.report.document import Column, Document, Table
from opscope.report.render import RenderOptions, render

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
SGLANG = "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
QWEN_MI300 = "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
HEADER = re.compile(
    r"^\s*Name\s+Kind\s+Calls\s+Total ms\s+Mean us\s+Min us\s+Max us\s+Median us\s+StdDev us\s+Share\s*$"
)
SHOWN = re.compile(
    r"^\s*Name\s+Kind\s+Calls\s+Total ms\s.*Share\s*$"
)  # the header, last-resort columns hidden


def _table_lines(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if SHOWN.match(line))
    return [
        line
        for line in lines[start + 2 :]
        if line.strip()
        and "more rows" not in line
        and not line.startswith("Hidden to fit")
        and "--format json shows them" not in line
    ]


@pytest.mark.corpus
@pytest.mark.parametrize("width", [60, 100, 160])
def test_piped_output_honours_columns_and_keeps_every_column(cli, monkeypatch, width):
    """Issue 18: piped output was fixed at 100 columns, ignored COLUMNS, dropped Share and cut `kernel`. At 100
    and more every column is shown; narrower, the spread columns (StdDev, Median, Min, Max) are hidden as a last
    resort and named under the table - never silently, and never Share."""
    monkeypatch.setenv("COLUMNS", str(width))
    out = cli("summary", corpus_path(V100), "--top", "5").out
    lines = out.splitlines()
    if width >= 100:
        assert any(HEADER.match(line) for line in lines), out  # every column label whole, Share included
        rows = _table_lines(out)
    else:
        header = next(i for i, line in enumerate(lines) if SHOWN.match(line))
        assert "StdDev us" not in lines[header]
        hidden = " ".join(lines).split("Hidden to fit 60 columns: ")[1]
        assert all(label in hidden for label in ("Min us", "Max us", "Median us", "StdDev"))
        rows = _table_lines(out)
    assert len(rows) == 5 and all(re.search(r"\bkernel\b", r) and r.rstrip().endswith("%") for r in rows)
    # nothing goes past COLUMNS but a word longer than a line (the trace path): free text wraps between words
    # only, never inside a path (issue 54)
    assert all(len(line) <= width or len(line.split()) == 1 for line in lines)


@pytest.mark.corpus
def test_width_flag_wins_over_columns(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    out = cli("summary", corpus_path(V100), "--top", "5", "--width", "140").out
    assert max(len(line) for line in out.splitlines()) > 100


@pytest.mark.corpus
def test_wide_keeps_names_whole_on_one_line(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    out = cli("summary", corpus_path(V100), "--top", "5", "--wide").out
    data = json.loads(cli("summary", corpus_path(V100), "--top", "5", "--format", "json").out)
    rows = _table_lines(out)
    assert len(rows) == 5  # one line per kernel: no name wrapped into a narrow column
    for row, expected in zip(rows, data["rows"], strict=True):
        assert row.strip().startswith(expected["name"])


@pytest.mark.corpus
def test_shortened_names_stay_distinct_on_a_real_trace(cli):
    data = json.loads(cli("summary", corpus_path(V100), "--top", "0", "--format", "json").out)
    full = [r["name"] for r in data["rows"]]
    for width in (16, 24, 40, 60):
        shown = names.shorten_all(full, width)
        assert len(set(shown)) == len(set(full)), width
        assert all(len(s) <= max(width, 16) for s in shown)
    out = cli("summary", corpus_path(V100), "--top", "40", "--width", "100").out
    rows = [r.split("  ")[0].strip() for r in _table_lines(out)]
    assert len(set(rows)) == len(rows) == 40


def test_structure_first_then_hash():
    """Hand-made names (PyTorch's spelling): the lambda's enclosing function is what tells these apart."""
    clamp = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar("
        "at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::"
        "operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >"
        "(int, at::detail::Array<char*, 2>)"
    )
    assert (
        names.shorten(clamp, 90)
        == "vectorized_elementwise_kernel<4, launch_clamp_scalar::λ1::λ7::λ1, Array<char*, 2> >"
    )
    same_start = ["k<" + "a" * 45 + x + "a" * 45 + ">(int)" for x in "xy"]
    shown = names.shorten_all(same_start, 40)
    assert shown[0] != shown[1] and all(re.search(r" #[0-9a-f]{4}$", s) for s in shown)
    assert shown == names.shorten_all(same_start, 40)  # stable
    assert names.shorten_all(["a", "b"], 40) == ["a", "b"]


@pytest.mark.corpus
def test_mangled_amd_names_are_demangled_and_raw_kept_in_json(cli):
    data = json.loads(cli("summary", corpus_path(SGLANG), "--top", "0", "--format", "json").out)
    mangled = [r for r in data["rows"] if r["raw_name"].startswith("_Z")]
    assert mangled, "the SGLang MI300X trace records ck_tile / sgl_hip / aiter kernels by their mangled names"
    assert all(not r["name"].startswith("_Z") and r["name"] != r["raw_name"] for r in mangled)
    assert any(
        r["name"].startswith("void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, ") for r in mangled
    )
    plain = [r for r in data["rows"] if not r["raw_name"].startswith("_Z")]
    assert all(r["name"] == r["raw_name"] for r in plain)
    table = cli("summary", corpus_path(SGLANG), "--width", "200").out
    assert "_ZN5aiter" not in table and "add_rmsnorm_quant_kernel<" in table


@pytest.mark.corpus
def test_newer_clang_manglings_through_llvms_demangler(cli):
    """`Tn` (C++20 template-parameter declarations): cpp_demangle and binutils cannot parse it; LLVM can."""
    pytest.importorskip("llvmdemangle", reason="the optional LLVM demangler (pip install opscope[demangle])")
    data = json.loads(cli("summary", corpus_path(SGLANG), "--top", "0", "--format", "json").out)
    (row,) = [r for r in data["rows"] if r["raw_name"].startswith("_ZN7sgl_hip10activation")]
    assert row["name"] == (
        "void sgl_hip::activation::act_and_mul_kernel<__hip_bfloat16, &__hip_bfloat16 "
        "silu<__hip_bfloat16>(__hip_bfloat16 const&)>(__hip_bfloat16*, __hip_bfloat16 const*, int)"
    )


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="binutils' c++filt is the independent reference")
@pytest.mark.corpus
def test_demangling_agrees_with_cxxfilt():
    data = opscope.summary(opscope.load(corpus_path(SGLANG)), top=0)
    raw = sorted(
        {r.raw_name for r in data.rows if r.raw_name and "Tn" not in r.raw_name}
    )  # binutils lacks Tn
    ours = demangle_names(raw)
    theirs = subprocess.run(["c++filt"], input="\n".join(raw), capture_output=True, text=True, check=True)
    for name, expected in zip(raw, theirs.stdout.splitlines(), strict=True):
        # Both are Itanium demanglers; spacing of template closers and literal suffixes may differ.
        assert re.sub(r"\s+|\(bool\)|ul\b", "", ours[name]) == re.sub(r"\s+|\(bool\)|ul\b", "", expected), (
            name
        )


def test_non_symbols_and_garbage_are_left_alone():
    assert demangle_names(["_Z", "_Zgarbage", "gemm_kernel", "_ZN" + "1a" * 5000]) == {}


@pytest.mark.corpus
def test_html_chart_names_are_the_terminal_shortening(tmp_path, cli):
    from opscope.analysis.bundle import trace_bundle
    from opscope.report.html.trace_report import CHART_NAME_WIDTH, trace_report

    data = trace_report(trace_bundle(opscope.load(corpus_path(QWEN_MI300))))
    rows = data["kernels"]["rows"]
    strings = data["strings"]
    full = [strings[r["name"]] for r in rows]
    assert [strings[r["short_name"]] for r in rows] == names.shorten_all(full, CHART_NAME_WIDTH)


def test_markdown_keeps_shortened_names_distinct():
    rows = tuple({"name": "k<" + "a" * 60 + x + "a" * 60 + ">(int)", "n": 1} for x in "xy")
    doc = Document(
        title="t",
        data={},
        tables=(
            Table(
                name="t",
                title="",
                columns=(Column("name", "Name", "name"), Column("n", "N", "int")),
                rows=rows,
            ),
        ),
    )
    text = render(doc, "markdown", RenderOptions())
    assert len(set(re.findall(r"#[0-9a-f]{4}", text))) == 2


@pytest.mark.corpus
def test_ck_tile_kernel_of_the_vllm_trace_is_demangled(cli):
    path = corpus_path("tracelens/inference__vllm_decode_full__graph_execution.json.gz")
    data = json.loads(cli("summary", path, "--top", "0", "--format", "json").out)
    rows = [r for r in data["rows"] if r["raw_name"].startswith("_ZN7ck_tile6kentry")]
    assert rows and all(r["name"].startswith("void ck_tile::kentry<") for r in rows)
    assert any(r["name"].startswith("void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<") for r in rows)


@pytest.mark.corpus
def test_diff_and_ranks_charts_use_the_terminal_shortening(cli):
    base = corpus_path("tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    new = corpus_path("tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz")
    data = json.loads(cli("diff", base, new, "--format", "json", "--top", "0").out)
    rows = data["kernels"]["rows"]
    assert rows and [r["short_name"] for r in rows] == names.shorten_all([r["name"] for r in rows], 50)
    folder = corpus_path("param/dlrm_kineto/worker0_step_12.1694128201545.pt.trace.json").parent
    ranks = json.loads(cli("-q", "ranks", folder, "--format", "json", "--top", "0", "--jobs", "1").out)
    kernels = ranks["kernels"]
    assert kernels and [k["short_name"] for k in kernels] == names.shorten_all(
        [k["name"] for k in kernels], 50
    )
