"""`opscope --help` (issue 30, item 6): the commands grouped (read & explain / compare & monitor / capture /
output), each listed once under its group, then a few examples that parse as written. The grouping is data
(`GROUP` in cli/main.py): every command in COMMANDS must have a group."""

from __future__ import annotations

import re
import shlex

import pytest

from opscope.cli.main import COMMANDS, EXAMPLES, GROUP, GROUP_TITLES, build_parser
from opscope.cli.parser import grouped_commands


def test_every_command_has_a_group() -> None:
    missing = sorted(set(COMMANDS) - set(GROUP))
    assert missing == [], f"add these commands to GROUP in src/opscope/cli/main.py: {missing}"
    assert set(GROUP.values()) <= set(GROUP_TITLES)


def _sections(text: str) -> dict[str, list[str]]:
    """Help text -> {section title: the names in its first column}."""
    sections: dict[str, list[str]] = {}
    title = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line[:-1]
            sections[title] = []
        elif title is not None and re.match(r"^  \S", line):
            sections[title].append(re.split(r"\s{2,}", line.strip())[0])
    return sections


@pytest.fixture
def help_text(cli, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "100")
    result = cli("--help")
    assert result.code == 0 and result.err == ""
    return result.out


def test_help_lists_each_command_once_under_its_group(help_text: str) -> None:
    sections = _sections(help_text)
    titles = [title for title in sections if title in GROUP_TITLES.values()]
    assert titles == [GROUP_TITLES[key] for key in GROUP_TITLES if any(GROUP[n] == key for n in COMMANDS)]
    listed = [name for title in titles for name in sections[title]]
    assert sorted(listed) == sorted(COMMANDS)  # each once, none left out
    for name in COMMANDS:
        assert name in sections[GROUP_TITLES[GROUP[name]]]
        assert COMMANDS[name].split()[0] in help_text  # its one-line help is there too


def test_help_ends_with_examples_that_parse(help_text: str) -> None:
    sections = _sections(help_text)
    assert list(sections)[-1] == "examples"
    assert sections["examples"] == [command for command, _ in EXAMPLES]
    for command, _ in EXAMPLES:
        argv = shlex.split(command)[1:]
        if argv[0] == "COMMAND":
            continue
        assert argv[0] in COMMANDS
        build_parser(argv).parse_args(argv)  # argparse exits (SystemExit) on an example that does not parse


def test_help_fits_the_width(help_text: str) -> None:
    assert max(len(line) for line in help_text.splitlines()) <= 100


def test_no_command_prints_the_grouped_help(cli) -> None:
    result = cli()
    assert result.code == 2 and "read & explain a trace:" in result.out and "examples:" in result.out


def test_a_command_without_a_group_is_still_listed() -> None:
    # hand-made: a command added to COMMANDS without a group shows under "other" until it gets one
    text = grouped_commands(
        {"a": "first", "b": "second"}, {"a": "x"}, {"x": "group x"}, [("opscope a", "run a")]
    )
    assert text == "group x:\n  a  first\n\nother:\n  b  second\n\nexamples:\n  opscope a  run a"
