"""`opscope compile-check` on the older torch.compile generation (torch 2.0-2.1: AOTAutograd's `CompiledFunction`
/ `CompiledFunctionBackward` regions, no `Torch-Compiled Region: F/C` ids) and Inductor kernel names read by the
op names they contain (issue 28: such a trace said `compiled regions: 0`, and `_scaled_dot_product_flash_attention`
came out as five ops). The corpus has no trace of that generation: the trace here is HAND-MADE, its figures read
off the events written below."""

from __future__ import annotations

import json
from pathlib import Path

import handmade_traces as hm
from opscope.analysis.compile.fused_names import fused_ops

FORWARD_KERNEL = "triton_poi_fused__to_copy_add_relu_0"
BACKWARD_KERNEL = "triton_per_fused__scaled_dot_product_flash_attention_backward_native_layer_norm_backward_1"


def test_multi_word_ops_are_kept_whole() -> None:
    assert fused_ops("triton_per_fused__scaled_dot_product_flash_attention_add_3") == (
        "scaled_dot_product_flash_attention",
        "add",
    )
    assert fused_ops(BACKWARD_KERNEL) == (
        "scaled_dot_product_flash_attention_backward",
        "native_layer_norm_backward",
    )
    assert fused_ops("triton_poi_fused_embedding_dense_backward_1") == ("embedding_dense_backward",)
    assert fused_ops("triton_tem_fused_addmm_relu_2") == ("addmm", "relu")
    # unknown words stay single words; an op name is never glued to its neighbour
    assert fused_ops("triton_poi_fused_add_mystery_op_0") == ("add", "mystery", "op")


def _aot_trace(tmp_path: Path, steps: int = 3, with_frames: bool = False) -> Path:
    """`steps` ProfilerSteps, each: a CompiledFunction (forward, 100 µs) launching FORWARD_KERNEL (20 µs) on the
    main thread, then a CompiledFunctionBackward (80 µs) on the autograd thread (tid 2) launching
    BACKWARD_KERNEL (30 µs). `with_frames`: the forward sits in a `Torch-Compiled Region: 0/0` (torch 2.1+
    records both; the CompiledFunction is then that region's graph, not a second region)."""
    events: list[hm.Event] = []
    corr = 1
    for n in range(steps):
        start = 1000 + 1000 * n
        events.append(hm.step(n, start, 900))
        if with_frames:
            events.append({**hm.cpu_op("Torch-Compiled Region: 0/0", start + 5, 200), "cat": "cpu_op"})
        events.append(hm.cpu_op("CompiledFunction", start + 10, 100))
        events.append(hm.launch(start + 20, corr))
        events.append(hm.kernel(FORWARD_KERNEL, start + 30, 20, corr))
        corr += 1
        events.append(hm.cpu_op("CompiledFunctionBackward", start + 300, 80, tid=2))
        events.append(hm.launch(start + 310, corr, tid=2))
        events.append(hm.kernel(BACKWARD_KERNEL, start + 320, 30, corr))
        corr += 1
    return hm.write(tmp_path / "aot.json", hm.document(events))


def _check(cli, path: Path, *args: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    out = cli("compile-check", path, "--format", "json", *args)
    assert out.code in (0, 1), out.err
    return out.code, json.loads(out.out)


def test_compiled_function_generation_is_recognised(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, data = _check(cli, _aot_trace(tmp_path))
    assert code == 0
    kinds = [r["kind"] for r in data["regions"]]
    assert kinds == ["forward", "backward"] * 3 and not any(r["nested"] for r in data["regions"])
    assert [r["frame"] for r in data["regions"]] == [None] * 6
    assert data["regions_per_step"] == [{"step": n, "regions": 2} for n in range(3)]
    assert data["graph_breaks"] is None and data["frames"] == [] and data["recompiles"] == 0
    assert data["compiled_gpu_us"] == data["gpu_us"] == 3 * (20 + 30)
    ops = {k["name"]: k["ops"] for k in data["fused_kernels"]}
    assert ops == {
        FORWARD_KERNEL: ["to_copy", "add", "relu"],
        BACKWARD_KERNEL: ["scaled_dot_product_flash_attention_backward", "native_layer_norm_backward"],
    }
    table = " ".join(cli("compile-check", _aot_trace(tmp_path), "--width", "200").out.split())
    assert "compiled regions: 6" in table and "graph breaks: not recorded" in table


def test_a_graph_break_gate_is_never_passed_unchecked(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, data = _check(cli, _aot_trace(tmp_path), "--max-graph-breaks", "0")
    assert code == 1 and data["violations"] == [
        "graph breaks not recorded (CompiledFunction regions carry no frame id)"
    ]


def test_compiled_function_inside_a_region_is_that_region(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, data = _check(cli, _aot_trace(tmp_path, with_frames=True), "--max-graph-breaks", "0")
    assert code == 0
    assert [r["kind"] for r in data["regions"]] == ["frame", "backward"] * 3
    assert data["graph_breaks"] == 0 and data["frames"] == [0] and data["nested_regions"] == 0
