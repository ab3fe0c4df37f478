"""No join on a key followed by a containment filter anywhere in src/ (issue 57): the all-pairs interval join
that grows with the square of the trace (every synchronising call paired with every Python frame of its
thread, every wait with every launch on its stream, then filtered by time). Containment questions go through
the ground floor's sweeps (`analysis/base/enclosing.py`, `windows.overlap_pairs`, `intervals.inside_any`,
`intervals.Coverage`) or an as-of join.

What a reviewer looks for, and what this test finds with `ast`: a method chain in which `.join(...)` (not a
semi or anti join, which never multiply rows, and not `join_asof`) is followed by `.filter(...)` that compares
two columns with <, <=, > or >=. A join whose key is unique on one side cannot multiply rows and is listed in
ALLOWED with the reason."""

from __future__ import annotations

import ast
from pathlib import Path

import opscope

ROOT = Path(opscope.__file__).parent
COMPARISONS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

# (module, function): why its join cannot pair all with all
ALLOWED = {
    ("analysis/attribution/lines.py", "_cpu_self"): "each scope has one parent_row: the join is many-to-one",
    ("analysis/base/linking.py", "_python_parents"): "the frames are unique by Python id: many-to-one",
}


def _chain(node: ast.AST) -> list[ast.Call]:
    """The calls of a method chain, innermost first (`a.join(...).filter(...)`: join, filter)."""
    calls: list[ast.Call] = []
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        calls.append(node)
        node = node.func.value
    return calls[::-1]


def _is_pairing_join(call: ast.Call) -> bool:
    assert isinstance(call.func, ast.Attribute)
    if call.func.attr != "join":
        return False
    if isinstance(call.func.value, ast.Constant):  # "".join(...)
        return False
    how = next((k.value for k in call.keywords if k.arg == "how"), None)
    return not (isinstance(how, ast.Constant) and how.value in ("semi", "anti"))


def _compares_columns(call: ast.Call) -> bool:
    for node in ast.walk(call):
        if isinstance(node, ast.Compare) and any(isinstance(op, COMPARISONS) for op in node.ops):
            sides = [node.left, *node.comparators]
            if sum(1 for side in sides if "col" in ast.dump(side)) >= 2:
                return True
    return False


def found() -> list[tuple[str, str, int]]:
    """(module, function, line) of every join followed by a filter comparing two columns."""
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                calls = _chain(node)
                for i, call in enumerate(calls):
                    if not _is_pairing_join(call):
                        continue
                    later = [
                        c
                        for c in calls[i + 1 :]
                        if isinstance(c.func, ast.Attribute) and c.func.attr == "filter"
                    ]
                    if any(_compares_columns(c) for c in later):
                        out.append((path.relative_to(ROOT).as_posix(), function.name, call.lineno))
    return sorted(set(out))


def test_no_join_is_followed_by_a_containment_filter() -> None:
    offending = [(m, f, line) for m, f, line in found() if (m, f) not in ALLOWED]
    assert offending == [], "join then compare-filter (all pairs of a key): use analysis/base/enclosing.py"


def test_the_check_finds_the_pattern_it_is_for() -> None:
    """The shape the issue found in `rules/syncs.python_context`, written as it was: the check must see it."""
    source = (
        "def python_context(queries, frames):\n"
        "    return queries.join(frames, on=['pid', 'tid']).filter(\n"
        "        (pl.col('_fs') <= pl.col('ts_ns')) & (pl.col('_fe') >= pl.col('end_ns'))\n"
        "    )\n"
    )
    tree = ast.parse(source)
    hits = [
        call
        for node in ast.walk(tree)
        for i, call in enumerate(_chain(node))
        if _is_pairing_join(call)
        and any(
            _compares_columns(c)
            for c in _chain(node)[i + 1 :]
            if isinstance(c.func, ast.Attribute) and c.func.attr == "filter"
        )
    ]
    assert hits
