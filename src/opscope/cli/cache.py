"""`opscope cache info / prune / clear`: what the trace cache holds, and removing it (ingest/cache_size.py)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opscope.cli.common import add_output_args, add_subcommands, check_output, emit
from opscope.errors import UsageError

if TYPE_CHECKING:
    from opscope.ingest.cache_size import Entry
    from opscope.report.cache_view import CachedTrace

NAME = "cache"

SUBCOMMANDS: dict[str, str] = {
    "info": "the cache folder, its bound and the traces it holds (largest files: the traces' tables)",
    "prune": "remove the least recently used traces' files down to the bound (or --max) now",
    "clear": "remove every file the cache holds (the next command on a trace reads it again)",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    for name, child in add_subcommands(parser, "cache_command", SUBCOMMANDS):
        add_output_args(child)
        if name == "prune":
            child.add_argument(
                "--max",
                default=None,
                metavar="SIZE",
                help="the bound for this prune: 10G, 500M, 8GiB... (default: $OPSCOPE_CACHE_MAX, else 10G); "
                "traces used in the last hour are kept whatever the bound",
            )


def run(args: argparse.Namespace) -> int:
    from opscope.ingest import cache_size
    from opscope.ingest.cache import cache_dir, remove_orphans

    folder = cache_dir()
    found = cache_size.entries(folder)
    if args.output is not None:  # never write over a file of the cache (it may be removed or read next)
        check_output(
            args.output, "-o", tuple(p for e in found for p in (e.table, cache_size.crc_path(e.table)))
        )
    try:
        limit = cache_size.parse_size(args.max) if getattr(args, "max", None) else cache_size.max_bytes()
    except ValueError as exc:
        raise UsageError(str(exc) if getattr(args, "max", None) is None else f"--max {exc}") from None
    shown = {e.table: e for e in _shown(found)}  # the traces' paths, read before any table goes
    if args.cache_command == "info":
        from opscope.report.cache_view import info_document

        emit(info_document(str(folder), limit, list(shown.values())), args)
        return 0
    if args.cache_command == "prune":
        removed = [] if limit is None else cache_size.prune(folder, limit)
    else:
        removed = list(found)
        for entry in removed:
            cache_size.remove_table(entry.table)
        if folder.is_dir():
            remove_orphans(folder)  # half-written files of processes that are gone
    from opscope.report.cache_view import removed_document

    left = sum(e.bytes for e in cache_size.entries(folder))
    gone = [shown.get(e.table.name) or _shown([e])[0] for e in removed]
    emit(removed_document(args.cache_command, str(folder), gone, left, limit), args)
    return 0


def _shown(found: Sequence[Entry]) -> list[CachedTrace]:
    """The entries as shown: with the path of the trace each was read from (in its table's key)."""
    from opscope.ingest.cache import cached_source
    from opscope.report.cache_view import CachedTrace

    return [
        CachedTrace(cached_source(e.table), e.table.name, e.table_bytes, e.derived_bytes, e.last_used)
        for e in found
    ]
