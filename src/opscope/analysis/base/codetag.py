"""The tag of the code behind a result kept beside the trace cache (ingest/derived.py): a hash of the functions
and the plain constants (text, numbers, tuples, sets, dicts of them) of the modules that compute it, names
imported into them included, so a result stored by other code (another release, a local change) is never read
back as this code's. The same in every process: marshal's bytes vary with reference counts and a set's order
with the hash seed, so neither is used."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import re
import types
from pathlib import Path
from typing import Any


@functools.cache
def code_tag(*modules: types.ModuleType) -> str:
    """16 hex digits over `modules`' functions and plain constants, in name order."""
    digest = hashlib.sha256()
    for module in modules:
        digest.update(module.__name__.encode())
        for name, value in sorted(vars(module).items()):
            code = getattr(value, "__code__", None)
            if isinstance(code, types.CodeType):
                digest.update(name.encode())
                _digest_code(digest, code)
            elif (text := _plain(value)) is not None:
                digest.update(f"{name}={text}".encode())
    return digest.hexdigest()[:16]


_COMPILED = frozenset({".pyc", ".pyo", ".so", ".pyd"})  # built from the sources, or the native reader


@functools.cache
def source_tag(*packages: str) -> str | None:
    """16 hex digits over the files of `packages` (dotted names: "opscope.analysis"): every module's source and
    every data file (the GPU peak table), in path order, for a result whose computation spans more modules than
    one could list: any change to any of them is other code. None where the sources cannot be read (the result is then computed, not kept). The
    packages are found, not imported."""
    digest = hashlib.sha256()
    try:
        for package in packages:
            spec = importlib.util.find_spec(package)
            roots = list(spec.submodule_search_locations or []) if spec is not None else []
            if not roots:
                return None
            files = [
                (root, path)
                for root in roots
                for path in sorted(Path(root).rglob("*"))
                if path.suffix not in _COMPILED and "__pycache__" not in path.parts and path.is_file()
            ]
            if not files:  # sources that are not files (a zip import): nothing to tell versions apart by
                return None
            for root, path in files:
                digest.update(path.relative_to(root).as_posix().encode() + b"\0")
                digest.update(path.read_bytes())
    except (OSError, ImportError, ValueError):
        return None
    return digest.hexdigest()[:16]


def analysis_tag(*more: str) -> str | None:
    """`source_tag` of the analyses, the event model and the data tables they read, and of the packages `more`
    (the report's page, the history's figures): the tag of results whose code spans the rooms (the busy / idle
    analyses, the step table, the rules' checks)."""
    return source_tag("opscope.analysis", "opscope.model", "opscope.data", *more)


def _digest_code(digest: Any, code: types.CodeType) -> None:
    """The bytecode, names and constants of `code` and of the code nested in it."""
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _digest_code(digest, const)
        else:
            digest.update((_plain(const) or type(const).__name__).encode())


def _plain(value: Any) -> str | None:
    """A text of `value` that is the same in every process, for plain values; None for anything else."""
    if value is None or isinstance(value, (str, bytes, int, float, complex)):  # bool is an int
        return repr(value)
    if isinstance(value, re.Pattern):
        return f"re({value.pattern!r}, {value.flags})"
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return None if None in items else f"{type(value).__name__}({', '.join(items)})"  # type: ignore[arg-type]
    if isinstance(value, (set, frozenset)):
        items = [_plain(v) for v in value]
        return None if None in items else f"set({', '.join(sorted(items))})"  # type: ignore[arg-type]
    if isinstance(value, dict):
        pairs = [(_plain(k), _plain(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return "dict(" + ", ".join(f"{k}: {v}" for k, v in pairs) + ")"
    return None
