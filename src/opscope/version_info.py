"""`opscope --version`: what a bug report needs (issue 54 item 3): the version, the native core's build (its file,
its ABI tag, the machine, the oldest glibc its symbols ask for), the Python it runs on, and which optional extras
are installed (by their `.dist-info` folders: nothing is imported, so the answer is as quick and as small as `--help`)."""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

from opscope._version import __version__

# extra -> the distributions it installs (pyproject.toml's optional dependencies)
EXTRAS = {
    "torch": ("torch",),
    "jax": ("jax",),
    "dask": ("dask", "distributed"),
    "postgres": ("psycopg",),
    "pandas": ("pandas",),
    "mcp": ("mcp", "jsonschema"),
    "html": ("jinja2",),
    "demangle": ("llvm-demangle-fxti",),
}
_GLIBC = re.compile(rb"GLIBC_(\d+)\.(\d+)")


def _glibc_versions(path: Path) -> set[tuple[int, int]]:
    """The GLIBC_x.y symbol versions named in the file, read 64 KiB at a time (`--version` is the memory
    baseline of the scale checks: it must not hold the whole library)."""
    found: set[tuple[int, int]] = set()
    tail = b""
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 16):
                block = tail + chunk
                found |= {(int(a), int(b)) for a, b in _GLIBC.findall(block)}
                tail = block[-16:]
    except OSError:
        return set()
    return found


def _native() -> str:
    spec = importlib.util.find_spec("opscope._native")
    if spec is None or not spec.origin:
        return "native core: not built (pip install from a wheel, or maturin develop)"
    path = Path(spec.origin)
    tag = path.name.split(".")[1] if path.name.count(".") >= 2 else "?"
    found = _glibc_versions(path)
    glibc = "glibc >= {}.{}".format(*max(found)) if found else "no glibc symbol versions"
    size = path.stat().st_size / 1e6 if path.exists() else 0.0
    return f"native core: {path.name} ({tag}, {platform.machine()}, {glibc}, {size:.1f} MB)"


def _installed() -> dict[str, str]:
    """Installed distributions and their versions, from the `name-version.dist-info` folders on `sys.path`
    (a directory listing each: importlib.metadata would import the email and zip machinery, and `--version` is
    the memory baseline of the scale checks)."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and "-" in name:
                dist, _, version = name[: -len(".dist-info")].partition("-")
                found.setdefault(dist.lower().replace("-", "_").replace(".", "_"), version)
    return found


def _extras() -> str:
    installed = _installed()
    found = []
    for extra, dists in EXTRAS.items():
        versions = [installed.get(d.lower().replace("-", "_")) for d in dists]
        if all(versions):
            found.append(f"{extra} ({', '.join(f'{d} {v}' for d, v in zip(dists, versions, strict=True))})")
    return "extras: " + ("; ".join(found) if found else "none")


def version_text() -> str:
    lines = [
        f"opscope {__version__}",
        _native(),
        f"python: {sys.version.split()[0]} ({platform.python_implementation()}, {sys.platform})",
        _extras(),
    ]
    return "\n".join(lines)


__all__ = ["EXTRAS", "version_text"]
