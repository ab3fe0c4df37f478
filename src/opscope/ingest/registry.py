"""Reader registry: each input format is one reader, chosen by looking at the file's content, not its name."""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opscope.errors import InputError, NotReadYet
from opscope.ingest.source import head_bytes

if TYPE_CHECKING:
    import pyarrow as pa

    from opscope.model.meta import TraceMeta

    BatchStream = tuple[Iterator[pa.RecordBatch], Callable[[], TraceMeta]]


KINETO_READERS = ("native", "python")


def reader_name() -> str:
    """The Kineto reader in use: `$OPSCOPE_READER` (native / python), else native."""
    wanted = os.environ.get("OPSCOPE_READER", "").strip().lower() or "native"
    if wanted not in KINETO_READERS:
        raise InputError(f"OPSCOPE_READER={wanted!r}: expected one of {', '.join(KINETO_READERS)}")
    return wanted


def _lazy(target: str) -> Callable[..., Any]:
    """`module:function`, imported when first called (listing the formats must not import pyarrow)."""
    module, function = target.split(":")

    def call(*args: Any) -> Any:
        return getattr(importlib.import_module(f"opscope.ingest.{module}"), function)(*args)

    call.__name__ = function
    return call


@dataclass(frozen=True)
class Reader:
    """One input format: how to recognise it and how to stream it into record batches."""

    name: str
    description: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes, Path], bool]
    read: Callable[[Path, str], BatchStream]  # type: ignore[name-defined]


def _sniff_kineto(head: bytes, path: Path) -> bool:
    text = head.lstrip()
    if text[:1] == b"[":
        return b'"ph"' in head or text[1:].lstrip()[:1] in (b"{", b"]", b"")
    return text[:1] == b"{" and (
        b'"traceEvents"' in head or b'"schemaVersion"' in head or len(head) >= (64 << 10)
    )


def _sniff_rocprof_json(head: bytes, path: Path) -> bool:
    return head.lstrip()[:1] == b"{" and ROCPROF_JSON_KEY in head[:4096]


def kineto_head(head: bytes) -> bool:
    """Whether a file starting with `head` goes to the Kineto reader, decided without importing any reader: of
    the readers before it, only rocprof's JSON can take a JSON head (an XSpace starts with 0x0a, SQLite with its
    magic, a CSV reader needs a header line of its columns)."""
    head = head.removeprefix(b"\xef\xbb\xbf")
    return _sniff_kineto(head, Path()) and not _sniff_rocprof_json(head, Path())


ROCPROF_JSON_KEY = b'"rocprofiler-sdk-tool"'
SQLITE_MAGIC = b"SQLite format 3\x00"
NCU_COLUMNS = (b'"ID"', b'"Kernel Name"')  # Nsight Compute CSV: not a trace, read by `ncu`


def _sniff_sqlite(head: bytes, path: Path) -> bool:
    return head.startswith(SQLITE_MAGIC)


# SQLite databases of other profilers, recognised by their tables, with no reader yet: (what it is, a table
# name it must have or a prefix (ending in "_") one of its tables has, what to do meanwhile). Empty now that
# rpd, rocprof-compute and rocpd databases are read; kept for the next format that is seen before it is read.
SQLITE_NOT_READ: tuple[tuple[str, str, str], ...] = ()


