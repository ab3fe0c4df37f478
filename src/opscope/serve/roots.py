"""Which files `opscope mcp` may read: files under its roots, and of the kind the tool reads.

An agent passes paths it may have read in a prompt, an issue or a trace; the server reads only what its user
put under its roots (`--root DIR`, repeatable; default the current folder). A path is resolved the way the
kernel would open it (every symbolic link followed, `..` applied) and refused when the result is not inside a
root: a path outside them, and a link inside a root that leads out of it. A folder stands for its newest trace,
which must be inside a root too. Then the file must be what the tool reads (a trace by its content, as
`opscope formats` lists them; for `memory` also an allocator snapshot; for `kernels --metrics` an Nsight Compute
CSV), else it is refused before any analysis. Every refusal is one line (an `InputError`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from opscope.errors import InputError, UsageError
from opscope.ingest.inputs import resolve_input
from opscope.ingest.registry import NCU_COLUMNS, detect
from opscope.ingest.snapshot import is_snapshot
from opscope.ingest.source import head_bytes

TRACE = "trace"  # a trace of a format opscope reads
TRACE_OR_SNAPSHOT = "trace or memory snapshot"  # `opscope memory` reads allocator snapshots too
NCU_CSV = "Nsight Compute CSV"  # `opscope kernels --metrics`


@dataclass(frozen=True)
class Roots:
    folders: tuple[Path, ...]  # real paths (links resolved), the first one anchors relative paths

    @classmethod
    def of(cls, folders: Sequence[str | os.PathLike[str]]) -> Roots:
        real = []
        for folder in folders:
            path = Path(os.path.realpath(folder))
            if not path.is_dir():
                raise UsageError(f"--root {os.fspath(folder)}: not a folder")
            real.append(path)
        if not real:
            raise UsageError("at least one --root folder is needed")
        return cls(tuple(dict.fromkeys(real)))

    def describe(self) -> str:
        return ", ".join(str(f) for f in self.folders)

    def inside(self, path: Path) -> bool:
        return any(path == root or root in path.parents for root in self.folders)

    def file(self, given: str, kind: str = TRACE) -> Path:
        """The real path of the file `given` names (relative to the first root), checked as the module says."""
        if not isinstance(given, str) or not given.strip():
            raise InputError("empty path (pass a trace file under the server's roots)")
        lexical = Path(os.path.abspath(self.folders[0] / given))  # `..` applied, links not followed
        real = self._checked(lexical, given)
        if real.is_dir():
            real = self._checked(Path(os.path.realpath(resolve_input(real))), given)
        if not real.exists():
            raise InputError(f"{given}: no such file or folder")
        if not real.is_file():
            raise InputError(f"{given}: not a regular file")
        _check_kind(real, given, kind)
        return real

    def _checked(self, lexical: Path, given: str) -> Path:
        real = Path(os.path.realpath(lexical))
        if self.inside(real):
            return real
        if self.inside(lexical) or self.inside(Path(os.path.realpath(lexical.parent)) / lexical.name):
            raise InputError(
                f"{given}: a symbolic link leading outside the server's roots ({self.describe()}); "
                "refusing to read it"
            )
        raise InputError(f"{given}: outside the server's roots ({self.describe()}); refusing to read it")


def _check_kind(path: Path, given: str, kind: str) -> None:
    """Refuse a file that is not what the tool reads, from its first bytes (nothing is parsed)."""
    if kind == TRACE_OR_SNAPSHOT and is_snapshot(path):
        return
    if kind == NCU_CSV:
        try:
            head = head_bytes(path, 4096)
        except OSError as exc:
            raise InputError(f"{given}: cannot read: {exc.strerror or exc}") from None
        if not all(column in head for column in NCU_COLUMNS):
            raise InputError(f"{given}: not an Nsight Compute CSV (no ID and Kernel Name columns)")
        return
    detect(path, given)  # raises a one-line InputError for anything that is not a trace
