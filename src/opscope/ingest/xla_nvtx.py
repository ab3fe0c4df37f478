"""XLA's NVTX ranges in Nsight Systems exports: `TSL:XlaModule:#hlo_module=M,program_id=P#` around the launches
of one execution of an HLO module, `TSL:Thunk:#hlo_op=O#` around the launches of one HLO op (thunk), written by
XLA's TraceMe -> NVTX bridge (key=value pairs between `#`, as in TraceMe's encoding).

Such a range keeps its time and thread and becomes what the xplane reader derives from launch stats: a module
range a `user_annotation` named M (hlo_module M, program_id P, name_stack = its `prefix`), a thunk range a
`cpu_op` named O (hlo_op O). The existing linking then attributes each kernel to the thunk range and the
module range that enclose its launch. Other `TSL:` ranges (compilation, autotuning) are left as they are.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import pyarrow as pa

from opscope.ingest import columns as C
from opscope.model.schema import Col, Kind

_RANGE = re.compile(r"^TSL:(XlaModule|Thunk):#(.*)#$", re.DOTALL)
_KEYS = ("hlo_module", "hlo_op", "program_id", "prefix")
# a value runs to the next `,key=` of a known key (a name stack may itself contain commas) or to the end
_PAIR = re.compile(r"(?:^|,)(" + "|".join(_KEYS) + r")=(.*?)(?=,(?:" + "|".join(_KEYS) + r")=|$)", re.DOTALL)


class XlaRange(NamedTuple):
    kind: str
    name: str
    hlo_op: str | None
    hlo_module: str | None
    program_id: int | None
    name_stack: str | None


@functools.lru_cache(maxsize=65536)
def parse(text: str | None) -> XlaRange | None:
    """The XLA meaning of an NVTX range's text, or None for any other range."""
    if not text:
        return None
    match = _RANGE.match(text)
    if match is None:
        return None
    pairs = {key: value for key, value in _PAIR.findall(match.group(2))}
    program = pairs.get("program_id", "")
    program_id = int(program) if program.isdigit() and len(program) < 19 else None
    if match.group(1) == "XlaModule":
        module = pairs.get("hlo_module")
        if not module:
            return None
        return XlaRange(Kind.USER_ANNOTATION, module, None, module, program_id, pairs.get("prefix") or None)
    op = pairs.get("hlo_op")
    if not op:
        return None
    return XlaRange(
        Kind.CPU_OP, op, op, pairs.get("hlo_module") or None, program_id, pairs.get("prefix") or None
    )


def columns(names: list[str | None], marks: list[bool]) -> dict[str, pa.Array]:
    """Replacement columns for a batch of NVTX ranges: name and kind of the XLA ranges, their HLO columns
    (empty when the batch has none, so the caller's columns stay)."""
    parsed = [None if mark else parse(name) for name, mark in zip(names, marks)]
    if not any(parsed):
        return {}
    kinds = [
        Kind.INSTANT if mark else (p.kind if p else Kind.USER_ANNOTATION) for p, mark in zip(parsed, marks)
    ]
    return {
        Col.NAME: C.text([p.name if p else name for p, name in zip(parsed, names)]),
        Col.KIND: C.kinds_of(kinds),
        Col.HLO_OP: C.text([p.hlo_op if p else None for p in parsed]),
        Col.HLO_MODULE: C.text([p.hlo_module if p else None for p in parsed]),
        Col.PROGRAM_ID: pa.array([p.program_id if p else None for p in parsed], type=pa.int64()),
        Col.NAME_STACK: C.text([p.name_stack if p else None for p in parsed]),
    }
