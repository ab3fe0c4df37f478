"""The profiling schedule: which steps are skipped, waited, warmed up and recorded (pure, no torch).

Same meaning as `torch.profiler.schedule`: the first `skip_first` steps are ignored, then each cycle waits `wait`
steps (profiler off), warms up `warmup` steps (profiler on, events discarded), then records `active` steps and
writes one trace; `repeat` cycles (0 = until the block ends). `active=None` records every step of the block into
one trace. `steps=N` is the shorthand for the first N steps (`active=N`, nothing skipped, no warm-up).
"""

from __future__ import annotations

from dataclasses import dataclass

from opscope.errors import UsageError

NONE, WARMUP, RECORD, RECORD_AND_SAVE = "none", "warmup", "record", "record_and_save"


def _count(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        need = "a positive number" if minimum == 1 else "0 or more"
        raise UsageError(f"{name} must be {need}, got {value}")
    return value


@dataclass(frozen=True)
class Schedule:
    wait: int = 0
    warmup: int = 0
    active: int | None = None  # None: record the whole block as one trace
    repeat: int = 1  # cycles; 0 = as many as the block has steps for
    skip_first: int = 0

    def __post_init__(self) -> None:
        _count("wait", self.wait, 0)
        _count("warmup", self.warmup, 0)
        _count("repeat", self.repeat, 0)
        _count("skip_first", self.skip_first, 0)
        if self.active is None:
            if self.wait or self.warmup or self.skip_first or self.repeat != 1:
                raise UsageError("wait, warmup, repeat and skip_first need active=N (or steps=N)")
        else:
            _count("active", self.active, 1)

    @classmethod
    def build(
        cls,
        steps: int | None = None,
        *,
        wait: int = 0,
        warmup: int = 0,
        active: int | None = None,
        repeat: int = 1,
        skip_first: int = 0,
    ) -> Schedule:
        """`steps=N` is `active=N`; giving both is an error."""
        if steps is not None:
            _count("steps", steps, 1)
            if active is not None:
                raise UsageError("give steps=N or active=N, not both (steps is the shorthand for active)")
            active = steps
        return cls(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)

    @property
    def whole_run(self) -> bool:
        return self.active is None

    @property
    def first_recorded_step(self) -> int:
        return self.skip_first + self.wait + self.warmup

    @property
    def steps_needed(self) -> int | None:
        """Steps the block must have for every cycle to complete (None: no limit)."""
        if self.active is None or self.repeat == 0:
            return None
        return self.skip_first + (self.wait + self.warmup + self.active) * self.repeat

    def action(self, step: int) -> str:
        """What the profiler does during step `step` (0-based), as in `torch.profiler.schedule`."""
        if self.active is None:
            return RECORD
        if step < self.skip_first:
            return NONE
        step -= self.skip_first
        cycle = self.wait + self.warmup + self.active
        if self.repeat > 0 and step // cycle >= self.repeat:
            return NONE
        phase = step % cycle
        if phase < self.wait:
            return NONE
        if phase < self.wait + self.warmup:
            return WARMUP
        return RECORD if phase < cycle - 1 else RECORD_AND_SAVE

    def describe(self) -> str:
        if self.active is None:
            return "the whole block"
        parts = [
            f"{name}={getattr(self, name)}"
            for name in ("skip_first", "wait", "warmup")
            if getattr(self, name)
        ]
        parts.append(f"active={self.active}")
        if self.repeat != 1:
            parts.append(f"repeat={self.repeat}")
        return ", ".join(parts)
