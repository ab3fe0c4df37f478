"""Packaging (issue 10, item 1): the sdist carries the whole Rust crate and its lockfile, so that `pip install`
of it compiles opscope._native anywhere; a wheel built by maturin holds the extension and imports on its own.

Built with the same maturin the build backend uses (`pyproject.toml`'s `[build-system]`, also in the dev extra).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _maturin() -> str:
    found = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")
    if found is None:
        pytest.skip("maturin is not installed (pip install -e '.[dev]' installs it)")
    return found


def _tracked(*prefixes: str) -> set[str]:
    out = subprocess.run(
        ["git", "ls-files", *prefixes], cwd=REPO, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    return {line for line in out.stdout.splitlines() if line}


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    subprocess.run([_maturin(), "sdist", "--out", str(out)], cwd=REPO, check=True, capture_output=True)
    (archive,) = out.glob("opscope-*.tar.gz")
    return archive


def test_the_sdist_holds_the_crate_its_lockfile_and_the_package(sdist: Path) -> None:
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    crate = {
        p for p in _tracked("native") if not p.startswith("native/fuzz/") and p.endswith((".rs", ".toml"))
    }
    package = {p for p in _tracked("src/opscope") if p.endswith((".py", ".pyi"))}
    assert {"pyproject.toml", "native/Cargo.lock", "native/Cargo.toml", "README.md"} <= names
    assert "build_backend/opscope_build.py" in names, "the build backend pyproject.toml names"
    assert crate - names == set(), "Rust sources missing from the sdist"
    assert package - names == set(), "Python modules missing from the sdist"
    # nothing built, captured or borrowed rides along
    assert not [n for n in names if n.startswith(("native/target", "bench/out")) or n.endswith(".so")]
    assert not [n for n in names if n.endswith((".json.gz", ".pt.trace.json", ".parquet", ".sqlite"))]


def test_the_crate_in_the_sdist_resolves_from_its_own_lockfile(sdist: Path, tmp_path: Path) -> None:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (root,) = tmp_path.iterdir()
    # --locked: the committed Cargo.lock must already say everything (no resolution on a user's machine);
    # --offline: the crates it names are the ones this checkout's build fetched
    result = subprocess.run(
        [
            cargo,
            "metadata",
            "--locked",
            "--offline",
            "--format-version",
            "1",
            "--manifest-path",
            str(root / "native" / "Cargo.toml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"name":"opscope-native"' in result.stdout and '"name":"opscope-ingest"' in result.stdout


def test_a_built_wheel_holds_the_extension_and_imports_alone(tmp_path: Path) -> None:
    """The wheel `pip install .` installs: built in the release profile (reusing this checkout's build), tagged
    abi3 and manylinux, unpacked into an empty folder, and imported from there in a fresh interpreter (the
    install into a venv without Rust is .ci/wheel_check.sh)."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    wheels = tmp_path / "wheels"
    subprocess.run(
        [_maturin(), "build", "--release", "--out", str(wheels), "--interpreter", sys.executable],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("opscope-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "site")
    # one wheel for every CPython >= 3.10 (abi3); on Linux maturin's auditwheel check names the manylinux policy
    # the library's glibc symbols allow, so the wheel installs on other distributions (the zig-linked
    # manylinux_2_17 wheel is .ci/wheel_check.sh's)
    (info,) = [n for n in names if n.endswith(".dist-info/WHEEL")]
    tags = [
        line.split(":", 1)[1].strip()
        for line in (tmp_path / "site" / info).read_text().splitlines()
        if line.startswith("Tag:")
    ]
    assert len(tags) == 1 and tags[0].startswith("cp310-abi3-"), tags
    if sys.platform.startswith("linux"):
        assert tags[0].split("-")[2].startswith("manylinux_"), tags
    assert "opscope/__init__.py" in names and "opscope/cli/main.py" in names
    extensions = [n for n in names if n.startswith("opscope/_native") and n.endswith(".so")]
    assert extensions, sorted(names)[:20]
    if sys.platform.startswith("linux"):
        # the release profile strips the binary (a 34 MB extension with line tables is 6 MB without)
        elftools = pytest.importorskip(
            "elftools.elf.elffile", reason="pyelftools comes with auditwheel (dev extra)"
        )
        with open(tmp_path / "site" / extensions[0], "rb") as handle:
            sections = [section.name for section in elftools.ELFFile(handle).iter_sections()]
        left = [name for name in sections if name == ".symtab" or name.startswith(".debug_")]
        assert not left, f"the wheel's extension keeps debug sections or a symbol table: {left}"
    entry = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as archive:
        scripts = archive.read(entry[0]).decode().replace(" ", "")
    assert "[console_scripts]\nopscope=opscope.cli.main:entry" in scripts
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import opscope, opscope._native as n; "
        "print(opscope.__file__); print(len(n.columns()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "site")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    where, columns = result.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "site") and int(columns) > 0


def test_the_readme_commands_pin_the_torch_ci_installs() -> None:
    """The demo command and the test command install the same torch as .ci/run, so that the second finds the
    first's ~3 GB CUDA stack installed instead of downloading another (issue 30, item 2)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("pip install -e ")]
    demo = [line for line in commands if line.endswith("&& opscope demo")]
    tests = [line for line in commands if line.endswith("python -m pytest -q")]
    assert len(demo) == 1 and len(tests) == 1, commands
    pins = {pin for line in (demo[0], tests[0]) for pin in re.findall(r'"torch==([0-9.]+)"', line)}
    assert pins == set(re.findall(r'"torch==([0-9.]+)"', ci)) and len(pins) == 1, pins
