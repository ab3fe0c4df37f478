"""Shared fixtures: the real-trace corpus (../shared/traces or $OPSCOPE_TRACES), an isolated cache folder,
and an in-process CLI runner."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRACES = Path(os.environ.get("OPSCOPE_TRACES", REPO.parent / "shared" / "traces"))


def corpus_path(relative: str) -> Path:
    """A file of the real-trace corpus; skips the test (with the reason) when the corpus is absent."""
    if not TRACES.is_dir():
        pytest.skip(f"real-trace corpus not found at {TRACES} (set OPSCOPE_TRACES)")
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"corpus file missing: {path}")
    return path


def pytest_configure(config: pytest.Config) -> None:
    # numpy's RuntimeWarnings (overflow, invalid value in a cast, ...) must never reach a user (issue 14): over
    # the real corpus and every hand-made edge case, one is a failing test.
    config.addinivalue_line("filterwarnings", "error::RuntimeWarning")


def _corpus_state() -> dict[str, tuple[int, int]]:
    """Every file under the corpus: (size, modification time in ns)."""
    state = {}
    for path in sorted(TRACES.rglob("*")) if TRACES.is_dir() else ():
        if path.is_file():
            info = path.stat()
            state[str(path.relative_to(TRACES))] = (info.st_size, info.st_mtime_ns)
    return state


@pytest.fixture(autouse=True, scope="session")
def _corpus_untouched() -> Iterator[None]:
    """The whole run fails if any test wrote into the shared corpus (a file added, changed or removed): tests
    write only to temporary folders (issue 30; a report once landed beside a corpus trace)."""
    before = _corpus_state()
    yield
    after = _corpus_state()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        pytest.fail(f"the test run changed the shared corpus at {TRACES}: {', '.join(changed[:10])}")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["OPSCOPE_CACHE_DIR"] = str(tmp_path_factory.mktemp("opscope-cache"))


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `opscope ARGS...` in-process; returns exit code, stdout and stderr."""
    from opscope.cli.main import main

    def run(*argv: str | os.PathLike[str]) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
