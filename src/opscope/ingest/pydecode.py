"""The reference event decoder: the Python twin of the native `decode.rs` / `number.rs`, rule for rule.

Each element the scanner cut out is decoded by msgspec into structs whose fields are all `Raw` (the exact
JSON text of the value), so decoding never fails on a value's type; each value is then converted by the
rules of `docs/ingest.md`: text fields must be strings (pid / tid may be integers, kept as written), times
are read from their decimal text to integer nanoseconds (half to even), integers and floats must fit their
column, and what does not is left empty and counted. Which `args` keys are read depends on the event's kind.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
from msgspec import Raw, field

from opscope.ingest.columns import kinds_from_codes
from opscope.ingest.pyscan import JUNK, NOT_OBJECT, TOO_DEEP, TOO_LARGE
from opscope.model.args import ARG_COLUMNS
from opscope.model.schema import CATEGORY_KINDS, COLUMNS, KIND_CODES, Col, Kind, arrow_schema

EMPTY = Raw()
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
I32_MIN, I32_MAX = -(2**31), 2**31 - 1
F32_MAX = 3.4028234663852886e38
MEMORY_EVENT = "[memory]"  # the name of the allocator's instant events, whose args fill the mem_* columns


class RawEvent(msgspec.Struct, gc=False):
    ph: Raw = EMPTY
    cat: Raw = EMPTY
    name: Raw = EMPTY
    pid: Raw = EMPTY
    tid: Raw = EMPTY
    ts: Raw = EMPTY
    dur: Raw = EMPTY
    id: Raw = EMPTY
    args: Raw = EMPTY


# One field per `args` key of the declared table (model/args.py), each kept as raw JSON and converted below.
RawArgs = msgspec.defstruct(
    "RawArgs", [(a.attr, Raw, field(name=a.key, default=EMPTY)) for a in ARG_COLUMNS], gc=False
)


_EVENTS = msgspec.json.Decoder(list[RawEvent])
_EVENT = msgspec.json.Decoder(RawEvent)
_ARGS: msgspec.json.Decoder[Any] = msgspec.json.Decoder(RawArgs)
_STR = msgspec.json.Decoder(str)
_LIST = msgspec.json.Decoder(list[Raw])


# Sentinels for what a conversion gave besides a value.
class _Outcome:
    """What a conversion gave instead of a value (compared by identity: never equal to any decoded text)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NULL, WRONG, RANGE, NEGATIVE, MALFORMED = (
    _Outcome(n) for n in ("null", "wrong", "range", "negative", "malformed")
)

_NUMBER = re.compile(rb"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?\Z")
_WS = b" \t\r\n"


def _split(text: bytes) -> tuple[bool, bytes, bytes, int] | None:
    m = _NUMBER.match(text)
    if m is None:
        return None
    exp_text = m.group(4)
    exponent = 0 if exp_text is None else max(min(int(exp_text), 10**9), -(10**9))
    return m.group(1) == b"-", m.group(2), m.group(3) or b"", exponent


def _scaled(neg: bool, int_digits: bytes, frac_digits: bytes, exponent: int, scale: int) -> int | None:
    """The decimal x 10^scale, rounded half to even; None beyond 64 bits."""
    digits = (int_digits + frac_digits).lstrip(b"0")
    if not digits:
        return 0
    power = exponent + scale - len(frac_digits)
    if power >= 0:
        if len(digits) + power > 20:
            return None
        magnitude = int(digits) * 10**power
    else:
        cut = len(digits) + power
        if cut < 0:
            return 0
        keep, dropped = digits[:cut], digits[cut:]
        if len(keep) > 20:
            return None
        magnitude = int(keep) if keep else 0
        if dropped:
            first = dropped[0]
            rest_nonzero = dropped[1:].strip(b"0") != b""
            if first > 0x35 or (first == 0x35 and (rest_nonzero or magnitude % 2 == 1)):
                magnitude += 1
    value = -magnitude if neg else magnitude
    return value if I64_MIN <= value <= I64_MAX else None


def micros_to_ns(text: bytes) -> Any:
    parts = _split(text)
    if parts is None:
        return WRONG
    scaled = _scaled(*parts, 3)
    return RANGE if scaled is None else scaled


def _whole(int_digits: bytes, frac_digits: bytes, exponent: int) -> bool | None:
    digits = int_digits + frac_digits
    significant = len(digits.rstrip(b"0"))
    if significant == 0:
        return True
    power = exponent - len(frac_digits) + (len(digits) - significant)
    if power >= 0:
        return None if power > 40 else True
    return False


