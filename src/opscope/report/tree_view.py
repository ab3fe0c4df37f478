"""`OpTree` -> `Document`: an indented table for the terminal, Markdown and CSV, and the nested
`opscope.tree/1` JSON payload."""

from __future__ import annotations

from typing import Any

from opscope.analysis.attribution.tree import OpTree, TreeNode
from opscope.report.document import INT, MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.linking_view import link_data, link_notes, us

SCHEMA = "opscope.tree/1"
INDENT = "  "
MAX_INDENT = 32  # levels of indentation at most


def _node_data(root: TreeNode) -> dict[str, Any]:
    """The nested JSON of a tree, built with a stack of its own (no recursion over the tree's depth)."""
    out = _node_fields(root)
    pending = [(root, out)]
    while pending:
        node, data = pending.pop()
        for child in node.children:
            child_data = _node_fields(child)
            data["children"].append(child_data)
            pending.append((child, child_data))
    return out


def _node_fields(node: TreeNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "kind": node.kind,
        "gpu_us": us(node.gpu_ns),
        "self_gpu_us": us(node.self_gpu_ns),
        "calls": node.calls,
        "children": [],
    }


def tree_data(result: OpTree) -> dict[str, Any]:
    opts = result.options
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "options": {
            "depth": opts.depth,
            "min_share": opts.min_share,
            "python": opts.python,
            "steps": opts.steps,
            "modules": opts.modules,
            "hot_path": opts.hot_path,
        },
        "gpu_time_us": us(result.gpu_time_ns),
        "unattributed_share": round(result.unattributed_share, 6),
        "root": _node_data(result.root),
        "linking": link_data(result.link),
        "warnings": list(result.warnings),
    }


def _label(node: TreeNode, types: bool) -> str:
    """A module type that merged several calls says how many: `nn.Module: Owlv2EncoderLayer x24`."""
    return (
        f"{node.name} x{node.calls:,}" if types and node.kind == "nn.Module" and node.calls > 1 else node.name
    )


def _flatten(roots: tuple[TreeNode, ...], total: int, out: list[dict[str, Any]], types: bool = False) -> None:
    """One row per node, depth first, with a stack of its own. The name is indented by its depth up to
    MAX_INDENT levels (the Depth column says the rest): a tree 200 levels deep stays readable, and the table
    grows with the number of rows, not with their depth squared."""
    pending = [(node, 0) for node in reversed(roots)]
    while pending:
        node, depth = pending.pop()
        out.append(
            {
                "name": INDENT * min(depth, MAX_INDENT) + _label(node, types),
                "depth": depth,
                "kind": node.kind,
                "calls": node.calls,
                "gpu": node.gpu_ns,
                "self_gpu": node.self_gpu_ns,
                "share": node.gpu_ns / total if total else 0.0,
            }
        )
        pending.extend((child, depth + 1) for child in reversed(node.children))


def tree_document(result: OpTree) -> Document:
    rows: list[dict[str, Any]] = []
    # the root is the headline, not a row
    _flatten(result.root.children, result.gpu_time_ns, rows, result.options.modules == "types")
    columns = (
        Column("name", "Module / annotation / op / kernel", NAME),
        Column("kind", "Kind", TEXT),
        Column("depth", "Depth", INT),
        Column("calls", "Calls", INT),
        Column("gpu", "GPU ms", MS),
        Column("self_gpu", "Self GPU ms", MS),
        Column("share", "Share", PCT),
    )
    opts = result.options
    facts = (
        ("trace", result.path),
        ("GPU time", f"{result.gpu_time_ns / 1e6:,.3f} ms"),
        ("unattributed", f"{result.unattributed_share * 100:.1f}% of GPU time"),
        (
            "pruned",
            f"depth {opts.depth or 'unlimited'}"
            f"{' (then the hot path down to its kernel)' if opts.hot_path and opts.depth else ''}, "
            f"nodes under {opts.min_share * 100:g}% folded, Python frames: {opts.python}, "
            f"modules: {'merged by type' if opts.modules == 'types' else 'one node per instance'}",
        ),
    ) + ((("steps", opts.steps),) if opts.steps else ())
    notes = link_notes(result.link, result.unattributed_share)
    if result.gpu_time_ns == 0 and result.link.gpu_events:
        notes.append("No GPU kernels, memcpys or memsets in this selection: the tree is empty.")
    notes.append(
        "Calls: instances merged into the node (GPU leaves: events). ProfilerStep#N is shown as "
        'ProfilerStep#*; "(N more)" folds siblings below --min-share.'
    )
    if opts.modules == "types":
        notes.append(
            "Module instances (Layer_0, Layer_1, ...) are merged by type, xN = calls merged; "
            "--modules instances shows one node per instance."
        )
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="GPU time by module, annotation, op and kernel",
        data=tree_data(result),
        facts=facts,
        tables=(Table("tree", "", columns, tuple(rows)),),
        notes=tuple(notes),
    )
