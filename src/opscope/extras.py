"""How to install an optional extra, said in the form that works for how this opscope was installed.

Messages that need an extra (jinja2 for HTML, torch for capture, ...) end with the command to get it, built here
and nowhere else. An installed wheel (from PyPI or a built file) takes `pip install 'opscope[html]'`: pip finds
opscope already installed and adds the extra's packages. A source checkout (an editable install, or `src` on
PYTHONPATH) takes `pip install -e '.[html]'` from the checkout (its path when run from elsewhere): the name
`opscope` may not resolve to this copy there. The argument is quoted for the shell (zsh expands a bare `[html]`).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

_NAME = re.compile(r'^name\s*=\s*"opscope"\s*$', re.MULTILINE)


def source_checkout() -> Path | None:
    """The checkout this opscope runs from (`<checkout>/src/opscope`), or None when it runs from an installed
    wheel (`site-packages/opscope`, with no opscope pyproject.toml two folders up)."""
    root = Path(__file__).resolve().parents[2]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return root if _NAME.search(text) else None


def install_command(extra: str) -> str:
    """The shell command that installs the extra `extra` for this opscope."""
    checkout = source_checkout()
    if checkout is None:
        return "pip install " + shlex.quote(f"opscope[{extra}]")
    try:
        here = Path.cwd().resolve() == checkout
    except OSError:  # the current folder was removed
        here = False
    return "pip install -e " + shlex.quote(f"{'.' if here else checkout}[{extra}]")
