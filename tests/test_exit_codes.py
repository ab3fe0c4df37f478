"""Broken environments and bad input end with one line on standard error and exit 2, and every failure of
`opscope.load` is an `OpscopeError` (issue 14): unreadable folders, a full standard output, bad options, an
empty path, traces nested too deeply, out-of-range numbers (no numpy RuntimeWarning), odd file names."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import opscope
from conftest import REPO, corpus_path
from handmade_traces import document, kernel, write
from opscope.cli.parser import OneLineParser
from opscope.errors import InputError, OpscopeError

REAL = "hta/trace_compare_base_base.json.gz"


def one_line_error(result, code: int = 2) -> None:
    assert result.code == code, result
    assert result.err.startswith("opscope") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and result.out == "", result


def unreadable(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `folder` unlistable: chmod where that binds (not as root), else make listing it fail the same way."""
    if os.geteuid() != 0:
        folder.chmod(0)
        return
    listing = pathlib.Path.iterdir

    def denied(self: Path):  # type: ignore[no-untyped-def]
        if self == folder:
            raise PermissionError(13, "Permission denied", str(self))
        return listing(self)

    monkeypatch.setattr(pathlib.Path, "iterdir", denied)


def test_unreadable_folder(cli, tmp_path, monkeypatch) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(corpus_path(REAL), folder / "t.json.gz")
    unreadable(folder, monkeypatch)
    try:
        for command in (
            ("summary", folder),
            ("report", folder, "-o", tmp_path / "r.html"),
            ("ranks", folder),
            ("diff", folder, folder),
        ):
            result = cli(*command)
            one_line_error(result)
            assert "Permission denied" in result.err, result.err
        with pytest.raises(InputError, match="Permission denied"):
            opscope.load(folder)
    finally:
        folder.chmod(0o755)


def test_bad_paths_are_input_errors(cli, tmp_path) -> None:
    too_long = tmp_path / ("a" * 300)  # ENAMETOOLONG: not "no such file", an OSError of its own
    one_line_error(cli("summary", too_long))
    with pytest.raises(InputError):
        opscope.load(too_long)
    deep = tmp_path / "deep.json"  # HAND-MADE: args nested 100,000 deep
    deep.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": '
        + '{"a": ' * 100_000
        + "1"
        + "}" * 100_000
        + "}]}"
    )
    # The readers skip the one event nested too deeply (issue 10) and say so; --strict makes it an error.
    assert opscope.load(deep, cache=False).meta.warnings == (
        f"{deep}: skipped 1 events: nested deeper than 64 levels",
    )
    with pytest.raises(InputError, match="nested deeper than 64 levels"):
        opscope.load(deep, cache=False, strict=True)
    one_line_error(cli("summary", deep, "--no-cache", "--strict"))


