"""Itanium C++ demangling of kernel names.

HIP / ROCm traces often record kernels by their mangled symbol (`_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwd...`,
`_ZN7sgl_hip10activation...`) where CUDA traces have the demangled name. `demangle_names` demangles them with
the `cpp_demangle` crate inside the native core (`opscope._native.demangle`); a name that is not a mangled
symbol, or does not parse, is kept as it is. Tables show the demangled name; JSON keeps the recorded one as
`raw_name`. cpp_demangle does not know some newer clang manglings (C++20 `Tn` template-parameter declarations,
as in `_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_E...`); for the names it cannot
parse, LLVM's own demangler is used when the optional `llvm-demangle-fxti` package is installed
(the `opscope[demangle]` extra).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from opscope import _native


@cache
def _llvm() -> Callable[[str], Any] | None:
    try:
        return importlib.import_module("llvmdemangle").itanium_demangle  # type: ignore[no-any-return]
    except (ImportError, AttributeError, ValueError, OSError):
        return None


def demangle_names(names: Iterable[str]) -> dict[str, str]:
    """Recorded name -> demangled name, for the names that are mangled symbols (others are left out)."""
    wanted = sorted({n for n in names if n.startswith("_Z")})
    if not wanted:
        return {}
    found = {raw: nice for raw, nice in zip(wanted, _native.demangle(wanted), strict=True) if nice}
    fallback = _llvm()
    if fallback is not None:
        for raw in wanted:
            if raw not in found:
                try:
                    nice = fallback(raw)
                except Exception:  # a foreign library on untrusted input: any failure means "not demangled"
                    continue
                if isinstance(nice, str) and nice and nice != raw:
                    found[raw] = nice
    return found


def demangle(name: str) -> str:
    """One name, demangled when it is a mangled symbol."""
    return demangle_names([name]).get(name, name)
