"""Start-up imports only what the command uses (issue 10): `import opscope`, `opscope --help`, `opscope formats`
and argument errors of every subcommand import neither polars, pyarrow nor numpy. Each check runs in a fresh
interpreter, since this one has them loaded already."""

from __future__ import annotations

import subprocess
import sys

import pytest

from opscope.cli.main import COMMANDS

HEAVY = ("polars", "pyarrow", "numpy")
CHECK = (
    "import sys\nfrom opscope.cli.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
    "print(sorted(m for m in {heavy!r} if m in sys.modules))"
)


def heavy_modules_after(argv: list[str]) -> str:
    code = CHECK.format(argv=argv, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return done.stdout.strip().splitlines()[-1]


def test_import_opscope_is_light() -> None:
    code = f"import sys, opscope\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("argv", [["--help"], ["formats"], ["nope"], ["--version"]])
def test_help_and_formats_are_light(argv: list[str]) -> None:
    assert heavy_modules_after(argv) == "[]"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_argument_errors_are_light(command: str) -> None:
    assert heavy_modules_after([command, "--no-such-option"]) == "[]"


def test_commands_are_modules_with_the_same_name() -> None:
    from opscope.cli.main import command_module  # `critical-path` lives in opscope.cli.critical_path

    for name in COMMANDS:
        module = command_module(name)
        assert name == module.NAME and callable(module.prepare_parser) and callable(module.run)


def test_warm_json_summary_skips_numpy_rich_and_asyncio(tmp_path) -> None:
    """A cache hit rendered as JSON needs polars and nothing of numpy (the parse path's errstate, step
    windows), rich (terminal tables, the progress bar), asyncio (Dask runs) or the executor (several traces):
    their imports were ~45% of the CPU time of a warm `summary` (docs/ingest.md)."""
    import os

    from conftest import corpus_path

    trace = str(corpus_path("hta/trace_compare_base_base.json.gz"))
    argv = ["summary", trace, "--format", "json", "--top", "0"]
    code = CHECK.format(argv=argv, heavy=("numpy", "rich", "asyncio", "opscope.scale.executor", "polars"))
    env = {**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path)}
    for _run in ("cold", "warm"):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
        )
        assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['polars']"


def test_cold_summary_imports_neither_pandas_nor_pyarrow_compute(tmp_path) -> None:
    """Reading a trace never imports pandas: `pa.array(numpy)` and `Array.to_numpy` would, and the import was
    0.15-0.3 s of a cold `summary` (when pandas is installed, as it is in the test environment); nor
    pyarrow.compute (60-90 ms; `Array.take` and `fill_null` import it), which the metadata rows of every Kineto
    trace reached through the JAX conventions."""
    import os

    from conftest import corpus_path

    trace = str(corpus_path("hta/critical_path_cuda_event_sync_event_sync_trace.json.gz"))
    code = CHECK.format(
        argv=["summary", trace, "--format", "json", "--top", "0"], heavy=("pandas", "pyarrow.compute")
    )
    env = {**os.environ, "OPSCOPE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    ("argv", "preset", "expected"),
    [
        (["formats"], None, "1"),  # opscope's own commands: numpy's OpenBLAS asked for one thread
        (["formats"], "4", "4"),  # the user's setting stands
    ],
)
def test_blas_threads_for_opscope_commands(argv: list[str], preset: str | None, expected: str | None) -> None:
    """numpy's OpenBLAS spins a thread per core after import; opscope does no BLAS, so its own commands ask
    for one thread before numpy loads (measured: ~3% of the CPU of a cold 1 GB `summary`)."""
    import os

    code = (
        f"import os\nfrom opscope.cli.main import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(repr(os.environ.get('OPENBLAS_NUM_THREADS')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.strip().splitlines()[-1] == repr(expected)


@pytest.mark.parametrize("command", ["run", "bench", "demo"])
def test_blas_threads_left_alone_for_user_code(monkeypatch, command: str) -> None:
    """The commands that run the user's script or model leave numpy's BLAS as the user has it."""
    from opscope.cli import main as cli_main

    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "")  # recorded, so that the test's changes are undone
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    monkeypatch.delitem(sys.modules, "numpy", raising=False)
    cli_main._single_threaded_blas(command)
    assert "OPENBLAS_NUM_THREADS" not in __import__("os").environ
    cli_main._single_threaded_blas("summary")
    assert __import__("os").environ["OPENBLAS_NUM_THREADS"] == "1"


def test_version_says_what_a_bug_report_needs() -> None:
    """`opscope --version` (issue 54 item 3): the version, the native core's build (its file, ABI tag, machine and
    the oldest glibc its symbols need), the Python, and the extras installed; on standard output, exit 0."""
    from opscope._version import __version__

    done = subprocess.run(
        [sys.executable, "-m", "opscope", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0] == f"opscope {__version__}"
    assert lines[1].startswith("native core: _native.") and "glibc >= 2." in lines[1]
    assert lines[2].startswith("python: ") and lines[3].startswith("extras: ")
    assert "mcp (mcp " in lines[3]  # the dev install has every extra