def integer(text: bytes, from_string: bool) -> Any:
    if from_string:
        text = text.strip(_WS)
        if text.startswith(b"stream "):
            text = text[7:].strip(_WS)
        negative = text.startswith(b"-")
        body = text[1:] if negative else text
        if body[:2] in (b"0x", b"0X"):
            hexa = body[2:]
            if not hexa or not all(c in b"0123456789abcdefABCDEF" for c in hexa):
                return WRONG
            if len(hexa.lstrip(b"0")) > 16:
                return RANGE
            value = int(hexa, 16)
            value = -value if negative else value
            return value if I64_MIN <= value <= I64_MAX else RANGE
    parts = _split(text)
    if parts is None:
        return WRONG
    neg, int_digits, frac_digits, exponent = parts
    if frac_digits.strip(b"0") == b"" and exponent == 0:
        scaled = _scaled(neg, int_digits, frac_digits, exponent, 0)
        return RANGE if scaled is None else scaled
    whole = _whole(int_digits, frac_digits, exponent)
    if whole is None:
        return RANGE
    if not whole:
        return WRONG
    scaled = _scaled(neg, int_digits, frac_digits, exponent, 0)
    return RANGE if scaled is None else scaled


def floating(text: bytes, from_string: bool) -> Any:
    if from_string:
        text = text.strip(_WS)
    if _NUMBER.match(text) is None:
        return WRONG
    value = float(text)
    return value if value not in (float("inf"), float("-inf")) else RANGE


# -- raw values -----------------------------------------------------------------------------------------


def _classify(raw: bytes) -> tuple[str, Any]:
    """("null" | "num" | "str" | "other", payload)."""
    if not raw:
        return "null", None
    first = raw[0]
    if first == 0x22:
        try:
            return "str", _STR.decode(raw)
        except msgspec.DecodeError:
            return "other", None
    if first == 0x6E:
        return "null", None
    if first == 0x2D or 0x30 <= first <= 0x39:
        return "num", raw
    return "other", None


