"""What would make a trace's figures wrong, checked once per trace and said in every view (issue 52).

Each check looks at the event table for one kind of damage the profiler or a converter can leave: GPU work
that runs past the next work on its stream (deferred timestamps), an event longer than its step or the whole
window, launches without their GPU records (records dropped), records without their launch, records that start
before their launch (a clock offset), graph launches whose kernels are missing or cannot be attributed, steps
that hold no GPU work while a few hold it all, and what the reader itself lost (a cut-off file, skipped events).
A check that fires gives its id, a severity (info, warn, error), how many events it touches and the GPU time
they carry, a few examples and one line of text. Definitions, thresholds and what fires on which corpus trace:
docs/validity.md.

`validity(trace)` computes them once per trace and keeps them beside the trace cache; every check is linear in
the trace (sorts and joins on unique keys, no pairing). `overlap_clips(trace)` gives the durations that
`--repair overlaps` clips to the next start on the stream.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import polars as pl

from opscope.analysis.base.codetag import source_tag
from opscope.analysis.base.stored import value_frames, value_of
from opscope.analysis.validity.found import ERROR, INFO, SEVERITIES, WARN, Check, Validity
from opscope.model.trace import Trace

__all__ = [
    "ERROR",
    "INFO",
    "SEVERITIES",
    "WARN",
    "Check",
    "Validity",
    "overlap_clips",
    "repaired",
    "validity",
]


def validity(trace: Trace) -> Validity:
    """The checks of `trace` that fire (see the module doc), computed once and kept beside the trace cache. A
    repaired reading (`--repair`) is checked as recorded, and says what its repairs changed (`repaired`)."""
    recorded = trace.recorded
    # the tag of the checks' sources (and of the ground floor and event model they read), found, not imported:
    # a result read back needs neither the checks nor numpy (16 MB of a warm `summary`'s ~100)
    tag = source_tag("opscope.analysis.validity", "opscope.analysis.base", "opscope.model")
    key = f"validity-{tag}" if tag else "validity-untagged"
    if tag is None:  # sources that cannot be read: computed once per trace, never kept
        result = recorded.derived(key, lambda: _run_all(recorded))
    else:
        result = recorded.persisted(
            key,
            lambda: _run_all(recorded),
            lambda value: value_frames(value, Validity),
            lambda frames: value_of(Validity, frames),
        )
    return replace(result, repaired=trace.meta.repairs) if trace.meta.repairs else result


def repaired(trace: Trace, repairs: Iterable[str] | str | None) -> Trace:
    """`trace` read with `repairs` (only "overlaps": the durations `stream_overlap` flags cut to the next start
    on their stream), saying so in `meta.repairs`; `trace` itself when none is asked or nothing changes."""
    from opscope.analysis.validity.repair import repaired as repair

    return repair(trace, repairs)


def _run_all(trace: Trace) -> Validity:
    from opscope.analysis.validity import checks

    return checks.run_all(trace)


def overlap_clips(trace: Trace) -> pl.DataFrame:
    """(row, dur_ns): the GPU events `stream_overlap` flags, each with its duration cut to the start of the
    next work on its stream (what `--repair overlaps` gives them)."""
    from opscope.analysis.validity import checks

    return checks.overlap_clips(trace)
