"""The XSpace protobuf messages (XLA / TSL profiler `.xplane.pb`), built at run time with the `protobuf` runtime.

The definitions are written from the published schema, `xla/tsl/profiler/protobuf/xplane.proto`
(https://github.com/openxla/xla/blob/main/xla/tsl/profiler/protobuf/xplane.proto, package
`tensorflow.profiler`), field numbers and types as published; no protoc step and no generated code: the
descriptors are assembled here and the message classes come from the runtime's message factory. Decoding is
the runtime's (upb) parser, never a hand-written wire reader.
"""

from __future__ import annotations

import functools
from typing import Any

_PACKAGE = "tensorflow.profiler"

# (message, [(field name, number, type, label, message type or None, oneof index or None)], oneofs, map entry)
_T = {"int64": 3, "uint64": 4, "double": 1, "string": 9, "bytes": 12, "message": 11}
_OPT, _REP = 1, 3

_MESSAGES: list[tuple[str, list[tuple[str, int, str, int, str | None, int | None]], list[str]]] = [
    (
        "XSpace",
        [
            ("planes", 1, "message", _REP, "XPlane", None),
            ("errors", 2, "string", _REP, None, None),
            ("warnings", 3, "string", _REP, None, None),
            ("hostnames", 4, "string", _REP, None, None),
        ],
        [],
    ),
    (
        "XPlane",
        [
            ("id", 1, "int64", _OPT, None, None),
            ("name", 2, "string", _OPT, None, None),
            ("lines", 3, "message", _REP, "XLine", None),
            ("event_metadata", 4, "message", _REP, "XPlane.EventMetadataEntry", None),
            ("stat_metadata", 5, "message", _REP, "XPlane.StatMetadataEntry", None),
            ("stats", 6, "message", _REP, "XStat", None),
        ],
        [],
    ),
    (
        "XLine",
        [
            ("id", 1, "int64", _OPT, None, None),
            ("display_id", 10, "int64", _OPT, None, None),
            ("name", 2, "string", _OPT, None, None),
            ("display_name", 11, "string", _OPT, None, None),
            ("timestamp_ns", 3, "int64", _OPT, None, None),
            ("duration_ps", 9, "int64", _OPT, None, None),
            ("events", 4, "message", _REP, "XEvent", None),
        ],
        [],
    ),
    (
        "XEvent",
        [
            ("metadata_id", 1, "int64", _OPT, None, None),
            ("offset_ps", 2, "int64", _OPT, None, 0),
            ("num_occurrences", 5, "int64", _OPT, None, 0),
            ("duration_ps", 3, "int64", _OPT, None, None),
            ("stats", 4, "message", _REP, "XStat", None),
        ],
        ["data"],
    ),
    (
        "XStat",
        [
            ("metadata_id", 1, "int64", _OPT, None, None),
            ("double_value", 2, "double", _OPT, None, 0),
            ("uint64_value", 3, "uint64", _OPT, None, 0),
            ("int64_value", 4, "int64", _OPT, None, 0),
            ("str_value", 5, "string", _OPT, None, 0),
            ("bytes_value", 6, "bytes", _OPT, None, 0),
            ("ref_value", 7, "uint64", _OPT, None, 0),
        ],
        ["value"],
    ),
    (
        "XEventMetadata",
        [
            ("id", 1, "int64", _OPT, None, None),
            ("name", 2, "string", _OPT, None, None),
            ("display_name", 4, "string", _OPT, None, None),
            ("metadata", 3, "bytes", _OPT, None, None),
            ("stats", 5, "message", _REP, "XStat", None),
            ("child_id", 6, "int64", _REP, None, None),
        ],
        [],
    ),
    (
        "XStatMetadata",
        [
            ("id", 1, "int64", _OPT, None, None),
            ("name", 2, "string", _OPT, None, None),
            ("description", 3, "string", _OPT, None, None),
        ],
        [],
    ),
]
# XPlane's two maps: map<int64, XEventMetadata> event_metadata = 4; map<int64, XStatMetadata> stat_metadata = 5.
_MAPS = {"XPlane": [("EventMetadataEntry", "XEventMetadata"), ("StatMetadataEntry", "XStatMetadata")]}


def _add_fields(msg: Any, fields: list[tuple[str, int, str, int, str | None, int | None]]) -> None:
    for name, number, typ, label, type_name, oneof in fields:
        f = msg.field.add(name=name, number=number, type=_T[typ], label=label)
        if type_name is not None:
            f.type_name = f".{_PACKAGE}.{type_name}"
        if oneof is not None:
            f.oneof_index = oneof


@functools.cache
def messages() -> dict[str, Any]:
    """Message classes by name: `XSpace`, `XPlane`, `XLine`, `XEvent`, `XStat`, `XEventMetadata`,
    `XStatMetadata` (built once per process)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="opscope/xplane.proto", package=_PACKAGE, syntax="proto3")
    for name, fields, oneofs in _MESSAGES:
        msg = proto.message_type.add(name=name)
        for oneof in oneofs:
            msg.oneof_decl.add(name=oneof)
        _add_fields(msg, fields)
        for entry, value_type in _MAPS.get(name, []):
            nested = msg.nested_type.add(name=entry)
            nested.options.map_entry = True
            _add_fields(
                nested,
                [("key", 1, "int64", _OPT, None, None), ("value", 2, "message", _OPT, value_type, None)],
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name, _, _ in _MESSAGES
    }
