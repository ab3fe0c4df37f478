"""Hierarchy of GPU time: Python frames / nn.Module / user annotations -> ops -> kernels, merged by path (all
instances of the same call path are one node) with GPU time rolled up. This is what `opscope tree` prints.

The CPU tree is time nesting on each thread (`analysis.base.linking`); which scopes are shown is chosen by
`python`: "modules" keeps only `nn.Module: ...` frames among Python frames, "all" keeps every frame, "none"
none, "user" the frames of the user's own code (framework frames collapsed, `attribution.frames`, as
`opscope lines` tells them apart). A hidden scope's children attach to its nearest shown ancestor (pointer jumping on the linked tree, no
second nesting). Each GPU event becomes a leaf under the innermost shown scope enclosing its launch; GPU
events with no such scope (launch missing, or inside no shown scope) hang under one "(unattributed)" node, so
the root always holds all selected GPU time. Path ids are computed top-down, one vectorised join per tree
level; roll-up is one join over (node, ancestor) pairs of the path tree.

`modules`: "types" (default) merges the instances of one module type under one parent (`nn.Module:
Owlv2EncoderLayer_0` ... `_23` become `nn.Module: Owlv2EncoderLayer`, calls = 24: PyTorch numbers instances
`<Class>_<N>`, and the suffix is dropped); "instances" keeps one node per instance. `hot_path` (default on):
below `depth`, every child above `min_share` (default 5%) of each node is still shown, down to its GPU leaf, so
the default view ends at the kernels that cost most rather than at an arbitrary level (issue 28: only the
biggest child was followed, and a 40% sibling folded into "(N more)").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from opscope.analysis.attribution.frames import user_frame_names
from opscope.analysis.base.arrays import take_or
from opscope.analysis.base.linking import ROW, Linkage, LinkStats, link, once_per_link, selected_gpu
from opscope.analysis.base.nesting import (
    at_positions,
    filled,
    nearest_of_kind,
    positions,
    rooted_depths,
    subtree_sums,
)
from opscope.analysis.base.windows import fold_steps, names_matching
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace
from opscope.tables import Tabular

MODULE_PREFIX = "nn.Module: "
UNATTRIBUTED = "(unattributed)"
ROOT = "(all GPU work)"
MAX_LEVELS = 200
DEEPER = "deeper"  # the kind of the node that stands for the levels below the cut


@dataclass(frozen=True)
class TreeOptions:
    depth: int = 4  # levels below the root to keep (0 = unlimited)
    min_share: float = 0.05  # fold nodes below this share of the root's GPU time
    python: str = "modules"  # which Python frames become nodes: modules | all | none | user
    devices: tuple[int, ...] | None = None
    streams: tuple[int, ...] | None = None
    steps: str | None = None
    modules: str = "types"  # "types": instances of a module type merged; "instances": one node each
    hot_path: bool = True  # below `depth`, keep following every child above min_share down to its GPU leaf
    # levels of nodes built at most (None: all): a deeper tree (a recursive model, 6,000 Python frames deep)
    # ends in one "(N deeper levels)" node per cut branch, so that no view (an indented table, nested JSON)
    # grows with the square of the depth; `export --folded` keeps every level
    max_levels: int | None = MAX_LEVELS


@dataclass(frozen=True)
class TreeNode:
    name: str
    kind: str  # root, python_function, nn.Module, user_annotation, cpu_op, kernel, memcpy, memset, unattributed, other
    gpu_ns: int  # all GPU time at or below this node
    self_gpu_ns: int  # GPU time launched directly here (for a GPU leaf: its own time)
    calls: int  # instances merged into this node (GPU leaves: events)
    children: tuple[TreeNode, ...] = ()


@dataclass(frozen=True)
class OpTree(Tabular):
    path: str
    root: TreeNode
    gpu_time_ns: int
    unattributed_share: float  # share of GPU time under "(unattributed)"
    nodes: int  # nodes kept after pruning (root excluded)
    link: LinkStats
    options: TreeOptions
    warnings: tuple[str, ...] = field(default=())

    def _table_rows(self) -> list[dict[str, Any]]:
        """The tree depth first: one row per node with its depth and its path from the root (walked with a
        stack of its own, not recursion)."""
        out: list[dict[str, Any]] = []
        pending: list[tuple[TreeNode, int, str]] = [(self.root, 0, "")]
        while pending:
            node, depth, path = pending.pop()
            here = f"{path}/{node.name}" if path else node.name
            out.append(
                {
                    "depth": depth,
                    "name": node.name,
                    "kind": node.kind,
                    "gpu_ns": node.gpu_ns,
                    "self_gpu_ns": node.self_gpu_ns,
                    "calls": node.calls,
                    "path": here,
                }
            )
            pending.extend((child, depth + 1, here) for child in reversed(node.children))
        return out


SEED = 7  # of every hash below: path ids are compared within one tree, never stored


def _hash(parent: pl.Expr, label: pl.Expr) -> pl.Expr:
    """A node's path id: the hash of its parent's path id and its label's `_text_hash` (both UInt64)."""
    return pl.struct(parent.alias("p"), label.alias("n")).hash(seed=SEED)


