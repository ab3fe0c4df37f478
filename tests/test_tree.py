"""`opscope tree`: the hierarchy adds up (children = parent, root = all GPU time), agrees with `ops` and with a
raw recomputation of per-module GPU time, pruning works, and the command's outputs."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from dataclasses import replace

import polars as pl
import pytest

import opscope
import reference as ref
from conftest import corpus_path
from opscope.analysis.attribution.ops import OpOptions, op_stats
from opscope.analysis.attribution.tree import (
    ROW,
    TreeNode,
    TreeOptions,
    _hash,
    _label_hashes,
    _paths,
    _text_hash,
    op_tree,
    op_trees,
)

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
QWEN = "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
RESNET_2021 = "kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz"
GPU_ONLY = "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz"


def walk(node: TreeNode, depth: int = 0):
    yield node, depth
    for child in node.children:
        yield from walk(child, depth + 1)


@pytest.mark.parametrize("relative", [BERT, QWEN, RESNET_2021, GPU_ONLY])
@pytest.mark.parametrize("python", ["modules", "all", "none"])
def test_tree_adds_up(relative: str, python: str) -> None:
    trace = opscope.load(corpus_path(relative))
    tree = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python=python))
    events = ref.load(corpus_path(relative))
    total = sum(
        ref.gpu_dur(events, i) for i, e in enumerate(events) if e.get("cat") in ref.GPU_CATS and ref.is_x(e)
    )
    assert tree.root.gpu_ns == tree.gpu_time_ns == total
    for node, _ in walk(tree.root):
        if node.children:
            assert sum(c.gpu_ns for c in node.children) == node.gpu_ns, node.name
        if node.kind in ("kernel", "memcpy", "memset"):
            assert not node.children and node.self_gpu_ns == node.gpu_ns
        else:
            leaves = sum(c.gpu_ns for c in node.children if c.kind in ("kernel", "memcpy", "memset"))
            assert node.self_gpu_ns == leaves
    unattributed = [n for n in tree.root.children if n.kind == "unattributed"]
    assert sum(n.gpu_ns for n in unattributed) == pytest.approx(tree.unattributed_share * total)


@pytest.mark.parametrize("relative", [BERT, QWEN, RESNET_2021, GPU_ONLY])
@pytest.mark.parametrize("python", ["modules", "all", "user", "none"])
def test_both_trees_in_one_pass_equal_each_tree(relative: str, python: str) -> None:
    """`op_trees` (the report's two trees: the merged one derived from the per-instance one's nodes) equals
    `op_tree` with modules "types" and "instances", node for node, pruned and unpruned; BERT and Qwen have
    module instances to merge (Qwen: 24 decoder layers), so the two trees really differ there."""
    trace = opscope.load(corpus_path(relative))
    for depth, share in ((0, 0.0), (4, 0.05), (0, 1 / 5000)):
        options = TreeOptions(depth=depth, min_share=share, python=python)
        types, instances = op_trees(trace, options)
        assert types == op_tree(trace, options)
        assert instances == op_tree(trace, replace(options, modules="instances"))
        if relative in (BERT, QWEN) and python in ("modules", "all") and depth == 0 and share == 0:
            assert types.root != instances.root and types.nodes < instances.nodes


def test_op_nodes_agree_with_ops() -> None:
    # Summing the self GPU time of every tree node of an op name gives that name's GPU self time in `ops`.
    trace = opscope.load(corpus_path(QWEN))
    tree = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python="all"))
    by_name: dict[str, int] = defaultdict(int)
    for node, _ in walk(tree.root):
        if node.kind in ("cpu_op", "user_annotation"):
            by_name[node.name] += node.self_gpu_ns
    ops = {r.name: r.gpu_self_ns for r in op_stats(trace, OpOptions(top=0)).rows if r.gpu_self_ns}
    assert {k: v for k, v in by_name.items() if v} == ops


def test_module_time_matches_raw() -> None:
    # Raw: GPU time of the kernels whose launch lies inside each `nn.Module: X` frame (time containment).
    path = corpus_path(BERT)
    events = ref.load(path)
    raw = ref.link(events)
    modules = [
        i
        for i, e in enumerate(events)
        if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ") and ref.is_x(e)
    ]
    expected: dict[str, int] = defaultdict(int)
    for m in modules:
        lo, hi = ref.span(events[m])
        pid, tid = events[m]["pid"], events[m]["tid"]
        for g in raw.gpu:
            launch = raw.launch[g]
            if launch is None or (events[launch]["pid"], events[launch]["tid"]) != (pid, tid):
                continue
            start, end = ref.span(events[launch])
            if lo <= start and end <= hi:
                expected[events[m]["name"]] += ref.gpu_dur(events, g)
    trace = opscope.load(path)
    tree = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python="modules", modules="instances"))
    got: dict[str, int] = defaultdict(int)
    for node, _ in walk(tree.root):
        if node.kind == "nn.Module":
            got[node.name] += node.gpu_ns  # instance names (Linear_3) are unique: one node each
    assert dict(got) == {k: v for k, v in expected.items() if v}
    # The default module-type view: Linear_0 ... Linear_N are one node per parent path, their times summed.
    by_type: dict[str, int] = defaultdict(int)
    for name, ns in expected.items():
        by_type[re.sub(r"_\d+$", "", name)] += ns
    calls: dict[str, int] = defaultdict(int)
    for m in modules:
        calls[re.sub(r"_\d+$", "", events[m]["name"])] += 1
    types = op_tree(trace, TreeOptions(depth=0, min_share=0.0, python="modules"))
    got_types: dict[str, int] = defaultdict(int)
    got_calls: dict[str, int] = defaultdict(int)
    for node, _ in walk(types.root):
        if node.kind == "nn.Module":
            got_types[node.name] += node.gpu_ns
            got_calls[node.name] += node.calls
    assert dict(got_types) == {k: v for k, v in by_type.items() if v}
    assert all(got_calls[k] == calls[k] for k in got_calls)
    assert any(c > 1 for c in got_calls.values())  # some type really merged several instances


def test_pruning_by_depth_and_share() -> None:
    trace = opscope.load(corpus_path(QWEN))
    tree = op_tree(trace, TreeOptions(depth=2, min_share=0.05, hot_path=False))
    for node, depth in walk(tree.root):
        assert depth <= 2
        if node.kind != "other" and depth > 0:
            assert node.gpu_ns >= 0.05 * tree.gpu_time_ns
        if node.children:
            assert sum(c.gpu_ns for c in node.children) == node.gpu_ns
    assert any(n.kind == "other" for n, _ in walk(tree.root))
    assert tree.nodes == sum(1 for _ in walk(tree.root)) - 1


def test_below_the_depth_every_child_above_the_share_is_followed() -> None:
    """Issue 28: below --depth, every child above --min-share is followed down to its kernel (only the biggest was,
    and a 40% sibling folded into "(N more)")."""
    tree = op_tree(opscope.load(corpus_path(QWEN)), TreeOptions(depth=2, min_share=0.05))
    threshold = 0.05 * tree.gpu_time_ns
    deep = [(n, d) for n, d in walk(tree.root) if d > 2 and n.kind != "other"]
    assert deep and max(d for _, d in deep) > 3
    assert len({d for _, d in deep}) < len(deep)  # several nodes on some level: not a single chain
    for node, _ in walk(tree.root):
        real = [c for c in node.children if c.kind != "other"]
        assert all(c.gpu_ns >= threshold for c in real)
        for folded in (c for c in node.children if c.kind == "other"):  # "(N more)": each one under the share
            count = int(folded.name.strip("()").split()[0])
            assert folded.gpu_ns < count * threshold
        if node.kind in ("kernel", "memcpy", "memset"):
            assert not node.children
        elif node.kind != "other" and node is not tree.root and not node.children:
            assert node.self_gpu_ns == 0 or node.gpu_ns < threshold
        if node.children:
            assert sum(c.gpu_ns for c in node.children) == node.gpu_ns
    leaves = [n for n, _ in deep if n.kind in ("kernel", "memcpy", "memset")]
    assert len(leaves) > 1  # more than one kernel reached below the depth


def test_step_markers_fold_into_one_node() -> None:
    tree = op_tree(opscope.load(corpus_path(RESNET_2021)), TreeOptions(depth=1, min_share=0.0))
    steps = [n for n in tree.root.children if n.name.startswith("ProfilerStep")]
    assert [(n.name, n.calls) for n in steps] == [("ProfilerStep#*", 6)]


def test_cli_outputs(cli) -> None:
    path = corpus_path(BERT)
    result = cli("tree", path, "--format", "json", "--depth", "3")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "opscope.tree/1" and data["unattributed_share"] == 0.0
    root = data["root"]
    assert set(root) == {"name", "kind", "gpu_us", "self_gpu_us", "calls", "children"}
    assert root["gpu_us"] == data["gpu_time_us"]
    top = root["children"][0]
    assert top["name"] == "ProfilerStep#*" and top["children"][0]["name"] == "nn.Module: BertLMHeadModel"
    assert data["options"]["modules"] == "types"
    table = cli("tree", path, "--width", "120", "--no-color")
    assert table.code == 0 and "  nn.Module: BertLMHeadModel " in table.out
    assert re.search(r"nn\.Module: BertLayer x\d+", table.out)  # the encoder layers, merged by type
    instances = cli("tree", path, "--width", "120", "--no-color", "--modules", "instances")
    assert (
        "  nn.Module: BertLMHeadModel_0" in instances.out
        and " x" not in instances.out.split("nn.Module")[1][:40]
    )
    csv_rows = list(csv.DictReader(io.StringIO(cli("tree", path, "--format", "csv").out)))
    assert list(csv_rows[0]) == ["name", "kind", "depth", "calls", "gpu_us", "self_gpu_us", "share"]
    assert float(csv_rows[0]["gpu_us"]) == pytest.approx(data["gpu_time_us"])  # ProfilerStep#* holds it all
    md = cli("tree", path, "--format", "markdown", "--depth", "2")
    assert "| `ProfilerStep#*` | user_annotation | 0 | 1 | 0.309 |" in md.out


def test_cli_errors(cli) -> None:
    path = corpus_path(BERT)
    for args, message in (
        (("--depth", "-1"), "--depth"),
        (("--min-share", "5"), "--min-share"),
        (("--steps", "1"), "no step 1"),
    ):
        result = cli("tree", path, *args)
        assert result.code == 2 and message in result.err, result.err


def test_label_hashes_are_the_texts_hashes() -> None:
    """The per-row label hashes taken from category codes equal the hash of each row's text (renamed, null)."""
    names = pl.Series(["a_1", None, "b", "a_1", "a_2"], dtype=pl.Categorical)
    text = pl.Series(["a", None, "b", "a", "a"], dtype=pl.String)
    got = _label_hashes(names, {"a_1": "a", "a_2": "a"})
    assert got.to_list() == pl.select(_text_hash(pl.lit(text))).to_series().to_list()
    blank = _label_hashes(names, null="")
    assert blank[1] == pl.select(_text_hash(pl.lit(""))).item() != got[1]
    assert _label_hashes(names.clear()).len() == 0
    assert _label_hashes(names.cast(pl.String), {"a_1": "a", "a_2": "a"}).equals(got)  # text names too


