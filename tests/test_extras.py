"""Install hints (issue 30, item 2): a message that needs an extra says the command that works for how opscope
was installed, built by one helper (`opscope.extras.install_command`): `pip install 'opscope[X]'` from a wheel,
`pip install -e '.[X]'` (or the checkout's path) from a source checkout."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from opscope import extras
from opscope.extras import install_command, source_checkout

SRC = Path(extras.__file__).resolve().parents[1]


def _pretend(monkeypatch: pytest.MonkeyPatch, package_dir: Path) -> None:
    """Make the helper believe opscope lives in `package_dir` (it reads its own module path)."""
    monkeypatch.setattr(extras, "__file__", str(package_dir / "extras.py"))


def test_this_test_run_is_a_source_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = SRC.parent
    assert source_checkout() == checkout
    monkeypatch.chdir(checkout)
    assert install_command("html") == "pip install -e '.[html]'"


def test_from_elsewhere_the_checkout_is_named_by_its_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert install_command("postgres") == "pip install -e " + shlex.quote(f"{SRC.parent}[postgres]")


def test_an_installed_wheel_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "opscope"
    site.mkdir(parents=True)
    _pretend(monkeypatch, site)
    assert source_checkout() is None
    assert install_command("postgres") == "pip install 'opscope[postgres]'"  # quoted: zsh globs [..]


def test_another_projects_pyproject_is_not_a_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    (tmp_path / "src" / "opscope").mkdir(parents=True)
    _pretend(monkeypatch, tmp_path / "src" / "opscope")
    assert install_command("dask") == "pip install 'opscope[dask]'"


def test_a_checkout_path_is_quoted_for_the_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "it's a checkout"  # hand-made: a space and a quote in the path
    (root / "src" / "opscope").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "opscope"\n')
    _pretend(monkeypatch, root / "src" / "opscope")
    command = install_command("torch")
    assert shlex.split(command) == ["pip", "install", "-e", f"{root.resolve()}[torch]"]
    monkeypatch.chdir(root)
    assert install_command("torch") == "pip install -e '.[torch]'"


def test_every_install_hint_in_the_package_comes_from_the_helper() -> None:
    """No message spells a `pip install ...opscope[...]` of its own: it would be wrong for one kind of install."""
    spelled = re.compile(r"pip install (-e )?['\"]?(opscope|\.)\[")
    offenders = [
        str(path.relative_to(SRC))
        for path in (SRC / "opscope").rglob("*.py")
        if path.name != "extras.py" and spelled.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
