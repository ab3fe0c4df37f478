"""`opscope lines`: GPU time by the user's source line, checked against an independent walk of the raw
`python_function` events (json module, plain loops: the innermost kept frame on the launch's thread at the launch's
start, by a backwards scan over that thread's frames sorted by start), on every corpus trace with Python stacks;
rows + unattributed = GPU time everywhere; the command's formats and its edge cases."""

from __future__ import annotations

import bisect
import csv
import io
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.attribution.frames import FrameFilter
from opscope.analysis.attribution.lines import LineOptions, source_lines

VALIDITY_KEYS = {"validity", "validity_banners"}  # every document's (docs/validity.md)

STACKS = [
    "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/mi300__Falconsai_nsfw_image_detection__1016002.json.gz",
    "tracelens/mi300__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
    "tracelens/inference__vllm_decode_full__graph_execution.json.gz",
    "tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz",
]
NO_STACKS = [
    "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz",
    "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz",
]
VIT = STACKS[0]
QWEN = STACKS[1]

# ---- the reference: which frames are the user's (docs/analysis-attribution.md), written out plainly -----------

FRAME = re.compile(r"^(.*)\((\d+)\): (.*)$")


def framework(name: str, keep: tuple[str, ...] = ()) -> bool:
    """Whether the frame `name` is framework code that is not kept."""
    group = None
    match = FRAME.match(name)
    path = match.group(1) if match else None
    short = path
    if path is not None:
        for marker in ("site-packages/", "dist-packages/"):
            if marker in short:
                short = short[short.rindex(marker) + len(marker) :]
    first = short.split("/")[0] if short and not short.startswith(("/", "<")) else ""
    module = first[:-3] if first.endswith(".py") else first
    if name.startswith("<built-in "):
        group = "builtins"
    elif short is not None and (
        short.startswith(("torch/_inductor/", "<eval_with_key>"))
        or "torchinductor_" in short
        or short.startswith("triton/")
        or "/triton/" in short
    ):
        group = "compiled"
    elif name.startswith("nn.Module: ") or module == "torch":
        group = "torch"
    elif path is not None and (
        (re.search(r"(^|/)lib/python\d+(\.\d+)?/", path) and "-packages/" not in path)
        or path.startswith("<frozen ")
        or path == "<string>"
        or module in sys.stdlib_module_names
    ):
        group = "stdlib"
    return group is not None and group not in keep


def raw_lines(events: list[dict], keep: tuple[str, ...] = ()) -> tuple[dict[str, int], int]:
    """{frame name: GPU ns charged} and the total GPU ns, walking the raw events."""
    charged: dict[str, int] = defaultdict(int)
    for g, frame in raw_frames(events, keep).items():
        if frame is not None:
            charged[frame] += ref.gpu_dur(events, g)
    return dict(charged), sum(ref.gpu_dur(events, g) for g in ref.link(events).gpu)


