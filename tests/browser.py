"""Headless Chromium for the browser tests: Debian's `chromium` driven by Playwright for Python.

`page_for(path)` opens a report from file://, records console messages, page errors and dialogs (an
`alert()` from injected markup would show up as a dialog), and returns them with the page. Screenshots go
to test-artifacts/ (gitignored). Tests using it are marked `browser` and skip, with the reason, where
Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = os.environ.get("OPSCOPE_CHROMIUM", "/usr/bin/chromium")


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"chromium not found at {CHROMIUM} (apt-get install chromium, or set OPSCOPE_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "playwright for Python is not installed (pip install playwright; no `playwright install` needed)"
        )
    return None


def wait_for(page: Any, expression: str, timeout_s: float = 30.0) -> Any:
    """Poll `expression` with `page.evaluate` until it is truthy, and return its value. Not Playwright's
    `wait_for_function`: its polling evaluates the string with `new Function`, which the report's Content
    Security Policy (no 'unsafe-eval') refuses whenever the condition is not already true."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = page.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout_s:.0f} s: {expression}")
        page.wait_for_timeout(50)


@dataclass
class Opened:
    page: Any
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return [f"console.{t}: {m}" for t, m in self.console if t in ("error", "warning")] + self.errors

    def screenshot(self, name: str, selector: str | None = None) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        target = ARTIFACTS / name
        if selector:
            self.page.locator(selector).screenshot(path=str(target))
        else:
            self.page.screenshot(path=str(target), full_page=True)
        return target


# One browser per test session, however many test modules import the fixture: each module that imports it
# registers its own session fixture, and a second sync_playwright() in the same thread fails. The users are
# counted; the last one to finish closes the browser.
_SHARED: dict[str, Any] = {"users": 0}


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    if _SHARED["users"] == 0:
        pw = sync_playwright().start()
        _SHARED["pw"] = pw
        _SHARED["browser"] = pw.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
    _SHARED["users"] += 1
    try:
        yield _SHARED["browser"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            _SHARED.pop("browser").close()
            _SHARED.pop("pw").stop()


@pytest.fixture
def open_report(chromium: Any) -> Iterator[Any]:
    contexts = []

    def opener(path: Path, width: int = 1400, height: int = 1000) -> Opened:
        context = chromium.new_context(viewport={"width": width, "height": height}, offline=True)
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page)
        page.on("console", lambda m: opened.console.append((m.type, m.text)))
        page.on("pageerror", lambda e: opened.errors.append(str(e)))

        def on_dialog(dialog: Any) -> None:
            opened.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.goto(Path(path).resolve().as_uri())
        page.wait_for_load_state("load")
        return opened

    yield opener
    for context in contexts:
        context.close()
