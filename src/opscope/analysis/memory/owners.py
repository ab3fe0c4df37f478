"""Which CPU operator made each allocation: the innermost op on the same thread whose interval holds the event.

An event at the boundary of an op belongs to it (start <= ts <= end). Allocations made inside `aten::empty*`
(the factory that every op calls for its outputs) are charged to the nearest enclosing op that is not one of
them, shown as `parent (aten::empty_like)` with the outermost factory, since that is the op whose outputs they are. Inclusive figures walk from the charged
op up its ancestors (the op tree of the thread), counting each event once per distinct op name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.nesting import innermost_container
from opscope.analysis.base.windows import STEP_ANY, STEP_NAME
from opscope.model.schema import Col, Kind
from opscope.model.trace import Trace

CONTAINERS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
EMPTY_PREFIX = "aten::empty"
NO_OP = "(no op)"
STEP = re.compile(STEP_NAME)


@dataclass(frozen=True)
class Owners:
    """Per memory event (in the order given): the innermost op's name (None: outside every op), the label it
    is charged to, the end of the charged op instance (ns; None outside every op) and the op names on the
    chain from the charged op to the root (each once)."""

    innermost: list[str | None]
    label: list[str]
    owner_end_ns: list[int | None]
    chain: list[tuple[str, ...]]


def _thread_codes(pid: pl.Series, tid: pl.Series) -> np.ndarray:
    key = pl.DataFrame({"p": pid.fill_null(""), "t": tid.fill_null("")}).select(
        pl.concat_str(["p", "t"], separator="\x00").rank("dense").cast(pl.Int64)
    )
    return key.to_series().to_numpy()


def find_owners(trace: Trace, events: pl.DataFrame) -> Owners:
    """Owners of `events` (a `memory_events` frame)."""
    if events.height == 0:  # no [memory] events: do not read the ops at all (every report asks)
        return Owners([], [], [], [])
    ops = (
        trace.lazy()
        .filter(
            pl.col(Col.KIND).is_in(list(CONTAINERS))
            & pl.col(Col.DUR_NS).is_not_null()
            & pl.col(Col.TS_NS).is_not_null()
        )
        .select(
            pl.col(Col.NAME).cast(pl.String),
            Col.TS_NS,
            Col.DUR_NS,
            pl.col(Col.PID).cast(pl.String),
            pl.col(Col.TID).cast(pl.String),
        )
        .collect()
    )
    n_ops, n_ev = ops.height, events.height
    pid = pl.concat([ops[Col.PID], events[Col.PID]])
    tid = pl.concat([ops[Col.TID], events[Col.TID]])
    thread = _thread_codes(pid, tid)
    start = np.concatenate([ops[Col.TS_NS].to_numpy(), events[Col.TS_NS].to_numpy()]).astype(np.int64)
    end = start.copy()
    end[:n_ops] += np.maximum(ops[Col.DUR_NS].to_numpy().astype(np.int64), 0)
    can_contain = np.zeros(n_ops + n_ev, dtype=bool)
    can_contain[:n_ops] = True
    parent = innermost_container(thread, start, end, can_contain)
    # Steps fold into one name (as in the other tables): "ProfilerStep#*" holds what every step allocated.
    names: list[str] = [
        STEP_ANY if n is not None and STEP.match(n) else (n or "") for n in ops[Col.NAME].to_list()
    ]
    innermost: list[str | None] = []
    labels: list[str] = []
    ends: list[int | None] = []
    chains: list[tuple[str, ...]] = []
    chain_cache: dict[int, tuple[str, ...]] = {}
    for i in range(n_ev):
        op = int(parent[n_ops + i])
        if op < 0:
            innermost.append(None)
            labels.append(NO_OP)
            ends.append(None)
            chains.append(())
            continue
        innermost.append(names[op])
        charged, label = op, names[op]
        while names[charged].startswith(EMPTY_PREFIX) and parent[charged] >= 0:  # empty inside empty_like
            factory, charged = names[charged], int(parent[charged])
            label = f"{names[charged]} ({factory})"
        labels.append(label)
        ends.append(int(end[charged]))
        chains.append(_chain(charged, parent, names, chain_cache))
    return Owners(innermost, labels, ends, chains)


def _chain(
    op: int, parent: np.ndarray, names: list[str], cache: dict[int, tuple[str, ...]]
) -> tuple[str, ...]:
    """Distinct names from `op` up to its root, nearest first (memoised per op)."""
    path: list[int] = []
    node = op
    while node >= 0 and node not in cache and len(path) <= len(names):
        path.append(node)
        node = int(parent[node])
    above = cache.get(node, ()) if node >= 0 else ()
    for n in reversed(path):
        above = (names[n], *(x for x in above if x != names[n]))
        cache[n] = above
    return cache[op]
