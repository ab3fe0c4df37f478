"""The shapes msgspec decodes Kineto events into: one struct for the event, one per group of `args`.

Only the fields later analyses need are declared; msgspec skips the rest without building objects for them.
`args` stays raw in `Event` and is decoded per group (GPU activity, launches, python functions, metadata,
other host events) so that each event's fields are touched once. The loose variants take any value and are
used, batch by batch, only when a field holds a value of an unexpected type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import field

Num = int | float | str | None
EMPTY_RAW = msgspec.Raw()


class Event(msgspec.Struct, gc=False):
    """The fields every event may carry. `args` stays raw: it is decoded per kind below, in one call."""

    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: Any = None  # float literals arrive as their text (float_hook=str): see `_start_times_ns`
    dur: float | None = None
    id: int | str | None = None
    args: msgspec.Raw = EMPTY_RAW


class GpuArgs(msgspec.Struct, gc=False):
    """args of kernels, memcpys and memsets."""

    external_id: Num = field(name="External id", default=None)
    external_id_old: Num = field(name="external id", default=None)
    correlation: Num = None
    stream: Num = None
    device: Num = None
    grid: list[Any] | None = None
    block: list[Any] | None = None
    registers: Num = field(name="registers per thread", default=None)
    shared_memory: Num = field(name="shared memory", default=None)
    blocks_per_sm: Num = field(name="blocks per SM", default=None)
    warps_per_sm: Num = field(name="warps per SM", default=None)
    occupancy: Num = field(name="est. achieved occupancy %", default=None)
    nbytes: Num = field(name="bytes", default=None)
    bandwidth: Num = field(name="memory bandwidth (GB/s)", default=None)


class HostArgs(msgspec.Struct, gc=False):
    """args of CPU ops, annotations and other host events."""

    external_id: Num = field(name="External id", default=None)
    external_id_old: Num = field(name="external id", default=None)
    correlation: Num = None
    stream: Num = None
    device: Num = None
    input_dims: msgspec.Raw = field(name="Input Dims", default=EMPTY_RAW)
    input_dims_old: msgspec.Raw = field(name="Input dims", default=EMPTY_RAW)
    input_types: msgspec.Raw = field(name="Input type", default=EMPTY_RAW)
    seq: Num = field(name="Sequence number", default=None)


class LaunchArgs(msgspec.Struct, gc=False):
    """args of runtime / driver calls (launches, copies, synchronisations)."""

    external_id: Num = field(name="External id", default=None)
    external_id_old: Num = field(name="external id", default=None)
    correlation: Num = None


class PythonArgs(msgspec.Struct, gc=False):
    """args of python_function events (with_stack)."""

    py_id: Num = field(name="Python id", default=None)
    py_parent: Num = field(name="Python parent id", default=None)


class MetaArgs(msgspec.Struct, gc=False):
    """args of metadata events (process and thread names)."""

    label: Any = field(name="name", default=None)


class LooseEvent(msgspec.Struct, gc=False):
    """Fallback when a field holds a value of an unexpected type: everything untyped, fixed up in Python."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    id: Any = None
    args: msgspec.Raw = EMPTY_RAW


STRICT_DECODER = msgspec.json.Decoder(list[Event], float_hook=str)
LOOSE_DECODER = msgspec.json.Decoder(list[LooseEvent])
ARGS_DECODERS: dict[type, msgspec.json.Decoder[Any]] = {
    struct: msgspec.json.Decoder(list[struct])  # type: ignore[valid-type]
    for struct in (GpuArgs, HostArgs, LaunchArgs, PythonArgs, MetaArgs)
}
LOOSE_ARGS_DECODER = msgspec.json.Decoder(list[Any])
INT64_MAX = 2**63 - 1
FLOAT_EXACT_US = 2.0**53 / 1000 / 8  # below this, float64 microseconds keep every nanosecond


@dataclass
class DecodeStats:
    events: int = 0
    bad_utf8_batches: int = 0
    loose_batches: int = 0
    clamped_values: int = 0

    def merge(self, other: DecodeStats) -> None:
        self.events += other.events
        self.bad_utf8_batches += other.bad_utf8_batches
        self.loose_batches += other.loose_batches
        self.clamped_values += other.clamped_values


def as_str(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else str(value)


def as_float(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def loose_to_strict(events: list[LooseEvent]) -> list[Event]:
    out = []
    for ev in events:
        ident = ev.id if isinstance(ev.id, (int, str)) and not isinstance(ev.id, bool) else None
        pid = ev.pid if isinstance(ev.pid, (int, str)) and not isinstance(ev.pid, bool) else as_str(ev.pid)
        tid = ev.tid if isinstance(ev.tid, (int, str)) and not isinstance(ev.tid, bool) else as_str(ev.tid)
        out.append(Event(as_str(ev.ph), as_str(ev.cat), as_str(ev.name), pid, tid, as_float(ev.ts),
                          as_float(ev.dur), ident, ev.args))
    return out


def loose_args(raws: list[msgspec.Raw], struct: type[msgspec.Struct]) -> list[Any]:
    """Decode args one dict at a time, dropping values of the wrong type instead of failing the batch."""
    out = []
    names = {f.encode_name: f for f in msgspec.structs.fields(struct)}
    for item in LOOSE_ARGS_DECODER.decode(b"[" + b",".join(raws) + b"]"):
        values: dict[str, Any] = {}
        if isinstance(item, dict):
            for key, spec in names.items():
                if key not in item:
                    continue
                value = item[key]
                if spec.type is msgspec.Raw:
                    values[spec.name] = msgspec.Raw(msgspec.json.encode(value))
                elif spec.name in ("grid", "block"):
                    values[spec.name] = value if isinstance(value, list) else None
                elif spec.name == "label" or (isinstance(value, (int, float, str)) and not isinstance(value, bool)):
                    values[spec.name] = value
        out.append(struct(**values))
    return out