def _text_hash(text: pl.Expr) -> pl.Expr:
    """A label's hash from its text: the same for every node bearing the label, scope or GPU event."""
    return text.hash(seed=SEED)


def _label_hashes(
    names: pl.Series, renamed: dict[str, str] | None = None, null: str | None = None
) -> pl.Series:
    """`_text_hash` of each row's label, from a Categorical column of names: a string and a hash per distinct
    name, then a lookup per row by the category's code (the 1.5 M shown scopes of the 1 GB benchmark trace made
    no string each). `renamed`: labels that differ from the name (module instances -> their type); `null`: the
    label of a missing name (else the hash of a null)."""
    if names.dtype not in (pl.Categorical, pl.Enum):  # text (a frame built by hand): given codes first
        names = names.cast(pl.String).cast(pl.Categorical)
    distinct = names.unique()
    text = distinct.cast(pl.String)
    if null is not None:
        text = text.fill_null(null)
    if renamed:
        text = text.replace(renamed)
    codes = names.to_physical()
    missing = int(codes.drop_nulls().to_numpy().max(initial=0)) + 1  # the slot of a null name
    lookup = np.zeros(missing + 1, dtype=np.uint64)
    lookup[distinct.to_physical().fill_null(missing).to_numpy()] = text.hash(seed=SEED).to_numpy()
    return pl.Series("label_h", lookup[codes.fill_null(missing).to_numpy()], dtype=pl.UInt64)


INSTANCE_SUFFIX = r"_\d+$"  # nn.Module: Qwen2DecoderLayer_13 -> nn.Module: Qwen2DecoderLayer


@dataclass(frozen=True, eq=False)
class _Visible:
    """The shown scopes whatever their labels: `shown` (row, up_row: the nearest shown ancestor's row, name with
    step names folded, kind), every scope's `attach_row` (`attach`: itself if shown, else its nearest shown
    ancestor: where GPU work launched inside it hangs), the module names (`modules`)."""

    shown: pl.DataFrame
    attach: pl.DataFrame
    modules: list[str]


def _visible(scopes: pl.DataFrame, python: str) -> _Visible:
    """The scopes shown as nodes by `python` (see the module doc), each with `up_row` by pointer jumping over the
    hidden ones in the linked call tree (no new nesting)."""
    modules = names_matching(scopes, Col.NAME, "^" + MODULE_PREFIX)
    is_python = pl.col(Col.KIND) == Kind.PYTHON
    if python == "user":
        keep = ~is_python | pl.col(Col.NAME).is_in(_user_frames(scopes))
    else:
        keep = {
            "all": pl.lit(True),
            "modules": ~is_python | pl.col(Col.NAME).is_in(modules),
            "none": ~is_python,
        }[python]
    frame = scopes.select(ROW, "parent_row", Col.NAME, Col.KIND, keep.alias("_keep")).sort(ROW)
    rows = frame[ROW].to_numpy()
    parent = frame["parent_row"].fill_null(-1).to_numpy()
    position = np.where(parent >= 0, np.searchsorted(rows, parent), -1)
    up = nearest_of_kind(position, frame["_keep"].to_numpy())
    frame = frame.with_columns(pl.Series("up_row", take_or(rows, up, -1)))
    frame = frame.with_columns(pl.when(pl.col("up_row") >= 0).then(pl.col("up_row")).alias("up_row"))
    attach = frame.select(
        pl.col(ROW).alias("scope_row"),
        pl.when(pl.col("_keep")).then(pl.col(ROW)).otherwise(pl.col("up_row")).alias("attach_row"),
    )
    shown = fold_steps(frame.filter(pl.col("_keep")).select(ROW, "up_row", Col.NAME, Col.KIND))
    return _Visible(shown=shown, attach=attach, modules=modules)


