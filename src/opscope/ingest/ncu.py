"""Nsight Compute CSV reader: every layout of `ncu --csv` into one `NcuMetrics`.

Two layouts, told apart by their header:
- `--page raw` (wide): one row per launch, one column per metric id (`sm__throughput.avg.pct_of_peak_...`),
  usually with a second row of units (its ID cell empty);
- `--page details` (long, ncu's default): one row per (launch, section, metric) with `Section Name`,
  `Metric Name` (a display name such as "Compute (SM) Throughput", or a metric id for `--metrics`), `Metric
  Unit`, `Metric Value`, and rows of ncu's rule results (`Rule Name`, `Rule Type`, `Rule Description`, from
  2023.2 on `Estimated Speedup Type` / `Estimated Speedup`).
Old and new column sets are both read: `Kernel Time` (up to 2023.1; a wall-clock date, never a duration),
`Block Size`, `Grid Size`, `Device`, `CC` (from 2023.2) are used when present. Display names map to metric ids
through the table in opscope/data/ncu_metrics.json (`ingest.ncu_table`); values lose their thousands
separators and are converted to base units (ns, bytes, per second). Lines before the header (the program's
output, `==PROF==` lines) are skipped. The file is read by polars as text columns and shaped with vectorised
expressions: a full-set export of thousands of launches has millions of rows.

What cannot be used is skipped and said in `NcuMetrics.warnings`: rows whose ID is not a number (a repeated
header of concatenated exports), an ID that names two kernels, repeated metrics with different values, values
that are not finite numbers.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import polars as pl

from opscope.errors import InputError
from opscope.ingest.ncu_table import metric_table
from opscope.ingest.source import ChunkReader, is_gzip
from opscope.model.ncu import (
    BLOCK,
    DEVICE,
    FIELDS,
    GRID,
    ID,
    KERNEL,
    LAUNCH_SCHEMA,
    MESSAGE,
    METRIC,
    RULE,
    RULE_SCHEMA,
    RULE_TYPE,
    SECTION,
    SPEEDUP,
    SPEEDUP_TYPE,
    STREAM,
    UNIT,
    VALUE,
    VALUE_SCHEMA,
    NcuMetrics,
)
from opscope.untrusted import visible

# Columns that describe a launch rather than measure it (every column set ncu has written).
IDENTITY = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)
_HEADER = re.compile(rb'^(?:\xef\xbb\xbf)?[ \t]*(?:"ID"|ID)[ \t]*,', re.MULTILINE)  # a UTF-8 BOM may lead
_RAW = "raw_value"
DEVICE_NAME = "device__attribute_display_name"
MAX_CSV_BYTES = 2 << 30  # decompressed; a gzip bomb ends here, not in an out-of-memory kill


def read_ncu_csv(path: Path, display: str | None = None) -> NcuMetrics:
    """Parse an ncu CSV export (raw or details page, any column set) into per-launch metrics."""
    display = display or str(path)
    warnings: list[str] = []
    frame = _read_frame(path, display, warnings)
    missing = [c for c in ("ID", "Kernel Name") if c not in frame.columns]
    if missing:
        raise InputError(f"{display}: Nsight Compute CSV without the {', '.join(missing)} column")
    details = "Metric Name" in frame.columns and "Metric Value" in frame.columns
    units: dict[str, str] = {}
    if not details and frame.height and not frame["ID"][0].strip():  # the raw page's units row
        units = {c: frame[c][0] for c in frame.columns}
        frame = frame.slice(1)
    frame = _launch_rows(frame.with_columns(_as_int(pl.col("ID")).alias(ID)), details, warnings)
    if frame.height == 0:
        raise InputError(f"{display}: Nsight Compute CSV with no profiled launches")
    long = _details_long(frame) if details else _raw_long(frame, units)
    values = _numeric(long, warnings)
    return NcuMetrics(
        path=str(path),
        layout="details" if details else "raw",
        launches=_launches(frame, values),
        values=values,
        rules=_rules(frame) if details else pl.DataFrame(schema=RULE_SCHEMA),
        device=_device_name(long, frame),
        warnings=tuple(warnings),
    )


def _read_bytes(path: Path, display: str, warnings: list[str]) -> bytes:
    """The file's bytes; a gzip-compressed export (`.csv.gz`) decompressed, at most `MAX_CSV_BYTES` of it, and
    what a damaged stream held up to the damage, with a warning."""
    if not is_gzip(path):
        return path.read_bytes()
    reader = ChunkReader(path, report_progress=False)
    parts: list[bytes] = []
    for chunk in reader:
        parts.append(chunk)
        if reader.bytes_read > MAX_CSV_BYTES:
            raise InputError(
                f"{display}: decompresses to more than {MAX_CSV_BYTES >> 20:,} MiB; not an Nsight Compute CSV "
                "export of a size opscope reads"
            )
    data = b"".join(parts)
    if reader.problem:
        data = data[: data.rfind(b"\n") + 1]  # the last whole line: a row cut in two is not a row
        lines = data.count(b"\n")
        warnings.append(
            f"{display}: gzip stream {reader.problem.replace('_', ' ')} after {reader.bytes_read:,} bytes; "
            f"read the {lines:,} whole lines before it"
        )
    return data


def _read_frame(path: Path, display: str, warnings: list[str]) -> pl.DataFrame:
    """The CSV from its header line on, every column as text (missing cells as ""). Bytes that are not UTF-8
    are replaced, not fatal."""
    try:
        raw = _read_bytes(path, display, warnings)
    except OSError as exc:
        raise InputError(f"{display}: cannot read: {exc.strerror or exc}") from None
    found = _HEADER.search(raw)
    if found is None:
        raise InputError(
            f'{display}: not an Nsight Compute CSV (no \'"ID","Process ID",...\' header; '
            "export with `ncu --csv --page details` or `--page raw`)"
        )
    end = raw.find(b"\n", found.start())
    first_line = (
        raw[found.start() : end if end >= 0 else len(raw)].decode("utf-8", errors="replace").lstrip("\ufeff")
    )
    header = next(csv.reader([first_line.rstrip("\r")]), [])
    try:  # from the header line on; the lines before it are skipped unparsed
        frame = pl.read_csv(
            raw,
            skip_lines=raw.count(b"\n", 0, found.start()),
            infer_schema=False,
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
        )
    except (pl.exceptions.PolarsError, ValueError) as exc:
        reason = "unbalanced quotes or a cut-off file" if "invalid csv" in str(exc) else type(exc).__name__
        raise InputError(f"{display}: malformed Nsight Compute CSV ({reason})") from None
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:  # polars names the later copies NAME_duplicated_K: keep the first of each
        warnings.append(f"columns named twice, the first kept: {', '.join(visible(r) for r in repeated[:5])}")
        frame = frame.select(frame.columns[: len(header)]).select(
            [c for c, name in zip(frame.columns, header, strict=False) if c == name]
        )
    return frame.with_columns(pl.all().fill_null(""))


def _as_int(expr: pl.Expr) -> pl.Expr:
    """ "1,024" -> 1024; anything that is not a whole number fitting 64 bits -> null."""
    return expr.str.strip_chars().str.replace_all(",", "", literal=True).cast(pl.Int64, strict=False)


def _as_float(expr: pl.Expr) -> pl.Expr:
    """ "8,382.70" -> 8382.7; text ("n/a", "(256, 1, 1)", "=1+2") -> null."""
    return expr.str.strip_chars().str.replace_all(",", "", literal=True).cast(pl.Float64, strict=False)


def _launch_rows(frame: pl.DataFrame, details: bool, warnings: list[str]) -> pl.DataFrame:
    """The rows that belong to a launch: a numeric ID (others, such as the repeated header of concatenated
    exports, are counted), one kernel per ID (rows giving an ID a second kernel are dropped), and in the raw
    page one row per ID (a repeated ID keeps its first row)."""
    bad = frame.filter(pl.col(ID).is_null()).height
    if bad:
        warnings.append(
            f"skipped {bad:,} rows whose ID is not a launch number (a repeated header of concatenated "
            "exports, or edited text)"
        )
    frame = frame.filter(pl.col(ID).is_not_null())
    first = pl.col("Kernel Name").first().over(ID)
    clash = frame.filter(pl.col("Kernel Name") != first)
    if clash.height:
        warnings.append(
            f"launch ID {_some(clash[ID].unique().sort().to_list())} names more than one kernel (concatenated "
            f"exports?): kept the first kernel's rows, skipped {clash.height:,}"
        )
        frame = frame.filter(pl.col("Kernel Name") == first)
    if not details:
        repeated = frame.filter(pl.col(ID).is_duplicated())
        if repeated.height:
            warnings.append(
                f"launch ID {_some(repeated[ID].unique().sort().to_list())} appears on more than one row: "
                "kept the first"
            )
            frame = frame.unique(ID, keep="first", maintain_order=True)
    return frame


def _some(items: list[int]) -> str:
    return ", ".join(str(i) for i in items[:5]) + (" ..." if len(items) > 5 else "")


def _details_long(frame: pl.DataFrame) -> pl.DataFrame:
    """ID, metric key, unit as written and value as written, of the details page's metric rows. The key of
    each distinct (section, name, unit) is looked up once in the metric table."""
    section = pl.col("Section Name") if "Section Name" in frame.columns else pl.lit("")
    unit = pl.col("Metric Unit") if "Metric Unit" in frame.columns else pl.lit("")
    rows = frame.filter(pl.col("Metric Name").str.strip_chars() != "").select(
        ID,
        section.alias("_section"),
        pl.col("Metric Name").alias("_name"),
        unit.alias(UNIT),
        pl.col("Metric Value").alias(_RAW),
    )
    table = metric_table()
    keys = rows.select("_section", "_name", UNIT).unique()
    keys = keys.with_columns(
        pl.Series(METRIC, [table.metric_of(n, u, s) for s, n, u in keys.iter_rows()], dtype=pl.String)
    )
    return rows.join(keys, on=["_section", "_name", UNIT], how="left", maintain_order="left").select(
        ID, METRIC, UNIT, _RAW
    )


def _raw_long(frame: pl.DataFrame, units: dict[str, str]) -> pl.DataFrame:
    """The raw page unpivoted to the details page's shape: one row per (launch, metric column)."""
    table = metric_table()
    columns = [c for c in frame.columns if c not in IDENTITY and c != ID]
    if not columns:
        return pl.DataFrame(schema={ID: pl.Int64, METRIC: pl.String, UNIT: pl.String, _RAW: pl.String})
    keys = {c: table.metric_of(c, units.get(c, ""), "") for c in columns}
    return (
        frame.unpivot(on=columns, index=ID, variable_name="_column", value_name=_RAW)
        .with_columns(
            pl.col("_column").replace_strict(keys, return_dtype=pl.String).alias(METRIC),
            pl.col("_column").replace_strict(units, default="", return_dtype=pl.String).alias(UNIT),
        )
        .select(ID, METRIC, UNIT, _RAW)
    )