def sqlite_tables(path: Path) -> set[str]:
    """The table names of an SQLite file, read-only (`sqlite_master` only: nothing of the file is run); empty
    when it cannot be opened. What the SQLite readers' sniffs look at."""
    import sqlite3

    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
        ) as db:
            return {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except (sqlite3.Error, OSError, ValueError):
        return set()


def sqlite_flavour(path: Path) -> tuple[str, str] | None:
    """(what the SQLite database is, what to do meanwhile) where it is one of `SQLITE_NOT_READ`; None for any
    other (an Nsight Systems export, or what its reader will say it is not)."""
    names = sqlite_tables(path)
    for what, table, meanwhile in SQLITE_NOT_READ:
        if any(n == table or (table.endswith("_") and n.startswith(table)) for n in names):
            return what, meanwhile
    return None


READERS: list[Reader] = [
    Reader(
        name="rocpd",
        description="rocprofv3 / rocprofiler-sdk rocpd SQLite (ROCm 7's default output): kernels, copies, "
        "HIP / HSA API calls with their links, roctx ranges, the GPUs",
        extensions=(".db",),
        sniff=_lazy("rocpd:sniff"),
        read=_lazy("rocpd:read_batches"),
    ),
    Reader(
        name="rpd",
        description="rocmProfileData rpd SQLite (rpd_tracer, runTracer.sh): kernels, copies, fills, HIP API "
        "calls with their links, roctx markers",
        extensions=(".rpd",),
        sniff=_lazy("rpd:sniff"),
        read=_lazy("rpd:read_batches"),
    ),
    Reader(
        name="rocprof-compute",
        description="rocprof-compute (omniperf) analysis database (analyze --output-format db): kernel "
        "dispatches, the GPU, roofline points; its per-kernel metrics: opscope ncu DB",
        extensions=(".db",),
        sniff=_lazy("rocprof_compute:sniff"),
        read=_lazy("rocprof_compute:read_batches"),
    ),
    Reader(
        name="nsys",
        description="Nsight Systems SQLite export (nsys export --type sqlite): kernels, memcpy/memset, "
        "CUDA API, NVTX ranges",
        extensions=(".sqlite",),
        sniff=_sniff_sqlite,
        read=_lazy("nsys:read_batches"),
    ),
    Reader(
        name="xplane",
        description="JAX / XLA profiler XSpace protobuf (.xplane.pb, jax.profiler.trace): GPU kernels and "
        "memcpys, host threads, HLO ops and modules",
        extensions=(".xplane.pb",),
        sniff=_lazy("xplane:sniff"),
        read=_lazy("xplane:read_batches"),
    ),
    Reader(
        name="pftrace",
        description="Perfetto protobuf trace (.pftrace; rocprofv3 --output-format pftrace): kernels, copies, "
        "API calls and markers of rocprofv3, the track-event slices of any Perfetto trace",
        extensions=(".pftrace", ".perfetto-trace", ".pb"),
        sniff=_lazy("pftrace:sniff"),
        read=_lazy("pftrace:read_batches"),
    ),
    Reader(
        name="rocprof",
        description="rocprofv3 / rocprofiler-sdk JSON (--output-format json): kernel dispatches, memory copies",
        extensions=(".json", ".json.gz"),
        sniff=_sniff_rocprof_json,
        read=_lazy("rocprof:read_json"),
    ),
    Reader(
        name="rocprof-csv",
        description="rocprof kernel CSV: v1 results.csv (BeginNs/EndNs), omniperf timestamps.csv, "
        "rocprofv3 kernel_trace.csv",
        extensions=(".csv",),
        sniff=_lazy("rocprof:sniff_csv"),
        read=_lazy("rocprof:read_csv"),
    ),
    Reader(
        name="kineto",
        description="PyTorch profiler / Kineto / Chrome-trace JSON (.json, .json.gz), NVIDIA and AMD",
        extensions=(".json", ".json.gz"),
        sniff=_sniff_kineto,
        read=_lazy("kineto:read_batches"),
    ),
]


def register(reader: Reader, first: bool = True) -> None:
    """Add a reader; readers are tried in order, so specific formats go before the generic JSON one."""
    if any(r.name == reader.name for r in READERS):
        return
    if first:
        READERS.insert(0, reader)
    else:
        READERS.append(reader)


def detect(path: Path, display: str) -> Reader:
    """The reader for `path`, decided by its first bytes (decompressed when gzip)."""
    try:
        head = head_bytes(path)
    except OSError as exc:
        raise InputError(f"{display}: cannot read: {exc.strerror or exc}") from None
    head = head.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 BOM is not content (the readers skip it too)
    if not head.strip():
        raise InputError(f"{display}: the file is empty")
    for reader in READERS:
        if reader.sniff(head, path):
            if reader.sniff is _sniff_sqlite and (flavour := sqlite_flavour(path)) is not None:
                what, meanwhile = flavour
                raise NotReadYet(
                    f"{display}: {what}: recognised, but opscope does not read it yet; {meanwhile} "
                    "(`opscope formats` lists what it reads)"
                )
            return reader
    stripped = head.lstrip()
    if all(col in head[:4096] for col in NCU_COLUMNS):
        raise InputError(
            f"{display}: an Nsight Compute CSV (per-launch metrics, not a timeline); "
            f"read it with `opscope ncu {display}` (or join it to a trace: `opscope kernels TRACE --metrics FILE`)"
        )
    if stripped[:1] in (b"{", b"["):
        raise InputError(f"{display}: JSON, but not a trace format opscope reads (see `opscope formats`)")
    first_line = stripped.split(b"\n", 1)[0]
    if first_line.count(b",") >= 2 and not any(ch < 9 for ch in first_line):
        raise InputError(
            f"{display}: {_lazy('rocprof:describe_csv')(stripped)}: not a trace format opscope reads "
            "(see `opscope formats`)"
        )
    raise InputError(
        f"{display}: not a trace: unrecognised content (starts with {stripped[:16]!r}); see `opscope formats`"
    )
