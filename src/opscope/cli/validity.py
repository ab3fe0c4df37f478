"""What the validity checks (docs/validity.md) found on the traces a command read, carried to its output: every
JSON document gets a `validity` list, every other view one banner line per warn or error check above everything
else, and `--strict` exits 1 after the output when an error check fired. A command notes each trace it reads
(`note`); `emit` adds what was noted (`with_validity`); the CLI's entry point asks `strict_failure` last."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from opscope.errors import ValidityFailed

if TYPE_CHECKING:
    from opscope.analysis.validity import Validity
    from opscope.model.trace import Trace
    from opscope.report.document import Document

_SEEN = "_validity_seen"  # on the command's Namespace: [(label, Validity)], in the order the traces were read


def add_repair_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repair",
        action="append",
        default=None,
        metavar="WHAT",
        help="read the trace repaired: 'overlaps' cuts GPU work that runs past the next work on its stream "
        "to that start (said in every view; default: the recorded durations, flagged)",
    )


def repairs(args: argparse.Namespace) -> tuple[str, ...]:
    """The repairs asked for with --repair, checked (a usage error names the known ones)."""
    from opscope.analysis.validity.repair import repair_names

    return repair_names(getattr(args, "repair", None))


def checked(args: argparse.Namespace, trace: Trace, label: str | None = None) -> Trace:
    """`trace` as the command reads it (repaired when --repair asks), its validity noted for the output."""
    from opscope.analysis.validity import repaired, validity

    wanted = repairs(args)
    read = repaired(trace, wanted) if wanted else trace
    note(args, label or trace.meta.path, validity(read))
    return read


def note_file(args: argparse.Namespace, path: str) -> None:
    """Check the trace a command captured (`run`, `demo`) and note what was found (read from the trace cache
    the command's summary filled)."""
    from opscope.analysis.validity import validity
    from opscope.loading import load

    note(args, path, validity(load(path, cache=not getattr(args, "no_cache", False))))


def note(args: argparse.Namespace, label: str, found: Validity) -> None:
    """Keep `found` (the checks of the trace `label`) for the command's output."""
    seen: list[tuple[str, Validity]] = vars(args).setdefault(_SEEN, [])
    seen.append((label, found))


def seen(args: argparse.Namespace) -> list[tuple[str, Validity]]:
    return list(vars(args).get(_SEEN, []))


def validity_data(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The JSON `validity` list: one object per check that fired, most severe first per trace; with several
    traces each object names its trace (`trace`). Empty for a command that read none."""
    found = seen(args)
    several = len(found) > 1
    out = []
    for label, v in found:
        for item in v.data():
            out.append({"trace": label, **item} if several else item)
        if v.repaired:
            for note_text in v.repaired:
                out.append(
                    {
                        **({"trace": label} if several else {}),
                        "check": "repaired",
                        "severity": "info",
                        "events": 0,
                        "gpu_time_us": 0.0,
                        "share": 0.0,
                        "message": note_text,
                        "examples": [],
                    }
                )
    return out


def banners(args: argparse.Namespace) -> tuple[str, ...]:
    """One line per warn or error check (and per repair) of every trace read, the trace named when several."""
    found = seen(args)
    several = len(found) > 1
    return tuple(f"{label}: {line}" if several else line for label, v in found for line in v.banners())


def warn_banners(args: argparse.Namespace) -> None:
    """The banners as warnings on standard error: for a command whose output is a file of another tool's
    format (`export`), which has no place for them."""
    import logging

    for line in banners(args):
        logging.getLogger("opscope").warning("%s", line)


def with_validity(doc: Document, args: argparse.Namespace) -> Document:
    """`doc` with its `validity` list and its banners (in the JSON too, `validity_banners`: the lines as the
    terminal shows them); a document that already has them keeps its own."""
    lines = doc.banners or banners(args)
    data = doc.data
    if "validity" not in data:  # the banners first (after the schema), where a reader looks; the checks last
        head = {"schema": data["schema"]} if "schema" in data else {}
        data = {**head, "validity_banners": list(lines), **data, "validity": validity_data(args)}
    return replace(doc, data=data, banners=lines)


def strict_failure(args: argparse.Namespace) -> None:
    """`--strict`: raise ValidityFailed (exit 1) when an error check fired on a trace the command read (one a
    repaired reading answers does not count)."""
    if not getattr(args, "strict", False) or getattr(args, "_command", None) == "history":
        return
    failing = [(label, c) for label, v in seen(args) for c in v.failing()]
    if failing:
        label, first = failing[0]
        more = f" (and {len(failing) - 1} more)" if len(failing) > 1 else ""
        raise ValidityFailed(f"--strict: {label}: {first.check} ({first.severity}){more}: {first.message}")