def _user_frames(scopes: pl.DataFrame) -> list[str]:
    """The names of the Python frames of the user's own code (`attribution.frames`, as `opscope lines`)."""
    return user_frame_names(scopes.filter(pl.col(Col.KIND) == Kind.PYTHON)[Col.NAME]).to_list()


def _paths(nodes: pl.DataFrame) -> pl.DataFrame:
    """Every node's path id (`path`: `_hash` of its parent's path id and its `label_h`) and its parent's (`up`,
    0 at a root). `nodes`: ROW, `up_row` (the parent's ROW, null at a root), `label_h`, and columns passed
    through. Top-down one tree level at a time, each level's query over its own nodes (the whole table once,
    not once per level); a node whose parent is missing (or on a cycle) is left out with its subtree."""
    indexed = nodes.with_row_index("_i")
    parent = _parent_positions(indexed)
    orphan = (parent < 0) & indexed["up_row"].is_not_null().to_numpy()
    depth = rooted_depths(parent)  # -1 on a cycle (a malformed tree): left out
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=-1)) + 2))
    labels = indexed["label_h"].to_numpy()
    path = np.zeros(len(parent), dtype=np.uint64)
    up = np.zeros(len(parent), dtype=np.uint64)
    done = np.zeros(len(parent), dtype=bool)
    for level in range(len(bounds) - 1):
        at = order[bounds[level] : bounds[level + 1]]
        if level == 0:
            at = at[~orphan[at]]
        else:
            at = at[done[parent[at]]]
        if not len(at):
            break
        up[at] = path[parent[at]] if level else 0
        path[at] = (
            pl.DataFrame({"p": up[at], "n": labels[at]}).select(_hash(pl.col("p"), pl.col("n"))).to_series()
        ).to_numpy()
        done[at] = True
    return (
        indexed.with_columns(pl.Series("path", path), pl.Series("up", up))
        .filter(pl.Series(done))
        .drop("_i", "up_row", "label_h")
    )


