"""Building from source without Rust (issue 30, item 1): the in-tree build backend (build_backend/opscope_build.py,
maturin's with a check) fails with one line saying what to install, instead of maturin fetching a temporary
toolchain or printing a traceback; with cargo present it is maturin's backend unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BACKEND = REPO / "build_backend"


def _path_without_rust() -> str:
    """The current PATH less every folder holding cargo or rustc, with this interpreter's folder first."""
    keep = [str(Path(sys.executable).parent)]
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and not (Path(folder) / "cargo").exists() and not (Path(folder) / "rustc").exists():
            keep.append(folder)
    return os.pathsep.join(keep)


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPSCOPE_BUILD_FETCH_RUST", "PYTHONPATH"}}
    env["PATH"] = path
    return env


def _hook(name: str, path: str) -> subprocess.CompletedProcess[str]:
    code = f"import sys; sys.path.insert(0, sys.argv[1]); import opscope_build as b; print(b.{name}())"
    return subprocess.run(
        [sys.executable, "-c", code, str(BACKEND)],
        cwd=REPO,
        env=_env(path),
        capture_output=True,
        text=True,
        check=False,
    )


def _require_maturin() -> None:
    pytest.importorskip("maturin", reason="maturin is not installed (pip install -e '.[dev]' installs it)")


def test_pyproject_names_the_in_tree_backend() -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    system = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]
    assert system["build-backend"] == "opscope_build"
    assert system["backend-path"] == ["build_backend"]
    assert (BACKEND / "opscope_build.py").is_file()


@pytest.mark.parametrize(
    "hook",
    [
        "get_requires_for_build_wheel",
        "get_requires_for_build_editable",
        "get_requires_for_build_sdist",
        "prepare_metadata_for_build_wheel",
    ],
)
def test_without_cargo_each_first_hook_fails_with_one_line(hook: str) -> None:
    _require_maturin()
    result = _hook(hook, _path_without_rust())
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("opscope: building from source needs the Rust toolchain (cargo on PATH)")
    assert "https://rustup.rs" in lines[0] and "pip install --only-binary opscope opscope" in lines[0]


def test_with_cargo_the_hooks_are_maturins() -> None:
    _require_maturin()
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    result = _hook("get_requires_for_build_wheel", os.environ["PATH"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"  # maturin asks for nothing more when cargo is there


def test_pip_without_cargo_shows_the_one_line(tmp_path: Path) -> None:
    """The real frontend: `pip wheel .` (no build isolation: nothing to download) on a PATH without Rust."""
    _require_maturin()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        cwd=tmp_path,
        env=_env(_path_without_rust()),
        capture_output=True,
        text=True,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "[1 lines of output]" in output, output[-3000:]
    assert "opscope: building from source needs the Rust toolchain" in output
    assert "Traceback" not in output and not list(tmp_path.glob("*.whl"))
