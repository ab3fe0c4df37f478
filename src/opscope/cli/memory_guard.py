"""The memory guard (issue 57): a command that is about to run out of memory stops with one line and exit 2,
naming the stage it was in and the trace's size, instead of being killed by the kernel's OOM killer (no
message at all, or a machine that swaps first).

A thread samples, every `POLL_S`, the resident memory of this process and of its worker processes
(`workers.live_workers`), and what is left: the machine's `MemAvailable`, the container's cgroup limit (v2
`memory.max`, v1 `memory.limit_in_bytes`) less what it holds that cannot be reclaimed (its usage less its
inactive page cache), and `OPSCOPE_MAX_MEMORY` when set (a budget of the user's: `800M`, `2G`). The command
stops when it is over that budget, or when the machine or the container is down to its last `RESERVE_SHARE`
(at least `RESERVE_BYTES`) while the command holds a good part of it (`_significant`: a small command on a
machine that others have filled is not the one to stop). Rust code cannot be interrupted, so stopping is
`os._exit(2)` after the line, the workers killed first; results kept beside the trace cache are written to a
temporary name and renamed, so nothing half-written is read back. Under `ulimit -v` the command runs in a
watched child (`supervise.py`), which has its own guard.

`verdict` is the decision as a pure function of one `Reading`, tested without filling any memory.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opscope.analysis.base.stages import last_stage
from opscope.analysis.base.workers import live_workers
from opscope.errors import OutOfMemory
from opscope.untrusted import visible

MAX_MEMORY_VARIABLE = "OPSCOPE_MAX_MEMORY"
POLL_S = 0.05
RESERVE_SHARE = 0.05  # of the machine's (or the container's) memory, kept free
RESERVE_BYTES = 256 << 20  # at least this much kept free (a container: at least CGROUP_RESERVE_BYTES)
CGROUP_RESERVE_BYTES = 64 << 20
SIGNIFICANT_BYTES = (
    512 << 20
)  # the command holds at least this much (or a quarter of the memory) to be stopped
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """Bytes of `800M`, `2G`, `1.5GiB`, `1073741824` (None: not a size)."""
    found = _SIZE.match(text)
    if found is None:
        return None
    return int(float(found[1]) * _UNITS[found[2].lower()])


@dataclass(frozen=True)
class Reading:
    """One sample: bytes held by the command (`rss`: this process and its workers) and what limits it (None:
    unknown, or no such limit)."""

    rss: int
    available: int | None = None  # the machine's MemAvailable
    total: int | None = None  # the machine's MemTotal
    cgroup_left: int | None = None  # the container's limit less what it holds that cannot be reclaimed
    cgroup_limit: int | None = None
    budget: int | None = None  # OPSCOPE_MAX_MEMORY


def _mb(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MB"


def _significant(rss: int, memory: int) -> bool:
    return rss >= min(SIGNIFICANT_BYTES, memory // 4)


def verdict(r: Reading) -> str | None:
    """Why the command must stop now, as the end of the error line; None while it may go on."""
    if r.budget is not None and r.rss > r.budget:
        return f"{_mb(r.rss)} in use, over the {_mb(r.budget)} that {MAX_MEMORY_VARIABLE} allows"
    if r.cgroup_left is not None and r.cgroup_limit:
        reserve = max(CGROUP_RESERVE_BYTES, int(RESERVE_SHARE * r.cgroup_limit))
        if r.cgroup_left < reserve and _significant(r.rss, r.cgroup_limit):
            return (
                f"{_mb(r.rss)} in use, {_mb(max(r.cgroup_left, 0))} left of the container's "
                f"{_mb(r.cgroup_limit)}"
            )
    if r.available is not None and r.total:
        reserve = max(RESERVE_BYTES, int(RESERVE_SHARE * r.total))
        if r.available < reserve and _significant(r.rss, r.total):
            return f"{_mb(r.rss)} in use, {_mb(r.available)} left on this machine"
    return None


def _meminfo() -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as lines:
            for line in lines:
                name, _, rest = line.partition(":")
                if name in ("MemAvailable", "MemTotal"):
                    out[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _resident(pid: str) -> int:
    """Resident bytes of a process (0 where it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat_field(path: Path, field: str) -> int:
    try:
        for line in path.read_text(encoding="ascii").splitlines():
            name, _, value = line.partition(" ")
            if name == field and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def cgroup_files() -> tuple[Path, Path, Path, str] | None:
    """(limit, usage, stat file, the stat's inactive-file field) of this process's memory cgroup, None where
    there is none to read."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            base = Path("/sys/fs/cgroup") / path.lstrip("/")
            return base / "memory.max", base / "memory.current", base / "memory.stat", "inactive_file"
        if "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return (
                base / "memory.limit_in_bytes",
                base / "memory.usage_in_bytes",
                base / "memory.stat",
                "total_inactive_file",
            )
    return None


def read(budget: int | None, cgroup: tuple[Path, Path, Path, str] | None) -> Reading:
    """One sample of this process, its workers, the machine and the container."""
    rss = _resident("self") + sum(_resident(str(pid)) for pid in live_workers())
    info = _meminfo()
    left = limit = None
    if cgroup is not None:
        limit = _read_int(cgroup[0])
        usage = _read_int(cgroup[1])
        if limit is not None and limit < 1 << 60 and usage is not None:  # v1 writes a huge number for "none"
            left = limit - (usage - _stat_field(cgroup[2], cgroup[3]))
        else:
            limit = None
    return Reading(rss, info.get("MemAvailable"), info.get("MemTotal"), left, limit, budget)


class Guard:
    """The guard's thread for one command: `start()` before the command runs, `stop()` after it. `describe`
    says what the command reads (" on trace.json.gz (1,234 MB)"), for the line."""

    def __init__(self, describe: Callable[[], str]) -> None:
        self.describe = describe
        text = os.environ.get(MAX_MEMORY_VARIABLE, "").strip()
        self.budget = parse_size(text) if text else None
        if text and self.budget is None:
            raise OutOfMemory(f"{MAX_MEMORY_VARIABLE}={visible(text)!r} is not a size (e.g. 800M, 2G)")
        self.cgroup = cgroup_files()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="opscope-memory-guard", daemon=True)

    def start(self) -> None:
        if sys.platform.startswith("linux"):
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            why = verdict(read(self.budget, self.cgroup))
            if why is not None and not self._stop.is_set():
                self._trip(why)

    def _trip(self, why: str) -> None:
        stage = last_stage()
        where = f" in stage '{visible(stage)}'" if stage else ""
        line = (
            f"opscope: error: {OutOfMemory(f'out of memory{where}{self.describe()}: {why}')}; read fewer steps "
            f"(--steps), a smaller trace, or give opscope more memory\n"
        )
        for pid in live_workers():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        finally:
            os._exit(OutOfMemory.exit_code)


def describe_traces(paths: list[str]) -> str:
    """' on a.json.gz (1,234 MB)' for the traces a command reads ('' for none)."""
    parts = []
    for path in paths:
        try:
            size = f" ({os.path.getsize(path) / (1 << 20):,.0f} MB)"
        except OSError:
            size = ""
        parts.append(f"{visible(os.path.basename(path))}{size}")
    return f" on {', '.join(parts)}" if parts else ""