def _parent_positions(nodes: pl.DataFrame) -> np.ndarray:
    """Each node's parent's position in `nodes` (-1: a root, or a parent not among them): by `positions` over
    the row numbers where they are sorted (the shown scopes), else by a join on the path ids (the per-instance
    tree's nodes, a few thousand)."""
    rows = nodes[ROW]
    if rows.dtype == pl.Int64 and rows.is_sorted():
        return positions(rows.to_numpy(), nodes["up_row"].fill_null(-1).to_numpy())
    parents = nodes.select(pl.col(ROW).alias("up_row"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_up"))
    return filled(
        nodes.select("up_row").join(parents, on="up_row", how="left", maintain_order="left")["_up"], -1
    )


def _scope_paths(scope_rows: pl.Series, attach: pl.DataFrame, paths: pl.DataFrame) -> pl.Series:
    """The path id of the shown node each GPU event hangs under (null: none): its scope's `attach_row`, then
    that row's path, each by a binary search over row-sorted columns instead of joining the scope table
    (1.5 M rows on the 1 GB benchmark trace) twice."""
    attach = attach.sort("scope_row")
    by_row = paths.select(ROW, "path").sort(ROW)
    up = at_positions(
        attach["attach_row"], positions(attach["scope_row"].to_numpy(), scope_rows.fill_null(-1).to_numpy())
    )
    return at_positions(by_row["path"], positions(by_row[ROW].to_numpy(), up.fill_null(-1).to_numpy()))


def op_tree(trace: Trace, options: TreeOptions | None = None, linkage: Linkage | None = None) -> OpTree:
    """The GPU-time hierarchy of `trace` (see the module doc). Pass `linkage` to reuse a `link(trace)`."""
    opts = options or TreeOptions()
    linked = linkage or link(trace)
    return _tree(trace, opts, linked, _nodes(trace, opts, linked))


def op_trees(
    trace: Trace, options: TreeOptions | None = None, linkage: Linkage | None = None
) -> tuple[OpTree, OpTree]:
    """`op_tree` with module instances merged by type and with one node per instance (the report draws both),
    from one pass over the scopes and GPU events: the instance tree's nodes are computed, and the merged
    tree's are derived from them (a node's merged path depends only on its instance path), so the second tree
    costs a few queries over the distinct paths (137 on the 1 GB benchmark trace) instead of another pass over
    its 1.5 M scopes and 390 k GPU events. Equal to `op_tree` with `modules` "types" and "instances"."""
    opts = options or TreeOptions()
    linked = linkage or link(trace)
    per_instance = replace(opts, modules="instances")
    instances = _nodes(trace, per_instance, linked)
    visible = _visible_once(trace, linked, opts.python)
    types = _merged_by_type(instances, _type_labels(visible.modules))
    return (
        _tree(trace, replace(opts, modules="types"), linked, types),
        _tree(trace, per_instance, linked, instances),
    )


@dataclass(frozen=True, eq=False)
class _Nodes:
    """A tree's nodes before roll-up: `scopes` (path, up, label, node_kind, calls: the shown scopes merged by
    path), `leaves` (the same plus self_ns: the GPU events merged by path), the GPU events under no shown scope
    (`outside_calls`, `outside_ns`) and the selected GPU time (`total_ns`)."""

    scopes: pl.DataFrame
    leaves: pl.DataFrame
    outside_calls: int
    outside_ns: int
    total_ns: int


def _visible_once(trace: Trace, linked: Linkage, python: str) -> _Visible:
    # the report draws two trees that differ in their labels only
    return once_per_link(trace, linked, f"tree.visible:{python}", lambda: _visible(linked.scopes, python))


def _unattributed_path() -> pl.Expr:
    return _hash(pl.lit(0, dtype=pl.UInt64), _text_hash(pl.lit(UNATTRIBUTED)))


def _nodes(trace: Trace, opts: TreeOptions, linked: Linkage) -> _Nodes:
    gpu = selected_gpu(trace, linked, opts.devices, opts.streams, opts.steps)
    visible = _visible_once(trace, linked, opts.python)
    renamed = _type_labels(visible.modules) if opts.modules == "types" else None
    shown = visible.shown
    # the labels stay category codes until the nodes are merged by path (text for the distinct nodes only)
    paths = _paths(shown.with_columns(_label_hashes(shown[Col.NAME], renamed)))
    leaves = (
        gpu.select(Col.NAME, Col.KIND, Col.DUR_NS)
        .with_columns(
            _label_hashes(gpu[Col.NAME], null=""),
            _scope_paths(gpu["scope_row"], visible.attach, paths).alias("scope_path"),
        )
        .with_columns(pl.col("scope_path").fill_null(_unattributed_path()).alias("up"))
        .with_columns(_hash(pl.col("up"), pl.col("label_h")).alias("path"))
    )
    leaf_nodes = (
        leaves.group_by("path")
        .agg(
            pl.col("up").first(),
            pl.col(Col.NAME).first(),
            pl.col(Col.KIND).first(),
            pl.len().alias("calls"),
            pl.col(Col.DUR_NS).sum().alias("self_ns"),
        )
        .select(
            "path",
            "up",
            pl.col(Col.NAME).cast(pl.String).fill_null("").alias("label"),
            pl.col(Col.KIND).cast(pl.String).alias("node_kind"),
            "calls",
            "self_ns",
        )
    )
    label = pl.col(Col.NAME).cast(pl.String)
    if renamed:
        label = label.replace(renamed)
    node_kind = (
        pl.when(pl.col(Col.NAME).is_in(visible.modules))
        .then(pl.lit("nn.Module"))
        .otherwise(pl.col(Col.KIND).cast(pl.String))
    )
    scope_nodes = (
        paths.group_by("path")
        .agg(
            pl.col("up").first(), pl.col(Col.NAME).first(), pl.col(Col.KIND).first(), pl.len().alias("calls")
        )
        .select("path", "up", label.alias("label"), node_kind.alias("node_kind"), "calls")
    )
    outside = leaves.filter(pl.col("scope_path").is_null())
    return _Nodes(
        scopes=scope_nodes,
        leaves=leaf_nodes,
        outside_calls=outside.height,
        outside_ns=int(outside[Col.DUR_NS].sum() or 0),
        total_ns=int(gpu[Col.DUR_NS].sum() or 0),
    )


def _type_labels(modules: list[str]) -> dict[str, str]:
    """Each module instance's name -> its type's (the instance suffix dropped once per name)."""
    return {m: re.sub(INSTANCE_SUFFIX, "", m) for m in modules}


def _merged_by_type(instances: _Nodes, labels: dict[str, str]) -> _Nodes:
    """The nodes of the tree with module instances merged by type, from the per-instance tree's: `_paths` run
    over the per-instance paths (each one a row under its parent's path) with the merged labels (`labels`)
    gives each its merged path, as it would from the scopes. Leaves follow their scope (the unattributed path
    is the same in both trees); nodes that meet on one path are summed."""
    by_instance = instances.scopes.select(
        pl.col("path").alias(ROW),
        pl.when(pl.col("up") != 0).then(pl.col("up")).alias("up_row"),
        pl.col("label").replace(labels),
        "node_kind",
        "calls",
    ).with_columns(_text_hash(pl.col("label")).alias("label_h"))
    merged = _paths(by_instance)  # row: the per-instance path; path, up: the merged ones
    unattributed = pl.select(_unattributed_path().alias(ROW), _unattributed_path().alias("path"))
    up_mapping = pl.concat([merged.select(ROW, "path"), unattributed]).select(
        pl.col(ROW).alias("up"), pl.col("path").alias("_type_up")
    )
    merged_scopes = merged.group_by("path", maintain_order=True).agg(
        pl.col("up").first(), pl.col("label").first(), pl.col("node_kind").first(), pl.col("calls").sum()
    )
    merged_leaves = (
        instances.leaves.join(up_mapping, on="up", how="inner", maintain_order="left")
        .with_columns(_hash(pl.col("_type_up"), _text_hash(pl.col("label"))).alias("path"))
        .group_by("path", maintain_order=True)
        .agg(
            pl.col("_type_up").first().alias("up"),
            pl.col("label").first(),
            pl.col("node_kind").first(),
            pl.col("calls").sum(),
            pl.col("self_ns").sum(),
        )
    )
    return _Nodes(
        scopes=merged_scopes.select(instances.scopes.columns).cast(instances.scopes.schema),
        leaves=merged_leaves.select(instances.leaves.columns).cast(instances.leaves.schema),
        outside_calls=instances.outside_calls,
        outside_ns=instances.outside_ns,
        total_ns=instances.total_ns,
    )


def _tree(trace: Trace, opts: TreeOptions, linked: Linkage, found: _Nodes) -> OpTree:
    """The tree of `found`'s nodes: GPU time rolled up to every ancestor, pruned by `opts`."""
    scope_nodes, leaf_nodes = found.scopes, found.leaves
    extra = []
    if found.outside_calls:
        extra.append(
            pl.DataFrame(
                {
                    "path": [int(pl.select(_unattributed_path()).item())],
                    "up": [0],
                    "label": [UNATTRIBUTED],
                    "node_kind": ["unattributed"],
                    "calls": [found.outside_calls],
                },
                schema=scope_nodes.schema,
            )
        )
    nodes = pl.concat([scope_nodes, *extra, leaf_nodes.drop("self_ns")]).unique("path", keep="first")
    direct = leaf_nodes.group_by("up").agg(pl.col("self_ns").sum().alias("direct")).rename({"up": "path"})
    inclusive = _rolled_up(nodes, leaf_nodes)
    is_leaf = pl.col("path").is_in(leaf_nodes["path"].implode())
    nodes = (
        nodes.join(inclusive, on="path", how="left")
        .join(direct, on="path", how="left")
        .with_columns(pl.col("gpu_ns").fill_null(0), pl.col("direct").fill_null(0))
        .with_columns(
            pl.when(is_leaf).then(pl.col("gpu_ns")).otherwise(pl.col("direct")).alias("self_gpu_ns")
        )
    )
    total = found.total_ns
    root, kept = _build(nodes.filter(pl.col("gpu_ns") > 0), total, opts)
    return OpTree(
        path=trace.path,
        root=root,
        gpu_time_ns=total,
        unattributed_share=found.outside_ns / total if total else 0.0,
        nodes=kept,
        link=linked.stats,
        options=opts,
        warnings=trace.meta.warnings,
    )


@dataclass(frozen=True)
class _Rec:
    path: int
    label: str
    kind: str
    gpu_ns: int
    self_gpu_ns: int
    calls: int


def _rolled_up(nodes: pl.DataFrame, leaf_nodes: pl.DataFrame) -> pl.DataFrame:
    """(path, gpu_ns): each node's GPU time, the sum over the GPU leaves at or below it, summed up the tree one
    level at a time, deepest first (`nesting.subtree_sums`): O(nodes) work per level, where (leaf, ancestor)
    pairs held leaves x depth rows. Paths whose parent is not a node are roots."""
    frame = nodes.select("path", "up").join(
        leaf_nodes.select("path", "self_ns"), on="path", how="left", maintain_order="left"
    )
    paths = frame["path"].to_numpy()
    order = np.argsort(paths, kind="stable")
    at = np.searchsorted(paths[order], frame["up"].to_numpy())
    at = np.minimum(at, len(paths) - 1)
    parent = np.where(paths[order][at] == frame["up"].to_numpy(), order[at], -1) if len(paths) else at
    sums = subtree_sums(parent, filled(frame["self_ns"], 0))
    if sums is None:  # parents on a cycle (hash ids cannot close one; a damaged table might): no roll-up
        sums = filled(frame["self_ns"], 0)
    return pl.DataFrame({"path": paths, "gpu_ns": sums}, schema={"path": pl.UInt64, "gpu_ns": pl.Int64})


def _build(nodes: pl.DataFrame, total: int, opts: TreeOptions) -> tuple[TreeNode, int]:
    """Nested `TreeNode`s from the flat node table, pruned by depth and share; pruned siblings fold into one
    "(N more)" node so that children always add up to their parent, and a branch deeper than `max_levels`
    ends in one "(N deeper levels)" node. Loops over kept nodes only, without recursion: the kept nodes in
    preorder first, then built from the deepest back (a node's children are built before it)."""
    threshold = opts.min_share * total
    children: dict[int, list[_Rec]] = {}
    ordered = nodes.sort(["gpu_ns", "label"], descending=[True, False])
    for path, up, label, kind, gpu_ns, self_gpu_ns, calls in ordered.select(
        "path", "up", "label", "node_kind", "gpu_ns", "self_gpu_ns", "calls"
    ).iter_rows():
        children.setdefault(int(up), []).append(
            _Rec(int(path), str(label), str(kind), int(gpu_ns), int(self_gpu_ns), int(calls))
        )
    depth_of = _depths_below(children)
    visits: list[tuple[_Rec, int, list[int], TreeNode | None]] = []  # rec, depth, its kids' visits, extra kid
    pending: list[tuple[_Rec, int, int]] = [(_Rec(0, ROOT, "root", total, 0, 0), 0, -1)]
    while pending:
        rec, depth, parent = pending.pop()
        me = len(visits)
        extra: TreeNode | None = None
        kept: list[_Rec] = []
        within = opts.depth <= 0 or depth < opts.depth
        below = children.get(rec.path, []) if within or opts.hot_path else []
        if below and opts.max_levels is not None and depth >= opts.max_levels:
            levels = depth_of.get(rec.path, 1)
            extra = TreeNode(
                f"({levels:,} deeper level{'s' if levels != 1 else ''})",
                DEEPER,
                sum(c.gpu_ns for c in below),
                0,
                sum(c.calls for c in below),
            )
        elif below:
            kept = [c for c in below if c.gpu_ns >= threshold]  # sorted by gpu_ns: a prefix
            folded = below[len(kept) :]
            if folded:
                extra = TreeNode(
                    f"({len(folded)} more)",
                    "other",
                    sum(c.gpu_ns for c in folded),
                    0,
                    sum(c.calls for c in folded),
                )
        visits.append((rec, depth, [], extra))
        if parent >= 0:
            visits[parent][2].append(me)
        pending.extend((c, depth + 1, me) for c in reversed(kept))  # popped in order: the kids stay sorted
    built: list[TreeNode | None] = [None] * len(visits)
    count = 0
    for i in range(len(visits) - 1, -1, -1):
        rec, _, kid_visits, extra = visits[i]
        kids = [built[k] for k in kid_visits]
        if extra is not None:
            kids.append(extra)
        count += len(kids)
        built[i] = TreeNode(
            rec.label,
            rec.kind,
            rec.gpu_ns,
            rec.self_gpu_ns,
            rec.calls,
            tuple(k for k in kids if k is not None),
        )
        for k in kid_visits:
            built[k] = None  # held by their parent now
    root = built[0]
    assert root is not None
    return root, count


def _depths_below(children: dict[int, list[_Rec]]) -> dict[int, int]:
    """Each node's number of levels below it (1: only children), from the deepest back, without recursion."""
    order: list[int] = []
    pending = [0]
    while pending:
        path = pending.pop()
        order.append(path)
        pending.extend(c.path for c in children.get(path, []))
    below: dict[int, int] = {}
    for path in reversed(order):
        kids = children.get(path, [])
        below[path] = 1 + max((below.get(c.path, 0) for c in kids), default=0) if kids else 0
    return below