class Decoder:
    """Decodes batches of elements into record batches; `stats` sums what was skipped or repaired."""

    def __init__(self) -> None:
        self.stats = {
            "events": 0,
            "not_objects": 0,
            "too_deep": 0,
            "too_large": 0,
            "malformed": 0,
            "bad_utf8": 0,
            "wrong_type": 0,
            "out_of_range": 0,
            "negative_durations": 0,
        }
        self._text_cache: dict[bytes, Any] = {}

    def _count(self, value: Any) -> Any:
        if value is NULL:
            return None
        if value is WRONG:
            self.stats["wrong_type"] += 1
            return None
        if value is RANGE:
            self.stats["out_of_range"] += 1
            return None
        if value is NEGATIVE:
            self.stats["negative_durations"] += 1
            return None
        return value

    def _int(self, raw: bytes) -> Any:
        kind, payload = _classify(raw)
        if kind == "null":
            return NULL
        if kind == "num":
            return integer(payload, False)
        if kind == "str":
            return integer(payload.encode(), True)
        return WRONG

    def _int32(self, raw: bytes) -> Any:
        value = self._int(raw)
        if isinstance(value, int) and not I32_MIN <= value <= I32_MAX:
            return RANGE
        return value

    def _float(self, raw: bytes) -> Any:
        kind, payload = _classify(raw)
        if kind == "null":
            return NULL
        if kind == "num":
            return floating(payload, False)
        if kind == "str":
            return floating(payload.encode(), True)
        return WRONG

    def _float32(self, raw: bytes) -> Any:
        value = self._float(raw)
        if isinstance(value, float) and abs(value) > F32_MAX:
            return RANGE
        return value

    def _time(self, raw: bytes) -> Any:
        kind, payload = _classify(raw)
        if kind == "null":
            return NULL
        if kind == "num":
            return micros_to_ns(payload)
        if kind == "str":
            return micros_to_ns(payload.encode().strip(_WS))
        return WRONG

    def _text(self, raw: bytes) -> Any:
        """A text field: its string, None (absent / null), WRONG (another type) or MALFORMED (a string whose
        escapes do not decode, e.g. a lone surrogate: serde_json refuses the whole event). Cached by raw text:
        phases, categories and names repeat."""
        if not raw:
            return None
        value = self._text_cache.get(raw, self)
        if value is not self:
            return value
        if raw[:1] == b'"':
            try:
                value = _STR.decode(raw)
            except msgspec.DecodeError:
                value = MALFORMED
        else:
            value = None if _classify(raw)[0] == "null" else WRONG
        if len(self._text_cache) < 100_000:
            self._text_cache[raw] = value
        return value

    def _id_text(self, raw: bytes) -> str | None:
        kind, payload = _classify(raw)
        if kind == "null":
            return None
        if kind == "str":
            return payload  # type: ignore[no-any-return]
        if kind == "num" and not any(c in payload for c in b".eE"):
            return payload.decode()  # type: ignore[no-any-return]
        self.stats["wrong_type"] += 1
        return None

    def _arg_text(self, raw: bytes) -> str | None:
        kind, payload = _classify(raw)
        if kind == "str":
            return payload  # type: ignore[no-any-return]
        if kind != "null":
            self.stats["wrong_type"] += 1
        return None

    def _xla_fields(self, row: dict[str, Any], a: Any) -> None:  # a: RawArgs (built from the table)
        """XLA / JAX args (JAX's trace.json): hlo_op, hlo_module, program_id, step_num, and `name` as the JAX
        name stack on events that name an HLO op (elsewhere `name` is not read)."""
        row[Col.HLO_OP] = self._arg_text(bytes(a.hlo_op))
        row[Col.HLO_MODULE] = self._arg_text(bytes(a.hlo_module))
        if row[Col.HLO_OP] is not None:
            row[Col.NAME_STACK] = self._arg_text(bytes(a.label))
        row[Col.PROGRAM_ID] = self._count(self._int(bytes(a.program_id)))
        row[Col.STEP_NUM] = self._count(self._int(bytes(a.step_num)))

    # -- batches --------------------------------------------------------------------------------------

    def decode(self, elements: list[tuple[bytes, int]]) -> pa.RecordBatch:
        texts: list[bytes] = []
        for text, flags in elements:
            if flags & TOO_LARGE:
                self.stats["too_large"] += 1
            elif flags & NOT_OBJECT:
                self.stats["not_objects"] += 1
            elif flags & TOO_DEEP:
                self.stats["too_deep"] += 1
            elif flags & JUNK:
                self.stats["malformed"] += 1
            else:
                texts.append(text)
        events = self._parse(texts)
        rows = [row for row in map(self._row, events) if row is not None]
        self.stats["events"] += len(rows)
        return _record_batch(rows)

    def _parse(self, texts: list[bytes]) -> list[RawEvent]:
        if not texts:
            return []
        data = b"[" + b",".join(texts) + b"]"
        try:
            data.decode("utf-8")
            return _EVENTS.decode(data)  # type: ignore[no-any-return]
        except (UnicodeDecodeError, msgspec.DecodeError, RecursionError):
            pass
        out = []
        for text in texts:
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                self.stats["bad_utf8"] += 1
                text = text.decode("utf-8", "replace").encode("utf-8")
            try:
                out.append(_EVENT.decode(text))
            except (msgspec.DecodeError, RecursionError):
                self.stats["malformed"] += 1
        return out

    def _row(self, ev: RawEvent) -> dict[str, Any] | None:
        texts = [self._text(bytes(raw)) for raw in (ev.ph, ev.cat, ev.name)]
        if any(text is MALFORMED for text in texts):
            self.stats["malformed"] += 1
            return None
        ph, cat, name = (self._count(text) for text in texts)
        row: dict[str, Any] = {Col.PH: ph, Col.CAT: cat, Col.NAME: name}
        row[Col.PID] = self._id_text(bytes(ev.pid))
        row[Col.TID] = self._id_text(bytes(ev.tid))
        kind = CATEGORY_KINDS.get(row[Col.CAT], Kind.OTHER) if row[Col.CAT] is not None else Kind.OTHER
        if row[Col.PH] == "M":
            kind = Kind.METADATA
        row[Col.KIND] = KIND_CODES[kind]
        row[Col.TS_NS] = self._count(self._time(bytes(ev.ts)))
        dur = self._time(bytes(ev.dur))
        if isinstance(dur, int) and dur < 0:
            dur = NEGATIVE
        row[Col.DUR_NS] = self._count(dur)
        row[Col.FLOW_ID] = self._count(self._int(bytes(ev.id)))
        raw_args = bytes(ev.args)
        args: Any = None  # RawArgs
        if raw_args[:1] == b"{":
            args = _ARGS.decode(raw_args)
        elif raw_args and raw_args != b"null":
            self.stats["wrong_type"] += 1
        a = args if args is not None else _NO_ARGS
        gpu = kind in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)
        launch = kind in (Kind.RUNTIME, Kind.DRIVER)
        count = self._count
        if kind == Kind.PYTHON:
            row[Col.PY_ID] = count(self._int(bytes(a.py_id)))
            row[Col.PY_PARENT_ID] = count(self._int(bytes(a.py_parent)))
        elif kind == Kind.METADATA:
            label_kind, label = _classify(bytes(a.label))
            if label_kind == "str":
                row[Col.LABEL] = label
            elif label_kind != "null":
                self.stats["wrong_type"] += 1
        else:
            row[Col.EXTERNAL_ID] = count(self._int(_either(a.external_id, a.external_id_old)))
            row[Col.CORRELATION] = count(self._int(_either(a.correlation, a.correlation_id)))
            self._xla_fields(row, a)
            if (
                kind == Kind.SYNC
            ):  # Kineto's cuda_sync events: the stream and the cudaEventRecord a wait is on
                row[Col.WAIT_ON_STREAM] = count(self._int(bytes(a.wait_on_stream)))
                row[Col.WAIT_ON_CORRELATION] = count(self._int(bytes(a.wait_on_correlation)))
            if not launch:
                row[Col.STREAM] = count(self._int(bytes(a.stream)))
                row[Col.DEVICE] = count(self._int32(bytes(a.device)))
            if gpu:
                for raw, cols in (
                    (bytes(a.grid), (Col.GRID_X, Col.GRID_Y, Col.GRID_Z)),
                    (bytes(a.block), (Col.BLOCK_X, Col.BLOCK_Y, Col.BLOCK_Z)),
                ):
                    if not raw or raw == b"null":
                        continue
                    items = _array(raw)
                    if items is None:
                        self.stats["wrong_type"] += 1
                        continue
                    for axis, col in enumerate(cols):
                        row[col] = count(self._int32(bytes(items[axis]))) if axis < len(items) else None
                row[Col.REGISTERS] = count(self._int32(bytes(a.registers)))
                row[Col.SHARED_MEMORY] = count(self._int(bytes(a.shared_memory)))
                row[Col.BLOCKS_PER_SM] = count(self._float32(bytes(a.blocks_per_sm)))
                row[Col.WARPS_PER_SM] = count(self._float32(bytes(a.warps_per_sm)))
                row[Col.OCCUPANCY_PCT] = count(self._float32(bytes(a.occupancy)))
                row[Col.BYTES] = count(self._int(bytes(a.nbytes)))
                row[Col.BANDWIDTH_GBPS] = count(self._float(bytes(a.bandwidth)))
            elif not launch:
                dims = _either(a.input_dims, a.input_dims_old)
                row[Col.INPUT_DIMS] = dims.decode() if dims and dims != b"null" else None
                types = bytes(a.input_types)
                row[Col.INPUT_TYPES] = types.decode() if types and types != b"null" else None
                concrete = bytes(a.concrete)
                row[Col.CONCRETE_INPUTS] = concrete.decode() if concrete and concrete != b"null" else None
                row[Col.SEQ] = count(self._int(bytes(a.seq)))
            if name == MEMORY_EVENT:
                row[Col.MEM_ADDR] = count(self._int(bytes(a.mem_addr)))
                row[Col.MEM_BYTES] = count(self._int(bytes(a.mem_bytes)))
                row[Col.MEM_ALLOCATED] = count(self._int(bytes(a.mem_allocated)))
                row[Col.MEM_RESERVED] = count(self._int(bytes(a.mem_reserved)))
                row[Col.MEM_DEVICE_TYPE] = count(self._int32(bytes(a.mem_device_type)))
                row[Col.MEM_DEVICE_ID] = count(self._int32(bytes(a.mem_device_id)))
        if gpu:
            if row.get(Col.DEVICE) is None:
                device = _placement(row[Col.PID])
                row[Col.DEVICE] = device if device is not None and I32_MIN <= device <= I32_MAX else None
            if row.get(Col.STREAM) is None:
                row[Col.STREAM] = _placement(row[Col.TID])
        return row


_NO_ARGS: Any = RawArgs()


def _either(raw: Raw, old: Raw) -> bytes:
    value = bytes(raw)
    return value if value and value != b"null" else bytes(old)


def _array(raw: bytes) -> list[Raw] | None:
    if raw[:1] != b"[":
        return None
    try:
        return _LIST.decode(raw)  # type: ignore[no-any-return]
    except msgspec.DecodeError:
        return None


def _placement(text: str | None) -> int | None:
    if text is None:
        return None
    value = integer(text.encode(), False)
    if isinstance(value, int):
        return value
    digits = "".join(ch for ch in text if "0" <= ch <= "9")
    if not digits or len(digits) > 17:
        return None
    return int(digits)


_SCHEMA = arrow_schema()


def _record_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    arrays = []
    for f in _SCHEMA:
        values = [r.get(f.name) for r in rows]
        if f.name == Col.KIND:
            arrays.append(kinds_from_codes(np.array(values, dtype=np.int32)))
        elif pa.types.is_dictionary(f.type):
            arrays.append(pa.array(values, type=pa.string()).dictionary_encode())
        else:
            arrays.append(pa.array(values, type=f.type))
    assert len(arrays) == len(COLUMNS)
    return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA)
