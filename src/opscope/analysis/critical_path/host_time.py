"""The path's host time between operators, by Python frame: the plain results of `host_frames` (kept apart so
that `stats.CriticalPathStats` can hold them without importing the computation)."""

from __future__ import annotations

from dataclasses import dataclass

NO_FRAME = "(no Python frame)"


@dataclass(frozen=True)
class FrameTime:
    frame: str  # `file(line): function` as the trace names it; NO_FRAME outside every kept frame
    on_path_ns: int


@dataclass(frozen=True)
class StepHostTime:
    between_ops_ns: int  # the path's CPU time owned by an annotation (no operator running)
    frames: tuple[FrameTime, ...]  # that time by innermost user frame, most first (empty without frames)
