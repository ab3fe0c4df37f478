"""HLO scopes derived from XLA's launch records (docs/readers.md, "JAX / XLA": HLO attribution).

XLA launches carry `hlo_op` / `hlo_module` / `program_id` / the JAX name stack, but are issued from a runtime
thread with no enclosing CPU op. The scopes made here (cat `xla_module`, `xla_name_stack`, `xla_op`, on the
launch's thread) let the existing linking attribute kernel -> HLO op -> name stack -> HLO module. Used by the
xplane reader and by the JAX conventions of the Kineto reader.
"""

from __future__ import annotations

import bisect
from typing import Any

from opscope.model.schema import Col, Kind


def hlo_scopes(
    launches: list[dict[str, Any]], boundaries: dict[tuple[str, str], list[int]] | None = None
) -> list[dict[str, Any]]:
    """Scopes derived from the launch calls that name an HLO op (cat `xla_module`, `xla_name_stack`, `xla_op`), so
    that GPU work is attributed kernel -> HLO op -> JAX name stack -> HLO module like kernel -> aten op ->
    module. On each thread, consecutive launches of the same (module, program) form one `user_annotation` named
    after the module; of the same (module, program, name stack) one `user_annotation` named after the name
    stack (when the launch has one); of the same (module, program, name stack, op) one `cpu_op` named after
    the HLO op; each spanning its launches (first start to last end), but only while no other event of the thread starts or ends between
    them (`boundaries`: the sorted start and end times of the thread's other events), so a derived scope never
    straddles a real one. Without `boundaries` each launch is its own scope. Launches without HLO stats are in
    no scope."""
    out: list[
        dict[str, Any]
    ] = []  # module scopes first, then name stacks, then ops: outer first on equal spans
    by_thread: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in launches:
        if row.get(Col.HLO_MODULE) is not None or row.get(Col.HLO_OP) is not None:
            by_thread.setdefault((row[Col.PID], row[Col.TID]), []).append(row)
    for thread, rows in by_thread.items():
        rows.sort(key=lambda r: r[Col.TS_NS])
        marks = None if boundaries is None else boundaries.get(thread, [])
        for level, key in (
            ("xla_module", (Col.HLO_MODULE, Col.PROGRAM_ID)),
            ("xla_name_stack", (Col.HLO_MODULE, Col.PROGRAM_ID, Col.NAME_STACK)),
            ("xla_op", (Col.HLO_MODULE, Col.PROGRAM_ID, Col.NAME_STACK, Col.HLO_OP)),
        ):
            run: list[dict[str, Any]] = []
            for launch in rows:
                if run and not _joins(run, launch, key, marks):
                    out.append(_scope(run, level))
                    run = []
                run.append(launch)
            if run:
                out.append(_scope(run, level))
    return [scope for scope in out if scope[Col.NAME] is not None]
    return out


def _joins(
    run: list[dict[str, Any]], launch: dict[str, Any], key: tuple[str, ...], marks: list[int] | None
) -> bool:
    if marks is None or tuple(launch.get(k) for k in key) != tuple(run[0].get(k) for k in key):
        return False
    lo, hi = run[0][Col.TS_NS], launch[Col.TS_NS] + (launch[Col.DUR_NS] or 0)
    i = bisect.bisect_right(marks, lo)
    return i >= len(marks) or marks[i] >= hi


def with_device_hlo(launch: dict[str, Any], device_hlo: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """A launch without HLO stats takes them from the device event it launched (same correlation id), as in
    older XLA versions that put them on the device side only (for the derived scopes; its columns stay)."""
    if launch[Col.HLO_OP] is not None or launch[Col.HLO_MODULE] is not None:
        return launch
    device = device_hlo.get(launch[Col.CORRELATION]) if launch[Col.CORRELATION] is not None else None
    if device is None:
        return launch
    keys = (Col.HLO_OP, Col.HLO_MODULE, Col.PROGRAM_ID, Col.NAME_STACK)
    return {**launch, **{k: device[k] for k in keys}}


def _scope(run: list[dict[str, Any]], level: str) -> dict[str, Any]:
    first = run[0]
    start = first[Col.TS_NS]
    end = max(r[Col.TS_NS] + (r[Col.DUR_NS] or 0) for r in run)
    module = first.get(Col.HLO_MODULE)
    if level == "xla_module":
        kind, name = Kind.USER_ANNOTATION, module or "(unnamed HLO module)"
    elif level == "xla_name_stack":
        kind, name = Kind.USER_ANNOTATION, first.get(Col.NAME_STACK)  # None: no scope (filtered out)
    else:
        kind, name = Kind.CPU_OP, first.get(Col.HLO_OP) or "(unnamed HLO op)"
    return {
        Col.PH: "X",
        Col.CAT: level,
        Col.KIND: kind,
        Col.NAME: name,
        Col.PID: first[Col.PID],
        Col.TID: first[Col.TID],
        Col.TS_NS: start,
        Col.DUR_NS: end - start,
        Col.HLO_MODULE: module,
        Col.HLO_OP: first.get(Col.HLO_OP) if level == "xla_op" else None,
        Col.PROGRAM_ID: first.get(Col.PROGRAM_ID),
        Col.NAME_STACK: first.get(Col.NAME_STACK) if level != "xla_module" else None,
    }
