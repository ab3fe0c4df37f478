"""What linking found and could not do (`LinkStats`), as JSON fields and one-line notes, shared by the
`ops`, `tree` and `steps` documents."""

from __future__ import annotations

from opscope.analysis.base.linking import LinkStats


def us(ns: float) -> float:
    return round(ns / 1e3, 3)


def link_data(stats: LinkStats) -> dict[str, object]:
    """The linking counts as JSON (shared by ops, tree and steps)."""
    return {
        "gpu_events": stats.gpu_events,
        "linked_by_correlation": stats.linked_by_correlation,
        "linked_by_flow": stats.linked_by_flow,
        "missing_launch": stats.missing_launch,
        "missing_launch_us": us(stats.missing_launch_ns),
        "without_correlation": stats.without_correlation,
        "launch_outside_ops": stats.launch_outside_ops,
        "from_graph": stats.from_graph,
        "graph_launches": stats.graph_launches,
        "launches_without_gpu": stats.launches_without_gpu,
        "duplicate_correlations": stats.duplicate_correlations,
        "dangling_flows": stats.dangling_flows,
        "nonpositive_gpu_durations": stats.nonpositive_gpu,
        "negative_gpu_durations": stats.negative_gpu,
        "nonpositive_cpu_durations": stats.nonpositive_cpu,
    }


def link_notes(stats: LinkStats, unattributed_share: float) -> list[str]:
    """One-line notes on what could not be attributed, for the terminal and Markdown outputs."""
    notes = []
    if stats.gpu_events == 0:
        notes.append("No GPU kernels, memcpys or memsets in this trace: nothing to attribute.")
    if unattributed_share > 0:
        parts = []
        if stats.missing_launch:
            parts.append(f"{stats.missing_launch:,} GPU events whose launch call is not in the trace")
        if stats.launch_outside_ops:
            parts.append(f"{stats.launch_outside_ops:,} launched outside any CPU op")
        notes.append(
            f"{unattributed_share * 100:.1f}% of GPU time could not be attributed"
            + (f" ({'; '.join(parts)})" if parts else "")
            + "."
        )
    if stats.from_graph:
        notes.append(
            f"{stats.from_graph:,} GPU events came from {stats.graph_launches:,} CUDA/HIP graph launch(es); "
            "they are attributed to the op that launched the graph."
        )
    if stats.duplicate_correlations:
        notes.append(
            f"{stats.duplicate_correlations:,} correlation ids are carried by more than one launch call; "
            "each GPU event took the closest earlier one."
        )
    if stats.negative_gpu:
        notes.append(f"{stats.negative_gpu:,} GPU events have a negative duration; counted as 0.")
    return notes
