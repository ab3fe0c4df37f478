"""`opscope formats`: the input formats opscope reads (each chosen by the file's content, not its name)."""

from __future__ import annotations

import argparse

from opscope.cli.common import add_output_args, emit
from opscope.ingest.registry import READERS, SQLITE_NOT_READ
from opscope.report.document import TEXT, Column, Document, Table

NAME = "formats"
SCHEMA = "opscope.formats/1"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_output_args(parser)


def run(args: argparse.Namespace) -> int:
    rows = tuple(
        {"name": r.name, "description": r.description, "extensions": " ".join(r.extensions)} for r in READERS
    )
    data = {
        "schema": SCHEMA,
        "formats": [{**row, "extensions": list(r.extensions)} for row, r in zip(rows, READERS)],
    }
    columns = (
        Column("name", "Format", TEXT),
        Column("extensions", "Usual names", TEXT),
        Column("description", "What", TEXT, wrap=True),
    )
    doc = Document(
        title="Trace formats (detected by content, not by file name)",
        data=data,
        tables=(Table(name="formats", title="", columns=columns, rows=rows),),
        notes=(
            "Nsight Compute CSV exports are per-launch metrics, not traces: read them with `opscope ncu FILE`, "
            "or join them to a trace with `opscope kernels TRACE --metrics FILE`.",
            *(
                f"Recognised, not read yet: {what} (an SQLite file); meanwhile, {meanwhile}."
                for what, _, meanwhile in SQLITE_NOT_READ
            ),
        ),
    )
    emit(doc, args)
    return 0
