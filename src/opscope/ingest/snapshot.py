"""Reading `torch.cuda.memory._dump_snapshot` files (pickles) without executing anything in them.

A pickle can name any importable callable and call it while loading, so the file is untrusted like a trace:
`SafeUnpickler.find_class` refuses every global, which leaves only what the pickle opcodes build by themselves
(dicts, lists, tuples, strings, bytes, numbers, booleans, None) — exactly what `_snapshot()` returns.
Anything else (a class, a function, `os.system`, a persistent id) ends the read with one line, before it runs.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any

from opscope.errors import InputError

PICKLE_SUFFIXES = (".pickle", ".pkl")
MAX_BYTES = 2 << 30  # larger than any snapshot a GPU's allocator history makes; a bound on what is read


class SafeUnpickler(pickle.Unpickler):
    """Builtin containers and scalars only: every global lookup is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}: a snapshot holds only plain data")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refusing a persistent id: a snapshot holds only plain data")


def is_snapshot(path: str | Path) -> bool:
    """Whether `path` looks like a pickle: its suffix, or the protocol opcode pickles of protocol 2+ start with."""
    p = Path(path)
    if p.suffix.lower() in PICKLE_SUFFIXES:
        return True
    try:
        with p.open("rb") as f:
            head = f.read(2)
    except OSError:
        return False
    return len(head) == 2 and head[0] == 0x80 and 2 <= head[1] <= 5


def loads_snapshot(data: bytes, name: str = "snapshot") -> dict[str, Any]:
    try:
        value = SafeUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as exc:
        raise InputError(f"{name}: not a memory snapshot: {exc}") from None
    except (
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        AttributeError,
        MemoryError,
        RecursionError,
        OverflowError,
        UnicodeDecodeError,
    ) as exc:
        raise InputError(
            f"{name}: not a memory snapshot (not a readable pickle: {type(exc).__name__})"
        ) from None
    if not isinstance(value, dict) or not isinstance(value.get("segments"), list):
        raise InputError(
            f"{name}: not a memory snapshot (no 'segments' list; expected the dictionary "
            "torch.cuda.memory._snapshot() returns)"
        )
    return value


def read_snapshot(path: str | Path) -> dict[str, Any]:
    """The snapshot dictionary in `path`; an `InputError` (one line) for anything else."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise InputError(f"{p}: larger than {MAX_BYTES >> 30} GiB: not read as a memory snapshot")
    return loads_snapshot(data, str(p))
