"""The scale sweep's rule (`../shared/tools/scale_sweep.py`), for the scale tests: a command on a trace tiled N
times may need at most `SLACK` x N times the memory it needed on the trace itself, above the interpreter's own
(an `opscope --version` process). Memory is each command's peak resident memory in a process of its own
(`bench/bench_analyses.CHILD`: VmHWM, worker processes included), the trace cache filled first; time is only
reported, never checked (no wall-clock thresholds in unit tests: bench/)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "bench") not in sys.path:
    sys.path.insert(0, str(REPO / "bench"))

from bench_analyses import CHILD  # noqa: E402

SLACK = 1.25
COMMANDS: tuple[str, ...] = (
    "summary",
    "analyze",
    "advise",
    "report",
    "critical-path",
    "memory",
    "efficiency",
    "steps",
    "ops",
    "tree",
    "lines",
    "brief",
    "kernels",
    "history add",
    "export --folded",
)


@dataclass(frozen=True)
class Run:
    code: int
    wall_s: float
    peak_mb: float
    stderr: str


def run(argv: list[str], scratch: Path) -> Run:
    """One command in a fresh process with the scratch folder's cache and history: its exit code, wall time,
    peak memory and the end of its standard error."""
    env = {
        **os.environ,
        "OPSCOPE_CACHE_DIR": str(scratch / "cache"),
        "OPSCOPE_HISTORY": str(scratch / "history.sqlite"),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    line = next((x for x in done.stderr.splitlines() if x.startswith("@@ ")), None)
    if line is None:
        return Run(done.returncode, 0.0, 0.0, done.stderr[-2000:])
    _, code, wall, kb = line.split()
    return Run(int(code), float(wall), int(kb) / 1024, done.stderr[-2000:])


def argv_for(command: str, trace: Path, scratch: Path) -> list[str]:
    if command == "diff":  # the trace against a copy of itself: two traces to read, as a comparison has
        twin = scratch / f"twin-{trace.name}"
        if not twin.exists():
            twin.write_bytes(trace.read_bytes())
        return ["diff", str(trace), str(twin)]
    argv = [*command.split(), str(trace)]
    if command in ("report",) or command.startswith("export"):
        argv += ["-o", str(scratch / ("out.html" if command == "report" else "out.txt"))]
    return argv


def grows_linearly(one: Run, tiled: Run, base_mb: float, factor: int) -> bool:
    """The sweep's memory rule."""
    return tiled.peak_mb - base_mb <= SLACK * factor * max(one.peak_mb - base_mb, 1.0)


def check(
    traces: dict[int, Path], commands: tuple[str, ...], scratch: Path, runs: dict[str, Run] | None = None
) -> list[str]:
    """Each command on the trace itself and tiled (`traces`: {1: path, N: path}): the problems found (an exit
    code that is not 0, or differs between the two; memory growing faster than the trace), one line each.
    `runs`, when given, receives each command's run on the trace itself."""
    (factor,) = [n for n in traces if n != 1]
    base = run(["--version"], scratch).peak_mb
    for path in traces.values():
        run(["summary", str(path)], scratch)  # into the trace cache first
        if "diff" in commands:  # and its twin: every command is measured on a filled trace cache
            run(["summary", argv_for("diff", path, scratch)[2]], scratch)
    problems = []
    for command in commands:
        one, tiled = (run(argv_for(command, traces[n], scratch), scratch) for n in (1, factor))
        if runs is not None:
            runs[command] = one
        if one.code != 0 or tiled.code != 0:
            problems.append(
                f"{command}: exit {one.code} / {tiled.code}: {(tiled.stderr or one.stderr)[-300:]}"
            )
        elif not grows_linearly(one, tiled, base, factor):
            problems.append(
                f"{command}: {one.peak_mb:.0f} MB at x1, {tiled.peak_mb:.0f} MB at x{factor} "
                f"(interpreter {base:.0f} MB): faster than the trace"
            )
        print(
            f"{command:16} x1 {one.peak_mb:6.0f} MB {one.wall_s:6.2f} s | x{factor} {tiled.peak_mb:6.0f} MB "
            f"{tiled.wall_s:6.2f} s",
            file=sys.stderr,
        )
    return problems
