"""A repaired reading of a trace, by choice (`--repair overlaps`, `opscope.load(path, repair=("overlaps",))`):
the durations `stream_overlap` flags cut to the start of the next work on their stream. The default stays the
recorded figures, flagged; a repaired reading says so in every view (`meta.repairs`, the validity banners)."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from opscope.analysis.base.codetag import code_tag
from opscope.errors import UsageError
from opscope.model.trace import Trace

OVERLAPS = "overlaps"
REPAIRS = (OVERLAPS,)


def repair_names(given: Iterable[str] | str | None) -> tuple[str, ...]:
    """The repairs asked for, checked (a string may name several, comma-separated), each once, in order."""
    if given is None:
        return ()
    items = [given] if isinstance(given, str) else list(given)
    names = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    unknown = [n for n in names if n not in REPAIRS]
    if unknown:
        raise UsageError(f"unknown repair {unknown[0]!r}: the repairs are {', '.join(REPAIRS)}")
    return tuple(dict.fromkeys(names))


def repaired(trace: Trace, repairs: Iterable[str] | str | None) -> Trace:
    """`trace` read with the `repairs` applied (see the module doc); itself when there are none, or when a
    repair changes nothing (no duration to clip)."""
    from opscope.analysis.validity import checks

    names = repair_names(repairs)
    if OVERLAPS not in names:
        return trace
    clips = checks.overlap_clips(trace.recorded)
    if clips.height == 0:
        return trace
    tag = code_tag(sys.modules[__name__], checks)
    note = (
        f"repaired reading (--repair overlaps): {clips.height:,} GPU record"
        f"{'' if clips.height == 1 else 's'} that ran past the next work on their stream cut to its start; "
        "every figure uses the cut durations"
    )
    return trace.with_durations(clips, f"repaired.overlaps.{tag}", note)