def raw_frames(events: list[dict], keep: tuple[str, ...] = ()) -> dict[int, str | None]:
    """{GPU event index: the name of the innermost kept frame around its launch (None: none)}."""
    frames: dict[tuple[str, str], list[tuple[int, int, int, int]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("cat") == "python_function" and ref.is_x(e) and not framework(e["name"], keep):
            s, end = ref.span(e)
            frames[(str(e.get("pid")), str(e.get("tid")))].append((s, -(end - s), i, end))
    for items in frames.values():
        items.sort()
    starts = {k: [it[0] for it in v] for k, v in frames.items()}
    linked = ref.link(events)
    out: dict[int, str | None] = {}
    for g in linked.gpu:
        out[g] = None
        launch = linked.launch[g]
        if launch is None:
            continue
        call = events[launch]
        key = (str(call.get("pid")), str(call.get("tid")))
        at = ref.span(call)[0]
        items = frames.get(key, [])
        k = bisect.bisect_right(starts.get(key, []), at)
        # items[:k] start at or before the launch; the last of them (latest start, shortest on ties) that
        # is still open at the launch is the innermost kept frame around it
        for _s, _neg, idx, end in reversed(items[:k]):
            if end >= at:
                out[g] = events[idx]["name"]
                break
    return out


def raw_cpu_self(events: list[dict], keep: tuple[str, ...] = ()) -> dict[str, int]:
    """{kept frame name: sum over its events of (duration - durations of the scopes directly inside it)}."""
    scopes = [i for i, e in enumerate(events) if e.get("cat") in ref.SCOPE_CATS and ref.is_x(e)]
    parent = ref.innermost(events, scopes, scopes)
    inside: dict[int, int] = defaultdict(int)
    for child, up in parent.items():
        if up is not None:
            s, e = ref.span(events[child])
            inside[up] += e - s
    out: dict[str, int] = defaultdict(int)
    for i in scopes:
        e = events[i]
        if e.get("cat") == "python_function" and not framework(e["name"], keep):
            s, end = ref.span(e)
            out[e["name"]] += max(end - s - inside[i], 0)
    return dict(out)


@pytest.mark.corpus
@pytest.mark.parametrize("relative", STACKS)
def test_every_row_matches_the_raw_walk(relative: str) -> None:
    path = corpus_path(relative)
    events = ref.load(path)
    expected, total = raw_lines(events)
    result = source_lines(opscope.load(path), LineOptions(top=0))
    assert result.has_stacks
    assert result.gpu_time_ns == total
    assert {r.frame: r.gpu_ns for r in result.rows} == expected
    assert sum(r.gpu_ns for r in result.rows) + result.unattributed_ns == total
    assert result.missing_launch_ns + result.outside_frames_ns == result.unattributed_ns
    selfs = raw_cpu_self(events)
    assert {r.frame: r.cpu_self_ns for r in result.rows} == {f: selfs[f] for f in expected}
    for r in result.rows:
        assert r.path == (r.frame,) and r.share == pytest.approx(r.gpu_ns / total)
        assert sum(n.gpu_ns for n in r.top_kernels) <= r.gpu_ns and len(r.top_kernels) <= 3


@pytest.mark.corpus
def test_keep_torch_moves_time_into_torch_frames() -> None:
    path = corpus_path(VIT)
    events = ref.load(path)
    expected, _ = raw_lines(events, keep=("torch",))
    result = source_lines(opscope.load(path), LineOptions(top=0, frames=FrameFilter(keep=("torch",))))
    assert {r.frame: r.gpu_ns for r in result.rows} == expected
    assert any(r.frame.startswith("torch/") for r in result.rows)


@pytest.mark.corpus
@pytest.mark.parametrize("relative", NO_STACKS)
def test_traces_without_stacks_leave_everything_unattributed(relative: str) -> None:
    path = corpus_path(relative)
    events = ref.load(path)
    total = sum(ref.gpu_dur(events, i) for i in ref.link(events).gpu)
    result = source_lines(opscope.load(path))
    assert (
        not result.has_stacks and result.rows == () and result.unattributed_ns == result.gpu_time_ns == total
    )


# ---- the command -------------------------------------------------------------------------------------------------

ROW_KEYS = {
    "frame",
    "file",
    "line",
    "function",
    "gpu_time_us",
    "share",
    "kernels",
    "top_ops",
    "top_kernels",
    "cpu_self_us",
    "path",
}


@pytest.mark.corpus
def test_json_has_exactly_the_documented_fields(cli) -> None:
    path = corpus_path(VIT)
    out = cli("lines", path, "--format", "json", "--top", "0")
    assert out.code == 0, out.err
    data = json.loads(out.out)
    assert (
        set(data)
        == {"schema", "trace", "gpu_time_us", "unattributed_us", "skip_prefixes", "rows"} | VALIDITY_KEYS
    )
    assert data["schema"] == "opscope.lines/1" and data["trace"]["path"] == str(path)
    assert "torch/" in data["skip_prefixes"] and "<built-in " in data["skip_prefixes"]
    result = source_lines(opscope.load(path), LineOptions(top=0))
    assert data["gpu_time_us"] == round(result.gpu_time_ns / 1e3, 3)
    assert len(data["rows"]) == len(result.rows)
    for row, expected in zip(data["rows"], result.rows, strict=True):
        assert set(row) == ROW_KEYS
        assert row["frame"] == expected.frame and row["gpu_time_us"] == round(expected.gpu_ns / 1e3, 3)
        assert f"{row['file']}({row['line']}): {row['function']}" == row["frame"]
        assert row["path"] == [row["frame"]]
        assert set(row["top_ops"][0]) == {"name", "gpu_time_us"}
    assert sum(r["gpu_time_us"] for r in data["rows"]) + data["unattributed_us"] == pytest.approx(
        data["gpu_time_us"], abs=1e-3 * (len(data["rows"]) + 1)
    )
    top = data["rows"][0]
    assert top["frame"] == "transformers/models/vit/modeling_vit.py(252): forward"


@pytest.mark.corpus
def test_table_csv_and_markdown(cli) -> None:
    path = corpus_path(QWEN)
    data = json.loads(cli("lines", path, "--format", "json").out)
    table = cli("lines", path, "--width", "160", "--top", "5")
    assert table.code == 0, table.err
    assert "modeling_qwen2.py(56): forward" in table.out and "transformers/models" not in table.out
    unattributed = data["unattributed_us"] / 1e3
    assert (
        f"unattributed: {unattributed:,.3f} ms" in table.out
        and "launch call is not in the trace" in table.out
    )
    assert "more rows (--top 0 shows all)" in table.out
    rows = list(csv.DictReader(io.StringIO(cli("lines", path, "--format", "csv").out)))
    assert [r["full_frame"] for r in rows] == [r["frame"] for r in data["rows"]]
    assert [float(r["gpu_us"]) for r in rows] == [r["gpu_time_us"] for r in data["rows"]]
    markdown = cli("lines", path, "--format", "markdown").out
    assert markdown.startswith("### GPU time by source line") and "| Frame |" in markdown


@pytest.mark.corpus
def test_depth_groups_by_short_call_paths(cli) -> None:
    path = corpus_path(QWEN)
    one = json.loads(cli("lines", path, "--format", "json", "--top", "0").out)
    three = json.loads(cli("lines", path, "--format", "json", "--top", "0", "--depth", "3").out)
    assert three["unattributed_us"] == one["unattributed_us"]
    by_frame: dict[str, float] = defaultdict(float)
    for row in three["rows"]:
        assert 1 <= len(row["path"]) <= 3 and row["path"][-1] == row["frame"]
        by_frame[row["frame"]] += row["gpu_time_us"]
    assert by_frame == pytest.approx({r["frame"]: r["gpu_time_us"] for r in one["rows"]}, abs=1e-2)
    assert any(len(r["path"]) == 3 for r in three["rows"])


@pytest.mark.corpus
def test_steps_and_skip_prefix(cli) -> None:
    path = corpus_path(QWEN)
    events = ref.load(path)
    (first, _s, _e), *_ = ref.step_windows(events)
    windows = [(s, e) for n, s, e in ref.step_windows(events) if n == first]
    linked = ref.link(events)
    in_step = sum(
        ref.gpu_dur(events, g)
        for g in linked.gpu
        if ref.in_steps(
            ref.span(events[linked.launch[g]])[0] if linked.launch[g] is not None else ref.span(events[g])[0],
            windows,
        )
    )
    data = json.loads(cli("lines", path, "--format", "json", "--steps", str(first)).out)
    assert data["gpu_time_us"] * 1e3 == pytest.approx(in_step, abs=1)
    skipped = json.loads(cli("lines", path, "--format", "json", "--skip-prefix", "transformers/models/").out)
    assert "transformers/models/" in skipped["skip_prefixes"]
    assert skipped["rows"] and not any(r["frame"].startswith("transformers/models/") for r in skipped["rows"])


@pytest.mark.corpus
def test_trace_without_stacks_says_how_to_record_them(cli) -> None:
    path = corpus_path(NO_STACKS[0])
    out = cli("lines", path)
    assert out.code == 0
    assert "no Python stacks" in out.out and "with_stack=True" in out.out
    data = json.loads(cli("lines", path, "--format", "json").out)
    assert data["rows"] == [] and data["unattributed_us"] == data["gpu_time_us"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--depth", "0"), "--depth"), (("--top", "-1"), "--top"), (("--skip-prefix", ""), "--skip-prefix")],
)
def test_bad_options_are_one_line_errors(cli, tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}', encoding="utf-8")
    out = cli("lines", trace, *args)
    assert out.code == 2 and message in out.err and len(out.err.strip().splitlines()) == 1


@pytest.mark.corpus
def test_tree_python_user_collapses_framework_frames(cli) -> None:
    from opscope.analysis.attribution.tree import TreeNode, TreeOptions, op_tree

    path = corpus_path(VIT)
    trace = opscope.load(path)

    def walk(node: TreeNode, depth: int = 0):
        yield node, depth
        for child in node.children:
            yield from walk(child, depth + 1)

    user = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python="user"))
    every = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python="all"))
    frames = [n for n, _ in walk(user.root) if n.kind == "python_function"]
    assert frames and not any(framework(n.name) for n in frames)
    assert user.root.gpu_ns == every.root.gpu_ns == user.gpu_time_ns
    for node, _ in walk(user.root):
        if node.children:
            assert sum(c.gpu_ns for c in node.children) == node.gpu_ns
    deepest = {
        kind: max(d for n, d in walk(t.root) if n.kind == "kernel") for kind, t in (("u", user), ("a", every))
    }
    assert deepest["u"] <= deepest["a"] // 2  # 17 levels instead of 35 on this trace
    out = cli("tree", path, "--python", "user", "--format", "json")
    assert out.code == 0 and json.loads(out.out)["options"]["python"] == "user"


