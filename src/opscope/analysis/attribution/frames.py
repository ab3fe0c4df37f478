"""Python frames of `with_stack` traces: a frame's name split into file, line and function, and whether the code
is the user's or a framework's.

PyTorch names a frame `file(line): function`, with the file shortened by the entries of `sys.path`
(`torch/nn/modules/module.py(1743): _call_impl`, `threading.py(1032): _bootstrap`, a script beside the
program as `train.py(12): main`); C functions are `<built-in method ...>` and module markers
`nn.Module: Linear_0`. Framework frames fall in four groups, each skipped by default and kept with `--keep`:
torch (the torch package and its `nn.Module:` markers), stdlib (the Python standard library, frozen modules
and code compiled from strings such as dataclass methods), builtins (C functions) and compiled (Inductor's
runtime and generated code, Triton, FX-generated code). `--skip-prefix` skips more. Everything else is the
user's code. The names of a trace are classified once each (categorical), never per event. Definitions:
docs/analysis-attribution.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import polars as pl

from opscope.analysis.attribution import FRAME_GROUPS

TORCH, STDLIB, BUILTINS, COMPILED = FRAME_GROUPS
GROUPS: tuple[str, ...] = FRAME_GROUPS
# What each group skips, as it is listed in `opscope lines`' JSON (`skip_prefixes`) and documented.
GROUP_PREFIXES: dict[str, tuple[str, ...]] = {
    TORCH: ("torch/", "nn.Module: "),
    STDLIB: ("<python standard library>", "<frozen ", "<string>"),
    BUILTINS: ("<built-in ",),
    COMPILED: ("torch/_inductor/", "triton/", "<torchinductor_ generated code>", "<eval_with_key>"),
}
FRAME = r"^(.*)\((\d+)\): (.*)$"  # file(line): function
MODULE_MARK = "nn.Module: "
PACKAGES = r"^.*(?:site|dist)-packages/"  # an unshortened path of an installed package
STDLIB_PATH = r"(?:^|/)lib/python\d+(?:\.\d+)?/"  # an unshortened path into the standard library
COMPILED_PATH = r"^torch/_inductor/|torchinductor_|(?:^|/)triton/|^<eval_with_key>"


@dataclass(frozen=True)
class FrameFilter:
    """Which frames count as the user's: the framework groups kept (`--keep`) and more prefixes skipped
    (`--skip-prefix`, compared with the file as written and as shortened past `site-packages/`, and with
    the whole name)."""

    keep: tuple[str, ...] = ()
    skip_prefixes: tuple[str, ...] = ()

    def skipped(self) -> list[str]:
        """The skipped groups' prefixes, then the user's own (as `opscope lines` reports them)."""
        return [p for g in GROUPS if g not in self.keep for p in GROUP_PREFIXES[g]] + list(self.skip_prefixes)


def framework_group() -> pl.Expr:
    """The framework group of the frame named `name` (a String column), null for the user's code."""
    name = pl.col("name")
    file = name.str.extract(FRAME, 1)
    short = file.str.replace(PACKAGES, "")
    top = short.str.extract(r"^([^/<]+)", 1).str.replace(r"\.py$", "")
    stdlib = (
        file.str.contains(STDLIB_PATH) & ~file.str.contains(PACKAGES)
        | file.str.starts_with("<frozen ")
        | (file == "<string>")
        | top.is_in(sorted(sys.stdlib_module_names))
    )
    return (
        pl.when(name.str.starts_with("<built-in "))
        .then(pl.lit(BUILTINS))
        .when(short.str.contains(COMPILED_PATH))
        .then(pl.lit(COMPILED))
        .when(name.str.starts_with(MODULE_MARK) | (top == "torch"))
        .then(pl.lit(TORCH))
        .when(stdlib.fill_null(False))
        .then(pl.lit(STDLIB))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def classify(names: pl.Series, frames: FrameFilter | None = None) -> pl.DataFrame:
    """One row per distinct frame name: name, file, line, function (null where the name is not `file(line):
    function`; then the function is the whole name), group (null: the user's code) and `kept` (the user's
    code under `frames`)."""
    opts = frames or FrameFilter()
    distinct = pl.DataFrame({"name": names.cast(pl.String).drop_nulls().unique().sort()})
    file = pl.col("name").str.extract(FRAME, 1)
    out = distinct.with_columns(
        file.alias("file"),
        pl.col("name").str.extract(FRAME, 2).cast(pl.Int64).alias("line"),
        pl.coalesce(pl.col("name").str.extract(FRAME, 3), pl.col("name")).alias("function"),
        framework_group().alias("group"),
    )
    kept = pl.col("group").is_null() | pl.col("group").is_in(list(opts.keep))
    for prefix in opts.skip_prefixes:
        short = pl.col("file").str.replace(PACKAGES, "")
        hit = (
            pl.col("file").str.starts_with(prefix).fill_null(False)
            | short.str.starts_with(prefix).fill_null(False)
            | pl.col("name").str.starts_with(prefix)
        )
        kept = kept & ~hit
    return out.with_columns(kept.alias("kept"))


def user_frame_names(names: pl.Series, frames: FrameFilter | None = None) -> pl.Series:
    """The distinct names among `names` that are the user's code under `frames` (as a String series)."""
    table = classify(names, frames)
    return table.filter(pl.col("kept"))["name"]
