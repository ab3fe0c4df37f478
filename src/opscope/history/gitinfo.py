"""The git commit, branch and dirty flag of the current folder, added as tags to every run (when in a checkout)."""

from __future__ import annotations

import subprocess


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_tags() -> dict[str, str]:
    """{"commit", "branch", "dirty"} of the checkout around the current folder; {} outside one (or without git)."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return {}
    tags = {"commit": commit}
    branch = _git("rev-parse", "--abbrev-ref", "HEAD")
    if branch and branch != "HEAD":
        tags["branch"] = branch
    status = _git("status", "--porcelain", "--untracked-files=no")
    if status is not None:
        tags["dirty"] = "true" if status else "false"
    return tags