@pytest.mark.corpus
def test_findings_point_at_the_code_that_launched_them(cli) -> None:
    """Each evidence item naming a kernel (or an op) carries the user frame that launched the most GPU time of
    that kernel (of the GPU work under that CPU op), by the raw walk; the terminal says "at file(line): ..."."""
    path = corpus_path(QWEN)
    events = ref.load(path)
    frames = raw_frames(events)
    linked = ref.link(events)
    by_kernel: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_op: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for g, frame in frames.items():
        if frame is None:
            continue
        by_kernel[events[g]["name"]][frame] += ref.gpu_dur(events, g)
        op, names = linked.op[g], set()
        while op is not None:
            if events[op].get("cat") in ref.CPU_OP_CATS:
                names.add(events[op]["name"])
            op = linked.op_parent.get(op)
        for name in names:
            by_op[name][frame] += ref.gpu_dur(events, g)

    def top(table: dict[str, int]) -> str:
        return min(table, key=lambda f: (-table[f], f))

    data = json.loads(cli("advise", path, "--format", "json").out)
    checked = 0
    for finding in data["findings"]:
        for item in finding["evidence"]:
            kernels = [
                k
                for k in ([item["kernel"]] if "kernel" in item else item.get("kernels", []))
                if k in by_kernel
            ]
            ops = [item[k] for k in ("op", "cpu_op") if item.get(k) in by_op]
            expected = top(by_kernel[kernels[0]]) if kernels else top(by_op[ops[0]]) if ops else None
            assert item.get("frame") == expected, item
            checked += expected is not None
    assert checked >= 5
    table = cli("advise", path, "--width", "200").out
    assert " at modeling_qwen2.py(68): apply_rotary_pos_emb" in table
    no_stacks = json.loads(cli("advise", corpus_path(NO_STACKS[0]), "--format", "json").out)
    assert not any("frame" in item for f in no_stacks["findings"] for item in f["evidence"])


