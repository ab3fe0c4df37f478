"""polars' jemalloc decay (cli/allocator.py): set before polars starts (jemalloc reads it once, then), and a
value the user set is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import corpus_path
from opscope.cli import allocator

V100 = "hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def test_the_decay_is_set_unless_the_user_set_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(allocator.JEMALLOC_CONF, raising=False)
    allocator.prepare()
    assert os.environ[allocator.JEMALLOC_CONF] == allocator.DECAY
    monkeypatch.setenv(allocator.JEMALLOC_CONF, "dirty_decay_ms:1000")
    allocator.prepare()
    assert os.environ[allocator.JEMALLOC_CONF] == "dirty_decay_ms:1000"


def test_the_cli_sets_it_before_polars_is_imported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A real command in a fresh process: when `prepare` runs, polars is not loaded yet, and polars then
    starts with the setting last in its jemalloc options."""
    program = (
        "import sys\n"
        "from opscope.cli import allocator, main\n"
        "seen = []\n"
        "real = allocator.prepare\n"
        "def prepare():\n"
        "    seen.append('polars' in sys.modules)\n"
        "    real()\n"
        "allocator.prepare = prepare\n"
        "code = main.main(['summary', sys.argv[1], '--format', 'json'])\n"
        "import os\n"
        "print(code, seen, 'polars' in sys.modules, os.environ.get(allocator.JEMALLOC_CONF))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != allocator.JEMALLOC_CONF}
    env["OPSCOPE_CACHE_DIR"] = str(tmp_path / "cache")
    done = subprocess.run(
        [sys.executable, "-c", program, str(corpus_path(V100))],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    code, seen, polars_loaded, conf = done.stdout.strip().splitlines()[-1].split(" ")
    assert (code, seen, polars_loaded) == ("0", "[False]", "True")
    # polars puts its own defaults first and the environment's value after them: the later option wins
    assert conf.endswith("," + allocator.DECAY)
