"""Imports run one way, down the layers (issue 17): a module may import from its own layer and from the layers
below it, never from one above. Every import of every module under src/opscope is checked, lazy ones inside
functions and `if TYPE_CHECKING:` ones included, read with `ast` (nothing is imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import opscope

ROOT = Path(opscope.__file__).parent
# Lowest first. A module's layer is that of the longest prefix listed here; `opscope` alone is the top-level API.
LAYERS: tuple[tuple[str, ...], ...] = (
    # untrusted: escaping text; tables: the notebook protocol every result mixes in (needs only errors)
    ("opscope.errors", "opscope.model", "opscope._version", "opscope.untrusted", "opscope.tables"),
    # the native (Rust) reader is part of ingest; `loading` is ingest's `load` behind the API's error boundary
    ("opscope.ingest", "opscope._native", "opscope.loading"),
    ("opscope.analysis",),
    ("opscope.scale",),
    ("opscope.capture",),
    ("opscope.history",),  # run history: reads traces through ingest, reduces them through the analyses
    ("opscope.report",),
    ("opscope.cli",),
    ("opscope",),
)


def layer(module: str) -> int:
    """Index in LAYERS of the longest listed prefix of `module`."""
    best, best_len = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """A module or package of the source tree, or an extension module (`opscope._native`, built or not)."""
    path = ROOT.parent / name.replace(".", "/")
    return path.with_suffix(".py").exists() or path.is_dir() or any(name in group for group in LAYERS) or \
        any(path.parent.glob(f"{path.name}.*.so")) or any(path.parent.glob(f"{path.name}*.pyd"))


def imported(source: str, name: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every opscope import in the source of module `name`, relative imports resolved.
    `from opscope import x` counts as importing `opscope.x` when x is a submodule, else the package itself."""
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "opscope"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "opscope":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.append((node.lineno, sub if is_module(sub) else base))
    return out


def test_no_import_runs_up_the_layers():
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        here = module_name(path)
        for line, target in imported(path.read_text(encoding="utf-8"), here, path.name == "__init__.py"):
            if layer(target) > layer(here):
                upward.append(f"{path.relative_to(ROOT.parent)}:{line}: {here} imports {target}")
    assert upward == []


def test_the_checker_sees_lazy_type_checking_and_relative_imports():
    # The walk must not miss imports hidden inside functions or under TYPE_CHECKING.
    text = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opscope.report import Document\n"
            "def f():\n    from ..cli import main\n    import opscope.scale.executor\n"
            "    from opscope import __version__\n    from opscope import _native\n")
    found = [target for _, target in imported(text, "opscope.capture.probe")]
    assert found == ["opscope.report", "opscope.cli.main", "opscope.scale.executor", "opscope", "opscope._native"]
    assert [layer(t) > layer("opscope.capture.probe") for t in found] == [True, True, False, True, False]


def test_layers_are_ordered_as_documented():
    order = ["opscope.errors", "opscope.model.schema", "opscope.ingest.kineto", "opscope._native",
             "opscope.analysis.attribution.ops", "opscope.scale.executor", "opscope.capture.profiler",
             "opscope.report.render", "opscope.cli.main", "opscope"]
    levels = [layer(m) for m in order]
    assert levels == sorted(levels) and levels[0] == layer("opscope.model") and levels[2] == levels[3]
