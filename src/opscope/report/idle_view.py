"""Why each GPU was idle (analysis/timeline/gap_causes.py) laid out: the rows of `analyze`'s JSON
(`devices[].idle_breakdown.causes`), its terminal table and the HTML report's table. Definitions:
docs/analysis-timeline.md, "Why the GPU was idle"."""

from __future__ import annotations

from typing import Any

from opscope.analysis.base.windows import StepWindow
from opscope.analysis.overview import Analysis
from opscope.analysis.timeline.gap_causes import MEANING
from opscope.analysis.timeline.idle import DeviceIdle
from opscope.report.document import MS, NAME, PCT, TEXT, Column, Table


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


def causes_data(idle: DeviceIdle) -> list[dict[str, Any]]:
    """One object per cause, in the order of the classification (every cause, zeros included): `cause`, `us`,
    `share` (of the device's idle time), `meaning`, `top` ([{"name", "us"}], the heaviest calls, operators
    or loaders overlapping that cause's idle time)."""
    return [
        {
            "cause": c.cause,
            "us": _us(c.ns),
            "share": round(c.ns / idle.idle_ns, 6) if idle.idle_ns else 0.0,
            "meaning": MEANING.get(c.cause, ""),
            "top": [{"name": n.name, "us": _us(n.ns)} for n in c.top],
        }
        for c in idle.causes
    ]


def per_step_data(idle: DeviceIdle, steps: tuple[StepWindow, ...]) -> list[dict[str, Any]]:
    """One object per step window of the analysis: `step` (N of ProfilerStep#N), `idle_us` (the device's idle
    time inside the step and the analysed window) and `causes` ({cause: us}, every cause, adding up to
    `idle_us`)."""
    out = []
    for k, window in enumerate(steps):
        causes = {c.cause: _us(c.per_step[k]) for c in idle.causes if len(c.per_step) > k}
        total = sum(c.per_step[k] for c in idle.causes if len(c.per_step) > k)
        out.append({"step": window.step, "idle_us": _us(total), "causes": causes})
    return out


def step_rows(result: Analysis) -> list[dict[str, Any]]:
    """Per step and device: its idle time and the causes that make it up, largest first (terminal rows)."""
    out = []
    steps = result.idle.steps
    for k, window in enumerate(steps):
        for d in result.idle.devices:
            parts = sorted(
                ((c.cause, c.per_step[k]) for c in d.causes if len(c.per_step) > k and c.per_step[k] > 0),
                key=lambda p: -p[1],
            )
            out.append(
                {
                    "step": window.name,
                    "device": str(d.device),
                    "idle": sum(ns for _, ns in parts),
                    "causes": ", ".join(f"{cause} {ns / 1e6:,.3f}" for cause, ns in parts) or "—",
                }
            )
    return out


def step_page_rows(result: Analysis) -> list[dict[str, Any]]:
    """`step_rows` for the HTML report: times in microseconds."""
    return [{**r, "idle_us": _us(r.pop("idle"))} for r in step_rows(result)]


def step_causes_table(result: Analysis) -> Table:
    return Table(
        "step_idle_causes",
        "Why the GPU was idle, step by step (ms; a row's causes add up to its idle time)",
        (
            Column("step", "Step", TEXT),
            Column("device", "GPU", TEXT),
            Column("idle", "Idle ms", MS),
            Column("causes", "What the host was doing (ms)", TEXT, wrap=True),
        ),
        tuple(step_rows(result)),
        hide_when_empty=True,
        terminal_rows=20,
        rest="step rows",
    )


def rows(result: Analysis) -> list[dict[str, Any]]:
    """The non-zero causes of every device, largest first per device (the terminal's and the page's rows)."""
    out = []
    for d in result.idle.devices:
        for c in sorted((c for c in d.causes if c.ns > 0), key=lambda c: -c.ns):
            out.append(
                {
                    "device": str(d.device),
                    "cause": c.cause,
                    "idle": c.ns,
                    "share": c.ns / d.idle_ns if d.idle_ns else 0.0,
                    "meaning": MEANING.get(c.cause, ""),
                    "top": ", ".join(f"{n.name} {n.ns / 1e6:,.3f} ms" for n in c.top[:3]),
                }
            )
    return out


def page_rows(result: Analysis) -> list[dict[str, Any]]:
    """`rows` for the HTML report: times in microseconds."""
    return [{**r, "idle_us": _us(r.pop("idle"))} for r in rows(result)]


def causes_table(result: Analysis) -> Table:
    return Table(
        "idle_causes",
        "Why the GPU was idle: what the host was doing (rows of a GPU add up to its idle time)",
        (
            Column("device", "GPU", TEXT),
            Column("cause", "Cause", TEXT),
            Column("idle", "Idle ms", MS),
            Column("share", "Of idle", PCT),
            Column("top", "Heaviest (ms overlapping)", NAME),
        ),
        tuple(rows(result)),
    )


__all__ = [
    "causes_data",
    "causes_table",
    "page_rows",
    "per_step_data",
    "rows",
    "step_causes_table",
    "step_rows",
]
