"""What one trace's validity checks found (docs/validity.md): `Check`, one check that fired, and `Validity`, all
of them with what a repaired reading changed. Plain values: kept beside the trace cache, sent back from worker
processes, laid out by every view."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INFO, WARN, ERROR = "info", "warn", "error"
SEVERITIES = (INFO, WARN, ERROR)


@dataclass(frozen=True)
class Check:
    """One check that fired. `events`: the events it touches; `gpu_time_ns`: the GPU time they carry (or
    claim, for overlapping work: the time beyond the next start), `share` of the trace's GPU time;
    `examples`: the first few, as plain values; `detail`: the check's own figures (a split, an offset)."""

    check: str
    severity: str
    events: int
    gpu_time_ns: int
    share: float
    message: str
    examples: tuple[dict[str, Any], ...] = ()
    detail: dict[str, Any] = field(default_factory=dict)

    def data(self) -> dict[str, Any]:
        """The JSON object of this check (docs/validity.md: stable, fields are added, never renamed)."""
        return {
            "check": self.check,
            "severity": self.severity,
            "events": self.events,
            "gpu_time_us": round(self.gpu_time_ns / 1e3, 3),
            "share": round(self.share, 6),
            "message": self.message,
            "examples": [dict(e) for e in self.examples],
            **({"detail": dict(self.detail)} if self.detail else {}),
        }


@dataclass(frozen=True)
class Validity:
    """The checks that fired on one trace, most severe first; `repaired`: what `--repair` changed."""

    checks: tuple[Check, ...] = ()
    repaired: tuple[str, ...] = ()

    def at_least(self, severity: str) -> tuple[Check, ...]:
        """The checks of `severity` or worse."""
        floor = SEVERITIES.index(severity)
        return tuple(c for c in self.checks if SEVERITIES.index(c.severity) >= floor)

    def failing(self) -> tuple[Check, ...]:
        """The error checks a repaired reading has not answered: what `--strict` fails on."""
        answered = {"stream_overlap"} if self.repaired else set()
        return tuple(c for c in self.at_least(ERROR) if c.check not in answered)

    def banners(self) -> tuple[str, ...]:
        """One line per warn or error check, then one per repair: what every view shows above its figures."""
        lines = []
        for c in self.at_least(WARN):
            tail = ""
            if c.check == "stream_overlap":
                tail = (
                    "; figures below cut them to the next start (--repair overlaps)"
                    if self.repaired
                    else "; figures below include them as recorded (--repair overlaps cuts them)"
                )
            lines.append(f"{c.severity.upper()} {c.check}: {c.message}{tail}")
        lines += [f"REPAIRED: {note}" for note in self.repaired]
        return tuple(lines)

    def data(self) -> list[dict[str, Any]]:
        return [c.data() for c in self.checks]
