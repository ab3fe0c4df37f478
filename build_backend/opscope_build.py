"""opscope's PEP 517 build backend: maturin's, except that a missing Rust toolchain is one clear line.

Building opscope from source (a checkout, the sdist, a platform without a prebuilt wheel) compiles its Rust core
and needs `cargo`. Without it, maturin's backend asks pip for `puccinialin`, downloads a Rust toolchain into a
temporary folder and compiles for about 15 minutes, or (with MATURIN_NO_INSTALL_RUST set) fails with a few lines
of its own. This backend stops at the first hook instead, with one line saying what to install; a prebuilt wheel
needs no Rust at all. OPSCOPE_BUILD_FETCH_RUST=1 restores maturin's temporary toolchain.

pyproject.toml names it (`backend-path = ["build_backend"]`); the sdist carries it ([tool.maturin] include).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import maturin

NO_RUST = (
    "opscope: building from source needs the Rust toolchain (cargo on PATH), which was not found: install it "
    "from https://rustup.rs (the build then takes ~15 min on 2 cores), or install a prebuilt wheel instead "
    "(pip install --only-binary opscope opscope)"
)

Hook = TypeVar("Hook", bound=Callable[..., Any])


def _require_cargo(hook: Hook) -> Hook:
    def checked(*args: Any, **kwargs: Any) -> Any:
        if shutil.which("cargo") is None and not os.environ.get("OPSCOPE_BUILD_FETCH_RUST"):
            print(NO_RUST, file=sys.stderr)
            raise SystemExit(1)  # no traceback: the frontend shows this one line as the hook's output
        return hook(*args, **kwargs)

    checked.__name__ = hook.__name__
    checked.__doc__ = hook.__doc__
    return checked  # type: ignore[return-value]


get_requires_for_build_wheel = _require_cargo(maturin.get_requires_for_build_wheel)
get_requires_for_build_editable = _require_cargo(maturin.get_requires_for_build_editable)
get_requires_for_build_sdist = _require_cargo(maturin.get_requires_for_build_sdist)
prepare_metadata_for_build_wheel = _require_cargo(maturin.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _require_cargo(maturin.prepare_metadata_for_build_editable)
build_wheel = _require_cargo(maturin.build_wheel)
build_editable = _require_cargo(maturin.build_editable)
build_sdist = _require_cargo(maturin.build_sdist)
