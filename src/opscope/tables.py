"""One small protocol for every result in a notebook: `.to_polars()`, `.to_pandas()` and `_repr_html_`.

A result class mixes in `Tabular` and says what its main table is (`_table_rows`: one flat dict per row, or an
override of `to_polars` when the table already is a frame). Jupyter then shows a compact table (the first
`REPR_ROWS` rows, numbers with thousands separators, every text escaped), never the dataclass repr, and the
same rows reach polars or pandas for further work. pandas is optional: without it `to_pandas()` raises
`MissingDependency` with the install hint, as the capture API does without torch."""

from __future__ import annotations

import html
import importlib
from typing import TYPE_CHECKING, Any

from opscope.errors import MissingDependency
from opscope.extras import install_command

if TYPE_CHECKING:
    import polars as pl

REPR_ROWS = 20
REPR_CELL = 80  # characters of a cell in the notebook view (the frames keep the whole value)


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

    def to_polars(self) -> pl.DataFrame:
        """The result's main table as a polars DataFrame (one row per row of the CLI table, all rows)."""
        import polars as pl

        rows = self._table_rows()
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()

    def to_pandas(self) -> Any:
        """`to_polars()` as a pandas DataFrame (needs pandas: the `pandas` extra)."""
        return polars_to_pandas(self.to_polars())

    def _repr_html_(self) -> str:
        return html_table(self.to_polars(), self._table_title())


def dataclass_rows(items: Any) -> list[dict[str, Any]]:
    """Flat dataclass rows as dicts (tuples become lists)."""
    import dataclasses

    return [
        {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(item).items()}
        for item in items
    ]


__all__ = ["Tabular", "dataclass_rows", "html_table", "polars_to_pandas", "require_pandas"]