def test_reader_surprises_are_input_errors(tmp_path, monkeypatch) -> None:
    import polars as pl

    from opscope import loading

    path = write(tmp_path / "t.json", document([kernel("k", 10, 5, 1)]))  # hand-made
    for raised in (
        pl.exceptions.ComputeError("bad\nthing"),
        KeyError("x"),
        AssertionError(),
        PermissionError(13, "no"),
    ):

        def fail(*args, error=raised, **kwargs):  # type: ignore[no-untyped-def]
            raise error

        monkeypatch.setattr(loading, "_ingest_load", fail)
        with pytest.raises(InputError) as caught:
            opscope.load(path)
        assert "\n" not in str(caught.value), str(caught.value)
    monkeypatch.setattr(loading, "_ingest_load", lambda *a, **k: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(MemoryError):
        opscope.load(path)


def test_load_of_an_empty_path_is_an_error(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copyfile(corpus_path(REAL), folder / "t.json.gz")
    monkeypatch.setenv("PROFILER_LOG_DIR", str(folder))
    assert opscope.load(None).meta.path.endswith("t.json.gz")  # None: the default folder, on purpose
    with pytest.raises(InputError, match="empty trace path"):
        opscope.load("")


def test_odd_file_names_and_cache_folders_load_or_fail_typed(tmp_path, monkeypatch) -> None:
    """Whatever the cache does with them (its own issue), `load` never raises anything but OpscopeError."""
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.json"))  # not UTF-8
    write(odd, document([kernel("k", 10, 5, 1)]))
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    for cache_dir in (None, blocker):
        if cache_dir is not None:
            monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(cache_dir))
        for path in (odd, corpus_path(REAL)):
            try:
                trace = opscope.load(path)
            except OpscopeError:
                continue
            assert len(trace.events) > 0


def test_out_of_range_times_raise_no_runtime_warning(cli, tmp_path) -> None:
    path = write(
        tmp_path / "huge.json",  # HAND-MADE: times far beyond 64-bit nanoseconds
        document([kernel("huge", 1e300, 1e300, 1), kernel("k", 10, 5, 2), kernel("k2", 1e20, 5, 3)]),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        opscope.load(path, cache=False)
        for command in ("summary", "analyze", "steps", "tree", "ops"):
            assert cli(command, path, "--no-cache").code == 0, command


def test_width_out_of_range(cli) -> None:
    for width in ("-5", "0", "3"):
        result = cli("summary", corpus_path(REAL), "--width", width)
        one_line_error(result)
        assert "--width" in result.err


def test_stdout_on_a_full_device() -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from opscope.cli.main import main; sys.exit(main(sys.argv[1:]))",
                "summary",
                str(corpus_path(REAL)),
                "--no-cache",
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "opscope: error: cannot write to standard output: No space left on device\n"


def test_one_line_parser(capsys) -> None:
    parser = OneLineParser(prog="opscope")
    sub = parser.add_subparsers(dest="command")
    child = sub.add_parser("summary")
    child.add_argument("--top", type=int)
    assert type(child) is OneLineParser
    for argv, message in (
        (["summary", "--top", "x"], "opscope summary: error: argument --top: invalid int value"),
        (["summary", "--bogus\x1b[2J"], "opscope: error: unrecognized arguments: --bogus\\x1b[2J"),
        (["nope"], "opscope: error: argument command: invalid choice"),
    ):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            parser.parse_args(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith(message) and err.count("\n") == 1, err


def test_cli_option_errors_are_one_line(cli) -> None:
    for argv in (("summary", "--top", "x"), ("summary", "--bogus"), ("nope",), ("diff", "a")):
        one_line_error(cli(*argv))


def test_files_on_a_full_device(cli) -> None:
    """Every writer: a full device is one line, exit 2 (a trimmed trace failed with exit 3)."""
    trace = corpus_path(REAL)
    for command in (
        ("summary", trace, "-o", "/dev/full"),
        ("report", trace, "-o", "/dev/full"),
        ("export", trace, "--folded", "-o", "/dev/full"),
        ("export", trace, "-o", "/dev/full"),
        ("diff", trace, trace, "--html", "/dev/full"),
    ):
        result = cli(*command)
        *warnings, last = result.err.splitlines()
        assert (
            result.code == 2 and last == "opscope: error: /dev/full: cannot write: No space left on device"
        ), (
            command,
            result.err,
        )
        # `export` says what the validity checks found on standard error (its outputs have no place for it)
        assert all(w.startswith("opscope: warning: WARN ") for w in warnings), result.err


def test_an_unknown_option_points_at_the_subcommands_help(cli) -> None:
    # issue 30: argparse reports a subcommand's unknown option from the top-level parser, which said
    # "(see opscope --help)", a page that does not list the subcommand's options
    result = cli("summary", "--bogus")
    assert result.code == 2 and result.err.strip().endswith("(see opscope summary --help)")
    assert cli("--bogus").err.strip().endswith("(see opscope --help)")


def test_every_written_file_is_named_on_standard_error(cli, tmp_path) -> None:
    # issue 30: `report T` named its page on standard output, `report T -o F` and `diff --html F` said nothing
    from conftest import corpus_path

    trace = corpus_path("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    page, html, table, stacks = (tmp_path / n for n in ("r.html", "d.html", "s.json", "f.txt"))
    for argv, target in (
        (("report", trace, "-o", page), page),
        (("diff", trace, trace, "--html", html), html),
        (("summary", trace, "--format", "json", "-o", table), table),
        (("export", trace, "--folded", "-o", stacks), stacks),
    ):
        result = cli(*argv)
        assert result.code == 0, result.err
        assert f"opscope: wrote {target}" in result.err and target.exists()
    assert "opscope: wrote" not in cli("-q", "summary", trace, "-o", table).err  # -q: quiet
