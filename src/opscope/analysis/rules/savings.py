"""From the rules' hits to savings that add up: each finding's predicted saving under its model, then exclusive
attribution over the analysed window. Definitions: docs/advice.md ("Savings").

1. **Alone.** A hit states its remedy's saving model: the time it acts on (`claims`: intervals of the trace's
   clock, cut here to the analysed window), and the model's estimate. Where the remedy is also a transformation
   of the events (`what_if`: these events x factor), the critical-path what-if of that transformation refines
   it: the saving is the what-if (the step's own graph decides), never more than the time at stake; without
   one it is the estimate, never more than the time at stake nor the claimed time.
2. **Exclusive.** Each microsecond of the window belongs to at most one finding. Findings take their claims in
   order (rules that name a cause, then general inefficiencies, then symptoms; the larger saving first); a finding
   keeps the share of its saving that its claim not yet taken covers, and never less than its saving less what
   the findings above whose claims overlap its own save (they cannot explain more than they save).
3. **Together.** `combined` is the what-if of applying every remedy at once: the critical-path what-if of every
   transformation together plus the exclusive savings of the others, never more than their sum; the what-if
   savings are scaled down in proportion where they add up to more than that joint what-if (`within_joint`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from opscope.analysis.base import intervals
from opscope.analysis.findings import ON_PATH_SUFFIX, WHAT_IF_BASIS, saving_basis
from opscope.analysis.rules.model import ROLES, Hit, Rule

S, E = intervals.START, intervals.END


@dataclass(frozen=True)
class Candidate:
    """A rule that fired with time at stake: its hit and its saving alone (ns, before exclusivity)."""

    rule: Rule
    hit: Hit
    threshold: float
    alone_ns: int
    model: str


@dataclass(frozen=True)
class Attributed:
    candidate: Candidate
    saving_ns: int  # exclusive: what this finding adds to those before it
    shared_with: tuple[str, ...]  # the earlier findings whose claims overlapped this one's


def window_claims(claims: pl.DataFrame | None, bounds: Sequence[tuple[int, int]]) -> pl.DataFrame:
    """The claim intervals cut to the window's pieces and merged (start_ns, end_ns): their intersection with
    the pieces, one sweep (each claim was cut to each piece: claims x pieces, 320 pieces on the 1 GB
    benchmark trace)."""
    if claims is None or claims.height == 0 or not bounds:
        return pl.DataFrame(schema={S: pl.Int64, E: pl.Int64})
    frame = claims.select(pl.col(S).cast(pl.Int64), pl.col(E).cast(pl.Int64))
    pieces = pl.DataFrame(
        [(int(lo), int(hi)) for lo, hi in bounds], schema={S: pl.Int64, E: pl.Int64}, orient="row"
    )
    return intervals.intersect(frame, pieces)


def alone_ns(hit: Hit, claimed_ns: int, what_if_ns: int | None) -> tuple[int, str]:
    """(saving, model name) of one finding alone. Where its remedy is a transformation of the events, the saving
    is the critical-path what-if of that transformation (issue 59: the step's own dependency graph decides,
    not the rule's formula), never more than the time at stake; the model's name then ends in
    `, critical path`. Without a what-if (not computed, or a remedy the graph cannot express) it is the
    model's estimate, never more than the time at stake nor the claimed time."""
    if what_if_ns is not None:
        return max(0, min(what_if_ns, hit.time_at_stake_ns)), f"{hit.model}{ON_PATH_SUFFIX}"
    return max(0, min(int(hit.estimate_ns or 0), hit.time_at_stake_ns, claimed_ns)), hit.model


def on_path(model: str) -> bool:
    """Whether a saving came from the critical-path what-if (else: the rule's estimate)."""
    return saving_basis(model) == WHAT_IF_BASIS


def within_joint(attributed: Sequence[Attributed], joint_what_if_ns: int | None) -> list[Attributed]:
    """The what-if savings scaled down, in proportion, where together they claim more than the what-if of all
    their changes at once (two remedies on one stretch of the path save it once); the others as they are."""
    from_path = [a for a in attributed if on_path(a.candidate.model)]
    total = sum(a.saving_ns for a in from_path)
    if joint_what_if_ns is None or total <= joint_what_if_ns or total <= 0:
        return list(attributed)
    keep = max(0, joint_what_if_ns)
    return [
        Attributed(a.candidate, a.saving_ns * keep // total, a.shared_with)
        if on_path(a.candidate.model)
        else a
        for a in attributed
    ]


def claim_order(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Causes, then general inefficiencies, then symptoms (model.ROLES); within each the larger saving alone
    first, then the rule id (deterministic)."""
    return sorted(candidates, key=lambda c: (ROLES.index(c.rule.role), -c.alone_ns, c.rule.id))


def attribute(candidates: Sequence[Candidate], bounds: Sequence[tuple[int, int]]) -> list[Attributed]:
    """Exclusive savings (module doc, step 2), sorted by saving (largest first, then id)."""
    taken = pl.DataFrame(schema={S: pl.Int64, E: pl.Int64})
    owners: list[tuple[str, int, pl.DataFrame]] = []
    out = []
    for c in claim_order(candidates):
        mine = window_claims(c.hit.claims, bounds)
        total = intervals.covered_ns(mine)
        if c.alone_ns <= 0:
            out.append(Attributed(c, 0, ()))
            continue
        if total <= 0:
            # it claims no time of the window (a CPU-only capture has no GPU idle time): nothing to share, its
            # saving stands alone
            out.append(Attributed(c, c.alone_ns, ()))
            continue
        overlap = intervals.intersection_ns(mine, taken) if taken.height else 0
        shared = tuple(rule for rule, _, theirs in owners if intervals.intersection_ns(mine, theirs) > 0)
        # never hidden behind findings that save less: those above whose claims overlap this one's take at
        # most what they save from it (a sync rule that claims a whole step's gaps and saves 1 ms leaves a
        # host-bound finding the rest, issue 59)
        above = sum(saved for rule, saved, _ in owners if rule in shared)
        saving = max(c.alone_ns * (total - overlap) // total, c.alone_ns - above)
        out.append(Attributed(c, int(saving), shared))
        owners.append((c.rule.id, int(saving), mine))
        taken = intervals.merge(pl.concat([taken, mine]))
    return sorted(out, key=lambda a: (-a.saving_ns, a.candidate.rule.id))


def combined_ns(
    attributed: Sequence[Attributed], joint_what_if_ns: int | None, with_what_if: set[str]
) -> int:
    """Every remedy at once (module doc, step 3)."""
    total = sum(a.saving_ns for a in attributed)
    if joint_what_if_ns is None:
        return total
    others = sum(a.saving_ns for a in attributed if a.candidate.rule.id not in with_what_if)
    return max(0, min(total, joint_what_if_ns + others))