def test_hand_made_edge_cases(cli, tmp_path: Path) -> None:
    """HAND-MADE trace (handmade_traces.with_stack_trace): ties on start, a launch at a frame's end, a thread
    with only stdlib frames, a missing launch, hostile frame names in every format."""
    from handmade_traces import FORMULA_FRAME, HOSTILE_FRAME, document, with_stack_trace, write

    events, expected, missing, outside = with_stack_trace()
    path = write(tmp_path / "stack.json", document(events))
    result = source_lines(opscope.load(path), LineOptions(top=0))
    assert {r.frame: r.gpu_ns for r in result.rows} == expected
    assert (result.missing_launch_ns, result.outside_frames_ns) == (missing, outside)
    assert result.unattributed_ns == missing + outside
    assert raw_lines(ref.load(path))[0] == expected  # the reference walk agrees on the hand-made cases
    (block,) = [r for r in result.rows if r.function == "block"]
    # no frame, op or annotation runs inside it (launch calls are not scopes, as in `ops`)
    assert block.path == ("app/model.py(30): block",) and block.cpu_self_ns == 100_000
    (deep,) = [
        r for r in source_lines(opscope.load(path), LineOptions(depth=3)).rows if r.function == "block"
    ]
    assert deep.path == ("app/train.py(10): main", "app/model.py(20): forward", "app/model.py(30): block")
    table = cli("lines", path, "--width", "200")
    assert table.code == 0 and "\x1b" not in table.out and "evil.py(7): \\x1b[31mpwn" in table.out
    data = json.loads(cli("lines", path, "--format", "json").out)
    assert {r["frame"] for r in data["rows"]} == set(expected)
    rows = {
        r["full_frame"]: r for r in csv.DictReader(io.StringIO(cli("lines", path, "--format", "csv").out))
    }
    assert "'" + FORMULA_FRAME in rows
    assert HOSTILE_FRAME.replace("\x1b", "\\x1b") in rows
    markdown = cli("lines", path, "--format", "markdown").out
    assert "<img" not in markdown.replace("`<img", "")


