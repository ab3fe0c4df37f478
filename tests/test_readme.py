"""The README is a newcomer's page: short, free of maintainers' labels, and every command, Python name and link in
it works. Each command shown is parsed by the real CLI parser (the subcommand exists, its flags exist and take
the values shown); every relative link in the README and in docs/ resolves to a file and, with a #fragment, to a
heading of that file."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

import opscope
from opscope.cli.main import build_parser

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _blocks(text: str, *languages: str) -> list[str]:
    return [body for language, body in FENCE.findall(text) if language in languages]


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _commands(text: str) -> list[list[str]]:
    """Every `opscope ...` invocation in the README's shell blocks and in the `$ opscope ...` lines of its output
    blocks, as argv (comments dropped; a line continued with a backslash joined)."""
    found = []
    shell = _blocks(text, "bash", "sh")
    output = [
        "\n".join(line[2:] for line in body.splitlines() if line.startswith("$ "))
        for body in _blocks(text, "")
    ]
    for body in shell + output:
        for line in body.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:1] == ["opscope"]:
                    found.append(words[1:])
    return found


def test_the_readme_is_short() -> None:
    lines = _readme().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines (at most 300: the rest belongs in docs/)"


@pytest.mark.parametrize(
    ("what", "pattern"),
    [
        ("an issue number", r"\bissues? #?\d+|(?<![\w/])#\d+\b"),
        ("a dated run label", r"\b20\d\d-\d\d-\d\d\b|\bsession \d+"),
        ("a machine path", r"(?<![\w.])/(?:work|home|root|tmp|mnt|Users)/|\.\./shared\b"),
    ],
)
def test_the_readme_names_nothing_only_maintainers_know(what: str, pattern: str) -> None:
    hits = [line for line in _readme().splitlines() if re.search(pattern, line)]
    assert not hits, f"README.md names {what}: {hits}"


def test_every_command_the_readme_shows_parses_with_the_cli() -> None:
    commands = _commands(_readme())
    shown = {argv[0] for argv in commands if argv}
    assert {"brief", "advise", "report", "diff", "demo"} <= shown, shown
    for argv in commands:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse: an unknown command or flag, a missing or bad value
            pytest.fail(f"README command does not parse (exit {exc.code}): opscope {shlex.join(argv)}")
        assert args._command == argv[0], argv  # `args.command` is the script of `run`


def test_the_readme_python_is_valid_and_names_real_functions() -> None:
    blocks = _blocks(_readme(), "python")
    assert blocks
    for body in blocks:
        tree = ast.parse(body)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "opscope"
            ):
                assert hasattr(opscope, node.attr), f"README uses opscope.{node.attr}, which does not exist"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        slug, n = _slug(heading), 1
        while slug in anchors:  # GitHub numbers repeated headings: slug, slug-1, slug-2
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    return anchors


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target} (no heading #{fragment})")
    assert not broken, f"{page.relative_to(REPO)}: broken links: {broken}"


def test_the_readme_links_every_docs_page() -> None:
    linked = {Path(target.partition("#")[0]).name for target in LINK.findall(_readme())}
    missing = [page.name for page in DOCS if page.name not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"