def test_paths_level_by_level() -> None:
    """Hand-made forest: equal (parent path, label) give one path id, the parent's path id is `up`; a node
    whose parent is missing and the nodes on a cycle are left out with everything below them."""
    h = [int(x) for x in pl.select(_text_hash(pl.lit(pl.Series(["x", "y"])))).to_series()]
    nodes = pl.DataFrame(
        {
            ROW: [0, 1, 2, 3, 4, 5, 6, 7, 8],
            "up_row": [None, 0, 0, 1, None, 99, 5, 8, 7],  # 5: parent missing; 7 and 8: a cycle
            "label_h": [h[0], h[1], h[1], h[0], h[0], h[0], h[0], h[0], h[0]],
            "calls": [1, 2, 3, 4, 5, 6, 7, 8, 9],
        },
        schema_overrides={"label_h": pl.UInt64},
    )
    got = {r[ROW]: r for r in _paths(nodes).iter_rows(named=True)}
    assert sorted(got) == [0, 1, 2, 3, 4] and got[3]["calls"] == 4
    root = pl.select(_hash(pl.lit(0, dtype=pl.UInt64), pl.lit(h[0], dtype=pl.UInt64))).item()
    assert got[0]["path"] == got[4]["path"] == root and got[0]["up"] == 0
    assert got[1]["path"] == got[2]["path"] != root and got[1]["up"] == root
    assert got[3]["up"] == got[1]["path"] and got[3]["path"] not in (root, got[1]["path"])
    shuffled = {
        r[ROW]: r["path"] for r in _paths(nodes.reverse().with_columns(pl.col(ROW))).iter_rows(named=True)
    }
    assert shuffled == {k: v["path"] for k, v in got.items()}  # the same ids whatever the rows' order
