"""The report's "By source" panel (`opscope lines`: GPU time by the user's source line) and the Python stacks of
the timeline's kernels, laid out from the bundle's results (`SourceLines`, `LaunchStacks`). Frame names are
trace text: they go into the report's string table and reach the page as text only."""

from __future__ import annotations

from typing import Any

import polars as pl

from opscope.analysis.attribution.lines import SourceLines
from opscope.analysis.attribution.stacks import LaunchStacks
from opscope.analysis.base.linking import ROW
from opscope.report.frame_names import short_frames
from opscope.report.lines_view import no_stacks_line, unattributed_line

Intern = Any  # the report's string table: str -> index


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


def lines_panel(result: SourceLines, strings: Intern) -> dict[str, Any]:
    """The rows of `opscope lines` (as its JSON, names as string-table indices), with the short frame names of
    the terminal table and the lines that account for what no frame explains."""
    short = short_frames([r.frame for r in result.rows])
    return {
        "has_stacks": result.has_stacks,
        "gpu_time_us": _us(result.gpu_time_ns),
        "unattributed_us": _us(result.unattributed_ns),
        "unattributed": unattributed_line(result) if result.has_stacks else no_stacks_line(),
        "rows_total": result.total_rows,
        "rows": [
            {
                "frame": strings(r.frame),
                "short": strings(s),
                "gpu_time_us": _us(r.gpu_ns),
                "share": round(r.share, 6),
                "kernels": r.kernels,
                "cpu_self_us": _us(r.cpu_self_ns),
                "top_ops": [strings(n.name) for n in r.top_ops],
                "top_kernels": [strings(n.name) for n in r.top_kernels],
            }
            for r, s in zip(result.rows, short, strict=True)
        ],
    }


def with_stacks(
    events: pl.DataFrame, stacks: LaunchStacks, strings: Intern
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """`events` (GPU events with `row`) with `py`: the index of its launch's Python stack among the stacks these
    events use (-1: none), and those stacks: frame names innermost first (string-table indices) and, per frame,
    1 where it is the user's code."""
    if not stacks.stacks:
        return events.with_columns(pl.lit(-1, dtype=pl.Int64).alias("py")), {"stacks": [], "user": []}
    joined = events.join(stacks.gpu, on=ROW, how="left", maintain_order="left")
    used = joined["stack"].drop_nulls().unique().sort()
    remap = pl.DataFrame({"stack": used, "py": pl.int_range(len(used), eager=True, dtype=pl.Int64)})
    out = joined.join(remap, on="stack", how="left", maintain_order="left").with_columns(
        pl.col("py").fill_null(-1)
    )
    chosen = [stacks.stacks[i] for i in used.to_list()]
    return out.drop("stack"), {
        "stacks": [[strings(name) for name in stack] for stack in chosen],
        "user": [[int(name in stacks.user) for name in stack] for stack in chosen],
    }