@pytest.mark.corpus
def test_python_api_and_notebook_table() -> None:
    trace = opscope.load(corpus_path(VIT))
    result = opscope.lines(trace, top=0, keep=("torch",))
    assert isinstance(result, opscope.SourceLines) and "lines" in opscope.__all__
    expected, _ = raw_lines(ref.load(corpus_path(VIT)), keep=("torch",))
    assert {r.frame: r.gpu_ns for r in result.rows} == expected
    table = result.to_polars()
    assert table["frame"].to_list() == [r.frame for r in result.rows] and "gpu_ns" in table.columns


@pytest.mark.slow
@pytest.mark.corpus
def test_tiled_trace_scales_linearly(tmp_path: Path) -> None:
    """The Qwen trace tiled 1x / 4x / 16x (make_big_trace, distinct steps): every row of the 4x trace is 4 times
    the 1x row (GPU time, kernels, CPU self), and the peak memory of `opscope lines` grows no faster than the
    trace (4x -> 16x at most 6 times the growth of 1x -> 4x: linear is 4)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from make_big_trace import make_big_trace
    from test_analysis_scale import peak_kb

    paths = {
        n: Path(
            make_big_trace(corpus_path(QWEN), tmp_path / f"x{n}.json.gz", copies=n, distinct_steps=True).path
        )
        for n in (1, 4, 16)
    }
    one = source_lines(opscope.load(paths[1], cache=False), LineOptions(top=0))
    four = source_lines(opscope.load(paths[4], cache=False), LineOptions(top=0))
    assert [(r.frame, 4 * r.gpu_ns, 4 * r.kernels, 4 * r.cpu_self_ns) for r in one.rows] == [
        (r.frame, r.gpu_ns, r.kernels, r.cpu_self_ns) for r in four.rows
    ]
    assert four.unattributed_ns == 4 * one.unattributed_ns
    cache = tmp_path / "cache"
    for path in paths.values():
        peak_kb(["summary", str(path)], cache)  # warm runs only
    peak = {n: peak_kb(["lines", str(path)], cache) for n, path in paths.items()}
    assert peak[16] - peak[4] <= 6 * max(peak[4] - peak[1], 1), peak
