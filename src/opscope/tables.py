"""One small protocol for every result in a notebook: `.to_polars()`, `.to_pandas()`, `_repr_html_` and `str()`.

A result class mixes in `Tabular` and says what its main table is (`_table_rows`: one flat dict per row, or an
override of `_frame` when the table already is a frame). Jupyter then shows a compact table (the first
`REPR_ROWS` rows, numbers with thousands separators, every text escaped), never the dataclass repr, and the
same rows reach polars or pandas for further work, their text columns as `pl.String` (the event table's
Categorical columns are cast at this boundary, so `.str` methods work). `str(result)` (and `print`) is the
command's terminal table at `TEXT_WIDTH` columns: the renderers live in `report/`, above the analyses, so the
top-level API hands this module the function that renders (`set_text_renderer`), as it wires the capture
summary. pandas is optional: without it `to_pandas()` raises `MissingDependency` with the install hint, as the
capture API does without torch."""

from __future__ import annotations

import html
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opscope.errors import MissingDependency
from opscope.extras import install_command

if TYPE_CHECKING:
    import polars as pl

REPR_ROWS = 20
REPR_CELL = 80  # characters of a cell in the notebook view (the frames keep the whole value)
TEXT_WIDTH = 100  # columns of `str(result)`: the CLI's width when not on a terminal

_text_renderer: Callable[[object], str | None] | None = None


def set_text_renderer(render: Callable[[object], str | None]) -> None:
    """The function `str(result)` calls: the command's terminal table of `result`, or None for a result no
    command prints (set by the top-level API, which sits above the report renderers)."""
    global _text_renderer
    _text_renderer = render


def string_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its Categorical / Enum columns as pl.String: text at the API boundary is plain strings."""
    import polars as pl

    cast = [name for name, dtype in frame.schema.items() if isinstance(dtype, (pl.Categorical, pl.Enum))]
    return frame.with_columns(pl.col(cast).cast(pl.String)) if cast else frame


def require_pandas() -> Any:
    """The pandas module, or a `MissingDependency` with the install hint."""
    try:
        return importlib.import_module("pandas")
    except ImportError:
        raise MissingDependency(
            f"pandas is not installed: {install_command('pandas')} (or use .to_polars())"
        ) from None


def polars_to_pandas(frame: pl.DataFrame) -> Any:
    """`frame` as a pandas DataFrame (the friendly hint when pandas is missing)."""
    require_pandas()
    return frame.to_pandas()


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e15 else f"{value:.3e}"
    text = str(value)
    return text if len(text) <= REPR_CELL else text[: REPR_CELL - 1] + "…"


def html_table(frame: pl.DataFrame, title: str, rows: int = REPR_ROWS) -> str:
    """A compact HTML table of the first `rows` rows of `frame`; every cell and header is escaped."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for record in frame.head(rows).iter_rows():
        cells = "".join(
            f'<td style="text-align:{"right" if isinstance(v, (int, float)) else "left"}">{html.escape(_cell(v))}</td>'
            for v in record
        )
        body.append(f"<tr>{cells}</tr>")
    more = frame.height - min(rows, frame.height)
    shape = f"{frame.height:,} rows x {frame.width} columns"
    note = f"<p><small>{more:,} more rows: .to_polars() / .to_pandas() for all</small></p>" if more else ""
    return (
        f"<div><b>{html.escape(title)}</b> <small>({shape})</small>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}</div>"
    )


class Tabular:
    """Mixin of the notebook protocol; see the module doc."""

    def _table_rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _table_title(self) -> str:
        path = getattr(self, "path", None)
        return f"{type(self).__name__}: {path}" if path else type(self).__name__

    def _frame(self) -> pl.DataFrame:
        import polars as pl

        rows = self._table_rows()
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()

    def to_polars(self) -> pl.DataFrame:
        """The result's main table as a polars DataFrame (one row per row of the CLI table, all rows); text
        columns are pl.String."""
        return string_columns(self._frame())

    def to_pandas(self) -> Any:
        """`to_polars()` as a pandas DataFrame (needs pandas: the `pandas` extra)."""
        return polars_to_pandas(self.to_polars())

    def _repr_html_(self) -> str:
        return html_table(self.to_polars(), self._table_title())

    def __str__(self) -> str:
        """The command's terminal table (what `opscope <command>` prints, at TEXT_WIDTH columns, no colour)."""
        text = _text_renderer(self) if _text_renderer is not None else None
        if text is not None:
            return text
        return f"{self._table_title()}\n{self.to_polars()}"


def dataclass_rows(items: Any) -> list[dict[str, Any]]:
    """Flat dataclass rows as dicts (tuples become lists)."""
    import dataclasses

    return [
        {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(item).items()}
        for item in items
    ]


__all__ = [
    "TEXT_WIDTH",
    "Tabular",
    "dataclass_rows",
    "html_table",
    "polars_to_pandas",
    "require_pandas",
    "set_text_renderer",
    "string_columns",
]
