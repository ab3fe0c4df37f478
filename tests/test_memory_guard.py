"""The memory guard and the native-noise filter of the console script (issue 57 item 6): a command about to run
out of memory stops with one line naming the stage and the trace's size and exit 2, never a kernel kill; Rust's
panic text never reaches the user.

The decision (`verdict`) is tested on hand-made readings; the guard itself in a real `opscope` process on a
corpus trace, with a budget (`OPSCOPE_MAX_MEMORY`) below what the command needs instead of a machine filled
to its last megabyte."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import corpus_path
from opscope.cli.memory_guard import Reading, parse_size, verdict
from opscope.cli.native_noise import NoiseFilter

OWLV2 = "tracelens/mi300__google_owlv2-large-patch14-ensemble__1016001.json.gz"
MB = 1 << 20


def test_sizes() -> None:
    assert parse_size("800M") == 800 * MB
    assert parse_size("2G") == 2 << 30
    assert parse_size("1.5GiB") == int(1.5 * (1 << 30))
    assert parse_size("4096") == 4096
    assert parse_size(" 64 mb ") == 64 * MB
    assert parse_size("lots") is None
    assert parse_size("-1G") is None


def test_verdict_budget_machine_and_container() -> None:
    # within every limit
    assert verdict(Reading(rss=300 * MB, available=8000 * MB, total=16000 * MB)) is None
    # over the user's budget
    assert "over the 200 MB that OPSCOPE_MAX_MEMORY allows" in (
        verdict(Reading(300 * MB, budget=200 * MB)) or ""
    )
    # the machine down to its last 5% while the command holds a good part of it
    low = verdict(Reading(rss=12000 * MB, available=500 * MB, total=16000 * MB))
    assert low is not None and "500 MB left on this machine" in low
    # ... but not a small command on a machine others have filled
    assert verdict(Reading(rss=200 * MB, available=100 * MB, total=16000 * MB)) is None
    # a container: its limit less what it holds that cannot be reclaimed
    box = verdict(
        Reading(
            rss=1900 * MB, available=50000 * MB, total=64000 * MB, cgroup_left=40 * MB, cgroup_limit=2048 * MB
        )
    )
    assert box is not None and "left of the container's 2,048 MB" in box
    assert verdict(Reading(rss=1000 * MB, cgroup_left=900 * MB, cgroup_limit=2048 * MB)) is None


def _opscope(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "opscope", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path / "cache"), **env},
        timeout=300,
        check=False,
    )


@pytest.mark.corpus
def test_a_command_over_its_budget_stops_with_one_line(tmp_path: Path) -> None:
    trace = str(corpus_path(OWLV2))
    done = _opscope(["analyze", trace], tmp_path, OPSCOPE_MAX_MEMORY="150M")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("opscope: error: out of memory in stage '"), lines[0]
    assert f"on {os.path.basename(trace)} (3 MB)" in lines[0]
    assert "over the 150 MB that OPSCOPE_MAX_MEMORY allows" in lines[0]
    assert "Traceback" not in done.stderr and "RUST_BACKTRACE" not in done.stderr
    # the same command with room to spare: nothing in the way, and nothing half-kept read back
    again = _opscope(["analyze", trace, "--format", "json"], tmp_path, OPSCOPE_MAX_MEMORY="4G")
    assert again.returncode == 0, again.stderr
    assert '"schema": "opscope.analyze/1"' in again.stdout


def test_a_bad_budget_is_one_line(tmp_path: Path) -> None:
    done = _opscope(["formats"], tmp_path, OPSCOPE_MAX_MEMORY="lots")
    assert done.returncode == 2
    assert done.stderr.strip() == "opscope: error: OPSCOPE_MAX_MEMORY='lots' is not a size (e.g. 800M, 2G)"


PANIC_TEXT = (
    b"thread '<unnamed>' panicked at crates/polars-core/src/x.rs:1:5:\n"
    b"index out of bounds: the len is 1 but the index is 5\n"
    b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
)


def test_rust_panic_text_is_dropped_line_by_line() -> None:
    noise = NoiseFilter()
    lines = [b"kept 1", *PANIC_TEXT.splitlines(), b"memory allocation of 4096 bytes failed", b"kept 2"]
    assert [line for line in lines if noise.keep(line)] == [b"kept 1", b"kept 2"]
    # the older one-line form: "panicked at 'msg', file:line:col" then the note
    older = NoiseFilter()
    assert not older.keep(b"thread 'main' panicked at 'boom', src/lib.rs:1:1")
    assert not older.keep(b"note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace")
    assert older.keep(b"after")


def test_native_writes_to_stderr_pass_the_filter_without_panic_text() -> None:
    """What native code writes to descriptor 2 in a console-script process: the panic report is gone, the
    rest arrives; Python's own lines go straight to standard error."""
    code = (
        "import os, sys\n"
        "from opscope.cli import native_noise\n"
        "with native_noise.filtered():\n"
        f"    os.write(2, b'native before\\n' + {PANIC_TEXT!r} + b'native after\\n')\n"
        "    print('opscope: error: one line', file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert sorted(done.stderr.splitlines()) == ["native after", "native before", "opscope: error: one line"]
    debug = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "OPSCOPE_DEBUG": "1"},
    )
    assert "RUST_BACKTRACE" in debug.stderr  # OPSCOPE_DEBUG shows everything