def _numeric(long: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """The numeric values in base units (`VALUE_SCHEMA`), one per (launch, metric). Text values are left out
    (they are not measurements); non-finite ones are counted; a metric repeated with another value keeps
    its first."""
    table = metric_table()
    units = long.select(UNIT).unique()
    conversions = [table.convert(u) for u in units[UNIT].to_list()]
    units = units.with_columns(
        pl.Series("_factor", [c[0] for c in conversions], dtype=pl.Float64),
        pl.Series("_base", [c[1] for c in conversions], dtype=pl.String),
    )
    numbers = (
        long.with_columns(_as_float(pl.col(_RAW)).alias("_number"))
        .filter(pl.col("_number").is_not_null())
        .join(units, on=UNIT, how="left", maintain_order="left")
        .select(ID, METRIC, pl.col("_base").alias(UNIT), (pl.col("_number") * pl.col("_factor")).alias(VALUE))
    )
    finite = numbers.filter(pl.col(VALUE).is_finite())
    if finite.height < numbers.height:
        warnings.append(
            f"skipped {numbers.height - finite.height:,} metric values that are not finite numbers (nan, inf, "
            "or beyond 1.8e308 in base units)"
        )
    distinct = finite.unique([ID, METRIC, VALUE], keep="first", maintain_order=True)
    values = distinct.unique([ID, METRIC], keep="first", maintain_order=True)
    if values.height < distinct.height:
        warnings.append(
            f"{distinct.height - values.height:,} metrics appear twice for the same launch with different "
            "values: kept the first"
        )
    return values.cast(VALUE_SCHEMA)  # type: ignore[arg-type]


def _dims(column: str, frame: pl.DataFrame) -> pl.Expr:
    """ "(256, 1, 1)" -> "256,1,1", "(1,024, 1, 1)" -> "1024,1,1" (a thousands separator has no space after
    it); null when the column is absent or holds no numbers."""
    if column not in frame.columns:
        return pl.lit(None, dtype=pl.String)
    numbers = pl.col(column).str.extract_all(r"\d{1,3}(?:,\d{3})+|\d+")
    joined = numbers.list.eval(pl.element().str.replace_all(",", "", literal=True)).list.join(",")
    return pl.when(joined != "").then(joined)


def _launches(frame: pl.DataFrame, values: pl.DataFrame) -> pl.DataFrame:
    """One row per launch (`LAUNCH_SCHEMA`): identity from its first row; each field from the first of its
    metric ids that the launch has; block and grid size from the `Block Size` / `Grid Size` columns when
    the launch__ metrics are not in the export."""
    present = [
        c for c in ("Kernel Name", "Device", "Stream", "Block Size", "Grid Size") if c in frame.columns
    ]
    first = frame.group_by(ID, maintain_order=True).agg(pl.col(c).first() for c in present)
    ident = first.select(  # on one row per launch: the text is parsed once per launch, not once per metric
        ID,
        pl.col("Kernel Name").alias(KERNEL),
        *[
            (_as_int(pl.col(c)) if c in present else pl.lit(None, dtype=pl.Int64)).alias(name)
            for c, name in (("Device", DEVICE), ("Stream", STREAM))
        ],
        _dims("Block Size", first).alias(BLOCK),
        _dims("Grid Size", first).alias(GRID),
    )
    fields = metric_table().fields
    wanted = {m for ids in fields.values() for m in ids}
    chosen = values.filter(pl.col(METRIC).is_in(list(wanted)))
    if chosen.height:
        wide = chosen.pivot(on=METRIC, index=ID, values=VALUE, aggregate_function="first")
        ident = ident.join(wide, on=ID, how="left", maintain_order="left")
    exprs = []
    for field in FIELDS:
        have = [pl.col(m) for m in fields.get(field, ()) if m in ident.columns]
        exprs.append((pl.coalesce(have) if have else pl.lit(None, dtype=pl.Float64)).alias(field))
    out = ident.with_columns(exprs)
    for field, column in (("block_size", BLOCK), ("grid_size", GRID)):
        threads = (
            pl.col(column).str.split(",").list.eval(pl.element().cast(pl.Float64).product()).list.first()
        )
        out = out.with_columns(pl.col(field).fill_null(threads))
    return out.select(list(LAUNCH_SCHEMA)).cast(LAUNCH_SCHEMA).sort(ID)  # type: ignore[arg-type]


def _text(frame: pl.DataFrame, column: str) -> pl.Expr:
    return pl.col(column) if column in frame.columns else pl.lit("")


def _rules(frame: pl.DataFrame) -> pl.DataFrame:
    """ncu's rule results (`RULE_SCHEMA`), text verbatim; the estimated speedup where the export has it."""
    if "Rule Name" not in frame.columns:
        return pl.DataFrame(schema=RULE_SCHEMA)
    rows = frame.filter(pl.col("Rule Name").str.strip_chars() != "")
    speedup = _as_float(pl.col("Estimated Speedup")) if "Estimated Speedup" in frame.columns else None
    return rows.select(
        ID,
        pl.col("Kernel Name").alias(KERNEL),
        _text(frame, "Section Name").alias(SECTION),
        pl.col("Rule Name").alias(RULE),
        _text(frame, "Rule Type").alias(RULE_TYPE),
        _text(frame, "Rule Description").alias(MESSAGE),
        _text(frame, "Estimated Speedup Type").alias(SPEEDUP_TYPE),
        (speedup if speedup is not None else pl.lit(None, dtype=pl.Float64)).alias(SPEEDUP),
    ).cast(RULE_SCHEMA)  # type: ignore[arg-type]


def _device_name(long: pl.DataFrame, frame: pl.DataFrame) -> str | None:
    """The GPU's name when the export has `device__attribute_display_name`, else its compute capability
    (the `CC` column of newer exports), else None."""
    names = long.filter((pl.col(METRIC) == DEVICE_NAME) & (pl.col(_RAW).str.strip_chars() != ""))[_RAW]
    if names.len():
        return str(names[0]).strip()
    if "CC" in frame.columns:
        cc = frame.filter(pl.col("CC").str.strip_chars() != "")["CC"]
        if cc.len():
            return f"compute capability {str(cc[0]).strip()}"
    return None
