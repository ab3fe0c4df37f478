"""`SourceLines` -> `Document`: the `opscope lines` table for the terminal, Markdown and CSV, and the stable
`opscope.lines/1` JSON payload. Definitions: docs/analysis-attribution.md."""

from __future__ import annotations

from typing import Any

from opscope.analysis.attribution import FRAME_GROUPS
from opscope.analysis.attribution.lines import HOW_TO_RECORD, NamedTime, SourceLines
from opscope.report.document import INT, MS, NAME, PCT, TEXT, Column, Document, Table
from opscope.report.frame_names import short_frames
from opscope.report.linking_view import us

SCHEMA = "opscope.lines/1"
PATH_SEP = " › "


def _named(items: tuple[NamedTime, ...]) -> list[dict[str, Any]]:
    return [{"name": n.name, "gpu_time_us": us(n.gpu_ns)} for n in items]


def lines_data(result: SourceLines) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "trace": {"path": result.path},
        "gpu_time_us": us(result.gpu_time_ns),
        "unattributed_us": us(result.unattributed_ns),
        "skip_prefixes": list(result.skip_prefixes),
        "rows": [
            {
                "frame": r.frame,
                "file": r.file,
                "line": r.line,
                "function": r.function,
                "gpu_time_us": us(r.gpu_ns),
                "share": round(r.share, 6),
                "kernels": r.kernels,
                "top_ops": _named(r.top_ops),
                "top_kernels": _named(r.top_kernels),
                "cpu_self_us": us(r.cpu_self_ns),
                "path": list(r.path),
            }
            for r in result.rows
        ],
    }


def unattributed_line(result: SourceLines) -> str:
    """What no frame explains, so that the rows and this line add up to the GPU time."""
    total = result.gpu_time_ns
    share = result.unattributed_ns / total if total else 0.0
    parts = []
    if result.missing_launch_ns:
        parts.append(f"{result.missing_launch_ns / 1e6:,.3f} ms whose launch call is not in the trace")
    if result.outside_frames_ns:
        where = (
            "no Python frames in the trace"
            if not result.has_stacks
            else "launched outside your code's frames"
        )
        parts.append(f"{result.outside_frames_ns / 1e6:,.3f} ms {where}")
    return f"unattributed: {result.unattributed_ns / 1e6:,.3f} ms ({share * 100:.1f}% of GPU time)" + (
        f": {'; '.join(parts)}" if parts else ""
    )


def no_stacks_line() -> str:
    return f"This trace has no Python stacks (no python_function events): {HOW_TO_RECORD}."


def lines_document(result: SourceLines) -> Document:
    opts = result.options
    shown = short_frames([name for r in result.rows for name in r.path])
    at = iter(shown)
    rows = tuple(
        {
            "frame": PATH_SEP.join(next(at) for _ in r.path),
            "gpu": r.gpu_ns,
            "share": r.share,
            "kernels": r.kernels,
            "top_ops": ", ".join(n.name for n in r.top_ops),
            "top_kernel": r.top_kernels[0].name if r.top_kernels else "",
            "cpu_self": r.cpu_self_ns,
            "full_frame": r.frame,
            "file": r.file,
            "line": r.line,
            "function": r.function,
            "path": " > ".join(r.path),
            "top_kernels": " | ".join(n.name for n in r.top_kernels),
        }
        for r in result.rows
    )
    # The frame is what the table is about: it keeps its width (a call path of several frames wraps); the
    # optional columns go first when the width is short.
    columns = (
        Column(
            "frame", "Frame" if opts.depth <= 1 else "Call path (innermost last)", TEXT, wrap=opts.depth > 1
        ),
        Column("gpu", "GPU ms", MS),
        Column("share", "Share", PCT),
        Column("kernels", "Kernels", INT),
        Column("cpu_self", "CPU self ms", MS, drop=3),
        Column("top_ops", "Top ops", TEXT, drop=2, wrap=True),
        Column("top_kernel", "Top kernel", NAME, drop=1),
    )
    extra = (
        Column("full_frame", "Full frame", TEXT),
        Column("file", "File", TEXT),
        Column("line", "Line", INT),
        Column("function", "Function", TEXT),
        Column("path", "Path", TEXT),
        Column("top_kernels", "Top kernels", TEXT),
    )
    hidden = result.total_rows - len(result.rows)
    footer = ((f"{hidden:,} more rows (--top 0 shows all)",) if hidden > 0 else ()) + (
        (unattributed_line(result),) if result.has_stacks else ()
    )
    facts: tuple[tuple[str, str], ...] = (
        ("trace", result.path),
        ("GPU time", f"{result.gpu_time_ns / 1e6:,.3f} ms"),
    )
    notes: list[str] = []
    if not result.has_stacks:
        notes.append(no_stacks_line())
    else:
        if not result.rows:  # the table (and its footer) is not shown: the line still accounts for the time
            notes.append(unattributed_line(result))
        groups = [g for g in FRAME_GROUPS if g not in opts.frames.keep]
        skipped = [f"framework frames ({', '.join(groups)})"] if groups else []
        skipped += [f"files under {p}" for p in opts.frames.skip_prefixes]
        facts += (
            ("skipped", "; ".join(skipped) or "nothing"),
            *((("depth", f"{opts.depth} innermost frames of your code per row"),) if opts.depth > 1 else ()),
            *((("steps", opts.steps),) if opts.steps else ()),
        )
        notes.append(
            "Each kernel, memcpy and memset is charged to the innermost frame of your code (framework frames "
            "skipped) running on the launching thread when its launch call started; CPU self: the frame's "
            "time minus what ran directly inside it. --keep torch counts torch's frames as yours, "
            "--skip-prefix P skips more. Definitions: docs/analysis-attribution.md."
        )
    notes.extend(f"warning: {w}" for w in result.warnings)
    return Document(
        title="GPU time by source line",
        data=lines_data(result),
        facts=facts,
        tables=(Table("lines", "", columns, rows, footer, csv_extra=extra, hide_when_empty=True),),
        notes=tuple(notes),
    )
