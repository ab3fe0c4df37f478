"""Memory-bound models of aten::index_select, aten::cat and aten::arange (issue 12): bytes against hand
computation on the shapes the Qwen H100 trace records, and the dtype rules (cat's TensorList dtype from the
inputs' producer, arange's int64 default) with their stated fallbacks."""

from __future__ import annotations

import pytest
from tests.conftest import corpus_path

import opscope
from opscope.analysis.efficiency.families import FAMILIES, Cost, Unsized
from opscope.analysis.efficiency.shapes import concrete_values, tensors
from opscope.analysis.efficiency.sizing import size_call
from opscope.analysis.efficiency.table import EfficiencyOptions, efficiency

QWEN_H100 = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def size(op: str, dims: str, types: str, concrete: str | None) -> Cost | Unsized:
    args = tensors(dims, types)
    assert args is not None
    return FAMILIES[op](args, concrete_values(concrete))


def test_index_select_reads_the_index_and_copies_the_rows() -> None:  # the Qwen embedding lookup
    cost = size(
        "aten::index_select",
        "[[151936, 1024], [], [8944]]",
        '["c10::BFloat16", "Scalar", "long int"]',
        '["", "0", ""]',
    )
    assert isinstance(cost, Cost)
    # 8944 int64 indices + 8944 rows of 1024 bf16 read from the table and written to the output
    assert (cost.bytes, cost.flops, cost.dtype, cost.model) == (
        8944 * 8 + 2 * 8944 * 1024 * 2,
        None,
        "bf16",
        "exact",
    )
    dim1 = size(
        "aten::index_select", "[[6, 10], [], [4]]", '["float", "Scalar", "long int"]', '["", "1", ""]'
    )
    assert isinstance(dim1, Cost) and dim1.bytes == 4 * 8 + 2 * 4 * 6 * 4  # 4 columns of 6 fp32
    no_dim = size("aten::index_select", "[[6, 10], [], [4]]", '["float", "Scalar", "long int"]', None)
    assert isinstance(no_dim, Unsized) and "dim" in no_dim.reason


def test_arange_int64_default_and_recorded_dtypes() -> None:
    six = '["Scalar", "Scalar", "", "", "", "Scalar"]'  # arange.start(start, end, dtype, layout, device, pin)
    cost = size("aten::arange", "[[], [], [], [], [], []]", six, '["0", "559", "", "", "", "False"]')
    assert isinstance(cost, Cost)
    assert (cost.bytes, cost.dtype, cost.model) == (559 * 8, "int64", "exact") and "int64" in cost.note
    out = size(
        "aten::arange",
        "[[], [], [], [0]]",
        '["Scalar", "Scalar", "Scalar", "long int"]',
        '["0", "559", "1", ""]',
    )
    assert isinstance(out, Cost) and (out.bytes, out.dtype) == (559 * 8, "int64")  # the out tensor's dtype
    fp = size("aten::arange", "[[], [], [], [], [], []]", six, '["0", "2.5", "", "", "", "False"]')
    assert isinstance(fp, Cost) and (fp.bytes, fp.model) == (3 * 4, "estimate") and "fp32 assumed" in fp.note
    typed = size(
        "aten::arange",
        "[[], [], [], [], [], [], []]",
        '["Scalar", "Scalar", "Scalar", "ScalarType", "", "", ""]',
        '["1", "10", "3", "15", "", "", "False"]',
    )
    assert isinstance(typed, Cost) and (typed.bytes, typed.dtype) == (3 * 2, "bf16")  # 1, 4, 7 in bf16
    assert isinstance(size("aten::arange", "[[], [], [], [], [], []]", six, None), Unsized)
    # arange(end, dtype, layout, device, pin_memory): one scalar (the demo's CPU capture records it so)
    five = '["Scalar", "", "", "", "Scalar"]'
    one = size("aten::arange", "[[], [], [], [], []]", five, '["16", "", "", "", "False"]')
    assert isinstance(one, Cost) and (one.bytes, one.dtype) == (16 * 8, "int64")


def test_cat_dtype_from_the_producer_else_an_estimate() -> None:
    dims, types = "[[[16, 16, 559, 32], [16, 16, 559, 32]], []]", '["TensorList", "Scalar"]'
    known = size_call("aten::cat", dims, types, '["", "-1"]', "bf16")
    elements = 2 * 16 * 16 * 559 * 32
    assert isinstance(known, Cost) and (known.bytes, known.dtype, known.model) == (
        2 * elements * 2,
        "bf16",
        "exact",
    )
    guess = size_call("aten::cat", dims, types, '["", "-1"]', None)
    assert isinstance(guess, Cost) and (guess.bytes, guess.model) == (2 * elements * 4, "estimate")
    assert "fp32 assumed" in guess.note
    assert isinstance(size_call("aten::cat", "[[4], []]", '["float", "Scalar"]', None), Unsized)


def test_qwen_rows_by_hand() -> None:
    rows = efficiency(opscope.load(corpus_path(QWEN_H100)), EfficiencyOptions(top=0)).rows
    found = {(r.op, r.shape): r for r in rows}
    rope = found[("aten::cat", "[[[16,16,559,32],[16,16,559,32]],[]]")]  # rotate_half: cat((-x2, x1)), bf16
    assert (rope.dtype, rope.model, rope.calls) == ("bf16", "exact", 48)
    assert rope.bytes_per_call == 2 * (2 * 16 * 16 * 559 * 32) * 2
    assert rope.achieved_tbps == pytest.approx(rope.bytes_per_call * 48 / (rope.gpu_time_us / 1e6) / 1e12)
    freqs = found[("aten::cat", "[[[1,559,32],[1,559,32]],[]]")]  # cat((freqs, freqs)) of the fp32 rotary bmm
    assert (freqs.dtype, freqs.bytes_per_call) == ("fp32", 2 * (2 * 559 * 32) * 4)
    gather = found[("aten::index_select", "[[151936,1024],[],[8944]]")]
    assert gather.bytes_per_call == 8944 * 8 + 2 * 8944 * 1024 * 2 and gather.bound == "memory"
    arange = found[("aten::arange", "[[],[],[],[],[],[]]")]
    assert (arange.dtype, arange.bytes_per_call) == ("int64", 559 * 8)
