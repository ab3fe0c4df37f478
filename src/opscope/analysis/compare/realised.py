"""Predictions checked against reality (issue 53): for each finding of BASE that NEW fixes or reduces, the saving
BASE predicted against the change NEW measured, per step (each trace's mean step) and over BASE's window, and
what else changed that could explain the difference. Definitions: docs/advice.md, "Predicted against realised".

The realised saving of a change is the fall of the mean step time (BASE's mean ProfilerStep duration less NEW's),
per step, and that fall times BASE's step count over BASE's window; without step markers on both sides, the fall
of the analysed window's length (a rough figure: said so). Several findings fixed together share one realised
figure: each is compared with it, and `also_changed` names the others.
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.analysis.compare.profile import TraceProfile
from opscope.analysis.findings import Advice

FIXED = "fixed"
REDUCED = "reduced"


@dataclass(frozen=True)
class Realised:
    id: str
    status: str  # FIXED (the rule no longer fires on NEW) or REDUCED (its time at stake fell)
    saving_model: str  # BASE's model of the predicted saving
    per_step: bool  # figures per step (both traces have ProfilerStep markers), else over the window
    steps_before: int
    steps_after: int
    predicted_ns: (
        int  # BASE's predicted saving over its analysed window (reduced: x the share of its stake removed)
    )
    predicted_per_step_ns: int | None  # predicted_ns / BASE's steps (per_step only)
    realised_per_step_ns: int | None  # BASE's mean step less NEW's (per_step only)
    realised_ns: int  # over BASE's window: realised per step x BASE's steps, else the window's fall
    ratio: float | None  # realised / predicted (None when nothing was predicted)
    also_changed: tuple[str, ...]  # what else changed that could explain the difference


def _mean_step(profile: TraceProfile) -> int | None:
    scope = profile.stepped
    return scope.length_ns // scope.steps if scope is not None and scope.steps else None


def _gpu_per_step(profile: TraceProfile, per_step: bool) -> float:
    scope = profile.scope(per_step)
    return scope.gpu_ns / scope.steps if per_step and scope.steps else float(scope.gpu_ns)


def _context(
    base: TraceProfile, new: TraceProfile, per_step: bool, fixed: list[str], added: list[str], rule: str
) -> tuple[str, ...]:
    """What else changed between the two traces that a reader should weigh against the ratio."""
    out = []
    if per_step and base.stepped and new.stepped and base.stepped.steps != new.stepped.steps:
        out.append(f"steps {base.stepped.steps} -> {new.stepped.steps}")
    if not per_step:
        out.append("no ProfilerStep markers on both sides: the window's length compared, not steps")
    before, after = _gpu_per_step(base, per_step), _gpu_per_step(new, per_step)
    if before > 0 and abs(after - before) / before >= 0.02:
        unit = "per step" if per_step else "in the window"
        out.append(
            f"GPU time {unit} {before / 1e6:,.1f} -> {after / 1e6:,.1f} ms ({(after - before) / before * 100:+.0f}%)"
        )
    if tuple(base.devices) != tuple(new.devices):
        out.append(f"devices {', '.join(base.devices) or '?'} -> {', '.join(new.devices) or '?'}")
    others = [i for i in fixed if i != rule]
    if others:
        out.append("also fixed: " + ", ".join(others))
    if added:
        out.append("new findings: " + ", ".join(added))
    if base.by_shape and new.by_shape:
        shapes_before = {(o.name, o.shape) for o in base.scope(per_step).ops}
        shapes_after = {(o.name, o.shape) for o in new.scope(per_step).ops}
        changed = sorted({name for name, _ in shapes_before ^ shapes_after})
        if changed:
            out.append(
                "input shapes changed: " + ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
            )
    return tuple(out)


def realised(
    base: TraceProfile, new: TraceProfile, base_advice: Advice | None, new_advice: Advice | None
) -> list[Realised]:
    """Each finding of BASE that NEW fixes (its rule no longer fires) or reduces (its time at stake fell),
    with BASE's prediction and NEW's measured change (module doc)."""
    before, after = (base_advice.fired if base_advice else {}), (new_advice.fired if new_advice else {})
    skipped = {o.id for o in new_advice.not_evaluated} if new_advice else set()
    shown = [f.id for f in base_advice.findings] if base_advice else []
    fixed = [i for i in shown if i not in after and i not in skipped]
    # a finding still there with less time at stake, when none was fixed (else the step's fall is the fixed
    # one's, and a reduced symptom would claim it too); its prediction scaled to the share of it removed
    added = [f.id for f in new_advice.findings if f.id not in before] if new_advice else []
    mean_before, mean_after = _mean_step(base), _mean_step(new)
    per_step = mean_before is not None and mean_after is not None
    steps_before = base.stepped.steps if base.stepped else 0
    steps_after = new.stepped.steps if new.stepped else 0
    fall_per_step: int | None = None
    fall = base.whole.length_ns - new.whole.length_ns
    if mean_before is not None and mean_after is not None:
        fall_per_step = mean_before - mean_after
        fall = fall_per_step * steps_before
    # a reduced symptom claims the step's fall only when the step did fall: a slower NEW (another cause) is no
    # realised saving of a finding that merely shrank, and pairing them printed negative ratios
    reduced = (
        []
        if fixed or fall <= 0
        else [i for i in shown if i in after and after[i].time_at_stake_ns < before[i].time_at_stake_ns]
    )
    out = []
    for rule, status in [*((i, FIXED) for i in fixed), *((i, REDUCED) for i in reduced)]:
        f = before[rule]
        predicted = int(f.predicted_saving_ns or 0)
        if status == REDUCED and f.time_at_stake_ns > 0:
            removed = f.time_at_stake_ns - after[rule].time_at_stake_ns
            predicted = predicted * removed // f.time_at_stake_ns
        out.append(
            Realised(
                id=rule,
                status=status,
                saving_model=f.saving_model,
                per_step=per_step,
                steps_before=steps_before,
                steps_after=steps_after,
                predicted_ns=predicted,
                predicted_per_step_ns=predicted // steps_before if per_step and steps_before else None,
                realised_per_step_ns=fall_per_step,
                realised_ns=int(fall),
                ratio=fall / predicted if predicted > 0 else None,
                also_changed=_context(base, new, per_step, fixed, added, rule),
            )
        )
    return out


__all__ = ["FIXED", "REDUCED", "Realised", "realised"]
