"""Imports run one way, down the layers (issue 17, issue 24): a module may import from its own layer and from the
layers below it, never from one above; no two modules import each other, directly or round a circle; the
analyses' ground floor (`analysis/base/`) imports no other analysis; the analyses never read a file format
(`ingest`); reports only lay out computed results (they import result types and constants from `analysis`, never
a function that computes). Every import of every module under src/opscope is checked, lazy ones inside
functions and `if TYPE_CHECKING:` ones included, read with `ast`."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import opscope

ROOT = Path(opscope.__file__).parent
# Lowest first. A module's layer is that of the longest prefix listed here; `opscope` alone is the top-level API.
LAYERS: tuple[tuple[str, ...], ...] = (
    # untrusted: escaping text; tables: the notebook protocol every result mixes in (needs only errors); extras:
    # how to install an optional extra
    (
        "opscope.errors",
        "opscope.model",
        "opscope._version",
        "opscope.version_info",  # `--version`'s text: the version, the native core's file, the extras (stdlib only)
        "opscope.untrusted",
        "opscope.tables",
        "opscope.extras",
    ),
    # the native (Rust) core: reading and decoding (the readers' batches, demangling names)
    ("opscope._native",),
    # `loading` is ingest's `load` behind the API's error boundary
    ("opscope.ingest", "opscope.loading"),
    ("opscope.analysis",),
    ("opscope.scale",),
    ("opscope.export",),  # other tools' formats out: reads results (and the source file again), writes files
    ("opscope.capture",),
    ("opscope.history",),  # run history: reads traces through ingest, reduces them through the analyses
    ("opscope.report",),
    (
        "opscope.serve",
    ),  # opscope mcp: tools, roots, bounded answers; the CLI hands it the way to run a command
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
    return (
        path.with_suffix(".py").exists()
        or path.is_dir()
        or any(name in group for group in LAYERS)
        or any(path.parent.glob(f"{path.name}.*.so"))
        or any(path.parent.glob(f"{path.name}*.pyd"))
    )


def imported(source: str, name: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, module) of every opscope import in the source of module `name`, relative imports resolved.
    `from opscope import x` counts as importing `opscope.x` when x is a submodule, else the package itself."""
    package = name if is_package else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [
                (node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "opscope"
            ]
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
    text = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from opscope.report import Document\n"
        "def f():\n    from ..cli import main\n    import opscope.scale.executor\n"
        "    from opscope import __version__\n    from opscope import _native\n"
    )
    found = [target for _, target in imported(text, "opscope.capture.probe")]
    assert found == [
        "opscope.report",
        "opscope.cli.main",
        "opscope.scale.executor",
        "opscope",
        "opscope._native",
    ]
    assert [layer(t) > layer("opscope.capture.probe") for t in found] == [True, True, False, True, False]


def test_layers_are_ordered_as_documented():
    order = [
        "opscope.errors",
        "opscope.model.schema",
        "opscope._native",
        "opscope.ingest.kineto",
        "opscope.analysis.attribution.ops",
        "opscope.scale.executor",
        "opscope.export.chrome",
        "opscope.capture.profiler",
        "opscope.report.render",
        "opscope.cli.main",
        "opscope",
    ]
    levels = [layer(m) for m in order]
    assert levels == sorted(levels) and levels[0] == layer("opscope.model")


def graph() -> dict[str, set[str]]:
    """Module -> the opscope modules it imports (a package import counts as importing its `__init__`)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        here = module_name(path)
        edges[here] = {
            t
            for _, t in imported(path.read_text(encoding="utf-8"), here, path.name == "__init__.py")
            if t != here
        }
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def room(module: str) -> str:
    """`opscope.analysis.timeline.busy` -> `opscope.analysis.timeline`; modules of `analysis/` itself and the
    other packages are their own room at the package level (`opscope.report`, `opscope.analysis.overview`)."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "analysis":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def test_no_module_imports_itself_round_a_circle():
    assert circles(graph()) == []


def test_no_room_imports_itself_round_a_circle():
    rooms: dict[str, set[str]] = {}
    for here, targets in graph().items():
        rooms.setdefault(room(here), set()).update(room(t) for t in targets if room(t) != room(here))
    assert circles(rooms) == []


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_ground_floor_imports_no_other_analysis():
    wrong = [
        f"{here} imports {t}"
        for here, targets in graph().items()
        if here.startswith("opscope.analysis.base")
        for t in targets
        if t.startswith("opscope.analysis") and not t.startswith("opscope.analysis.base")
    ]
    assert wrong == []


def test_analyses_read_no_file_format():
    wrong = [
        f"{here} imports {t}"
        for here, targets in graph().items()
        if here.startswith("opscope.analysis")
        for t in targets
        if t.startswith(("opscope.ingest", "opscope.loading", "opscope.export"))
    ]
    assert wrong == []


def test_reports_only_lay_out_computed_results():
    """`report/` may import result types and constants from `analysis`, never a function (that would compute),
    and reads no file format (`ingest`); the bundle (`analysis/bundle.py`) computes what a report shows."""
    wrong = []
    for path in sorted((ROOT / "report").rglob("*.py")):
        here = module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                wrong += [
                    f"{here} imports {a.name}"
                    for a in node.names
                    if a.name.startswith(("opscope.analysis", "opscope.ingest"))
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opscope.ingest"):
                wrong.append(f"{here} imports {node.module}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("opscope.analysis"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    value = getattr(module, alias.name, None)
                    if inspect.ismodule(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
                        wrong.append(f"{here} imports {node.module}.{alias.name}")
    assert wrong == []
