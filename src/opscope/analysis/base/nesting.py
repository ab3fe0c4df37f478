"""Time nesting on one thread, vectorised: who encloses whom.

The CPU side of a trace is a forest per thread: an op's parent is the event on the same thread that started
last among those that contain it (start <= its start and end >= its end). `innermost_container` answers that
for every event at once with sorted arrays and binary lifting over a sparse table of running maxima, so the
cost is O(n log n) numpy work and no Python loop over events. Partial overlaps (an event that starts inside
another and ends after it, seen when profiler clocks round) never produce a wrong parent: the answer is always
an event that really contains the query, or none. `ancestors` expands parent pointers into (row, ancestor)
pairs by pointer jumping, one vectorised join per tree level.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import polars as pl

from opscope.analysis.base.arrays import take_or

RANKED_SORT_MIN = 100_000  # from this many rows, keys that need ranking are sorted by polars (`lexsort`)


def lexsort(keys: tuple[np.ndarray, ...]) -> np.ndarray:
    """`np.lexsort(keys)` (the last key primary; stable: equal keys keep their index order), computed as one
    stable argsort of the integer keys packed into a single int64: where their ranges do not fit, the widest
    keys are first replaced by their dense ranks (same order, range at most n), and only where that does not
    suffice is it `np.lexsort`; from RANKED_SORT_MIN rows, keys that would need ranking are sorted by polars
    instead. The same permutation either way; the packed sort is several times faster on the nearly sorted
    keys of trace events (a step's start / end points: 1.3 -> 0.2 ms), where np.lexsort pays a full sort per
    key."""
    n = len(keys[0])
    if n == 0:
        return np.empty(0, dtype=np.intp)
    bounds = [(int(key.min()), int(key.max())) for key in keys]
    spans = [high - low + 1 for low, high in bounds]
    if n >= RANKED_SORT_MIN and (max(spans) > 2**62 or np.prod(np.array(spans, dtype=object)) >= 2**62):
        # a key would have to be ranked first (a sort of its own): polars sorts by all the keys at once, stably,
        # in about a third of the time (the link table's nesting of the 1 GB trace: 0.12-1.2 s -> 0.05-0.1 s)
        frame = pl.DataFrame({f"k{i}": key for i, key in enumerate(reversed(keys))})
        return (
            frame.select(pl.arg_sort_by(frame.columns, maintain_order=True))
            .to_series()
            .to_numpy()
            .astype(np.intp)
        )
    packed_keys, widths = [], []
    for key, (low, high) in zip(keys, bounds, strict=True):
        if high - low < 2**62:
            packed_keys.append(key.astype(np.int64) - low)
            widths.append(high - low + 1)
        else:  # the difference would not fit in int64: ranked at once
            distinct, rank = np.unique(key, return_inverse=True)
            packed_keys.append(rank.reshape(-1).astype(np.int64))
            widths.append(len(distinct))
    while np.prod(np.array(widths, dtype=object)) >= 2**62:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= n:
            return np.lexsort(keys)
        distinct, rank = np.unique(packed_keys[widest], return_inverse=True)
        packed_keys[widest], widths[widest] = rank.reshape(-1).astype(np.int64), len(distinct)
    packed = np.zeros(n, dtype=np.int64)
    for key, width in zip(reversed(packed_keys), reversed(widths), strict=True):
        packed *= width
        packed += key
    return np.argsort(packed, kind="stable")


def _dense_keys(thread: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Ranks of (thread, end) pairs, equal pairs equal ranks: one small int key ordered by thread, then end."""
    order = lexsort((end, thread))
    t_sorted = thread[order]
    e_sorted = end[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (t_sorted[1:] != t_sorted[:-1]) | (e_sorted[1:] != e_sorted[:-1])
    dtype = np.int32 if len(order) < 2**31 - 1 else np.int64
    ranks = np.empty(len(order), dtype=dtype)
    ranks[order] = np.cumsum(new, dtype=dtype)  # starts at 1; 0 is free for "can never contain"
    return ranks


def innermost_container(
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    can_contain: np.ndarray,
    tiebreak: np.ndarray | None = None,
) -> np.ndarray:
    """For each event i, the index of the innermost event j != i on the same thread with
    start_j <= start_i and end_j >= end_i and can_contain[j]; -1 where there is none.

    Ties on start are broken by longer duration first (the longer one is the container), then by `tiebreak`
    (smaller first = outer), then by index. Arrays are int64 (thread as integer codes), all of length n.
    """
    n = len(start)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    tb = np.zeros(n, dtype=np.int64) if tiebreak is None else tiebreak
    order = lexsort((tb, start - end, start, thread))  # then by index: a stable sort
    s_thread = thread[order]
    query = _dense_keys(s_thread, end[order])  # comparisons on ranks stay within one thread
    # A non-container may never be found: rank 0 is below every query. Earlier threads have smaller ranks.
    container = np.where(can_contain[order], query, 0).astype(query.dtype)
    found = previous_at_least(container, query)
    safe = np.maximum(found, 0)
    valid = (found >= 0) & (container[safe] >= query) & (s_thread[safe] == s_thread)
    out = np.empty(n, dtype=np.int64)
    out[order] = np.where(valid, order[safe], -1)
    return out


# running maxima of 1..32 events: a container up to 64 places back is found without the blocks
NEAR_LEVELS = 6


def previous_at_least(values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """For each i, the largest x < i with values[x] >= query[i], or -1 (non-negative integers, `values` of
    length n, `query` of its dtype). Binary lifting over running maxima: first over windows of 1 to
    2^(NEAR_LEVELS-1) values, which finds every answer within 2^NEAR_LEVELS places; the rest over the maxima of
    blocks of 2^NEAR_LEVELS values (a block-level table of running maxima), then inside the block found. The
    tables hold ~NEAR_LEVELS values per value instead of log2(n) (the 1 GB trace's 1.9 M CPU events: 21), so
    the link table's nesting writes ~45 MB instead of ~160 MB (issue 25)."""
    n = len(values)
    top = np.iinfo(values.dtype).max
    near = _window_maxima(values, NEAR_LEVELS, top)
    pos = _lift(near, np.arange(n), query)
    found = pos - 1
    out = found.copy()
    far = np.flatnonzero((found >= 0) & (values[np.maximum(found, 0)] < query))
    if len(far):
        # every value in [found, i) is below the query: the answer is at or before found - 1
        block = 1 << NEAR_LEVELS
        last = (found[far] - 1) // block  # the block holding found - 1 (-1: none)
        padded = np.zeros(-(-n // block) * block, dtype=values.dtype)  # 0: below every query
        padded[:n] = values
        maxima = padded.reshape(-1, block).max(axis=1)
        blocks = _window_maxima(maxima, max(1, len(maxima).bit_length()), top)
        chosen = _lift(blocks, last + 1, query[far]) - 1
        ok = (chosen >= 0) & (maxima[np.maximum(chosen, 0)] >= query[far])
        # inside the block found: the last value reaching the query (every later one in the block is below it)
        inner = _lift(near, np.minimum((chosen[ok] + 1) * block, n), query[far[ok]]) - 1
        out[far] = -1
        out[far[ok]] = inner
    return out


def _window_maxima(values: np.ndarray, levels: int, top: int) -> list[np.ndarray]:
    """levels[k][x] = max(values[x - 2^k + 1 .. x]), `top` where the window would start before 0 and at the
    extra last slot, so that a position of -1 never moves."""
    n = len(values)
    out = [np.append(values, np.array(top, dtype=values.dtype))]
    width = 1
    while len(out) < levels and width * 2 <= n:
        prev = out[-1]
        cur = np.full(n + 1, top, dtype=values.dtype)
        cur[width * 2 - 1 : n] = np.maximum(prev[width * 2 - 1 : n], prev[width - 1 : n - width])
        out.append(cur)
        width *= 2
    return out


def _lift(levels: list[np.ndarray], pos: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Binary lifting: each position moves left over windows whose maximum is below its query (at most
    2^len(levels) - 1 places); every position it passes holds a value below the query."""
    pos = pos.astype(np.int64, copy=True)
    for k in range(len(levels) - 1, -1, -1):
        move = levels[k][pos - 1] < query
        np.subtract(pos, 1 << k, out=pos, where=move)
    return pos


def nearest_of_kind(parent: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Given parent indices (-1 at roots) and a mask of wanted nodes, each node's nearest strict ancestor
    that is wanted (-1 if none). Pointer doubling over the unwanted ancestors, vectorised per step: each node
    points at an ancestor with only unwanted nodes between them; while that one is unwanted too, it takes
    that one's pointer (a jump twice as long), so a chain of k unwanted ancestors takes ~log2(k) steps, not
    k (1.5 M nodes with parents within 20, 5% wanted: 0.27 -> 0.07 s; 0.1% wanted: 10.3 -> 0.20 s)."""
    out = parent.copy()
    todo = np.flatnonzero((out >= 0) & ~wanted[np.maximum(out, 0)])
    steps = 0
    while len(todo) and steps <= len(parent):  # bounded even on a malformed (cyclic) parent array
        out[todo] = out[out[todo]]
        todo = todo[(out[todo] >= 0) & ~wanted[np.maximum(out[todo], 0)]]
        steps += 1
    return out


def depths(parent: np.ndarray) -> np.ndarray | None:
    """Each node's number of enclosing nodes (parent indices, -1 at roots), by pointer jumping; None when the
    parents close a cycle (a malformed trace)."""
    depth = rooted_depths(parent)
    return None if (depth < 0).any() else depth


def rooted_depths(parent: np.ndarray) -> np.ndarray:
    """As `depths`, with -1 for each node that reaches no root (on a cycle or below one) instead of None."""
    n = len(parent)
    depth = (parent >= 0).astype(np.int64)
    jump = np.where(parent >= 0, parent, np.arange(n))
    for _ in range(2 * max(n, 1).bit_length() + 2):
        if not (parent[jump] >= 0).any():  # every node points at its root
            return depth
        depth = depth + depth[jump]
        jump = jump[jump]
    return np.where(parent[jump] >= 0, -1, depth)


def subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray | None:
    """Each node's value plus those of every node it encloses, however deep (parent indices, -1 at roots):
    the deepest level first, each level added to its parents at once (one vectorised pass per level); None on
    a cycle."""
    depth = depths(parent)
    if depth is None:
        return None
    return _level_sums(parent, _by_level(depth), values)


def _by_level(depth: np.ndarray) -> list[np.ndarray]:
    """The nodes of each depth, shallowest first, each level in index order (one stable sort of the small
    depth values: a radix sort where they fit in 16 bits)."""
    deepest = int(depth.max(initial=0))
    order = np.argsort(depth.astype(np.int16) if deepest < 2**15 else depth, kind="stable")
    cuts = np.searchsorted(depth[order], np.arange(deepest + 2))
    return [order[lo:hi] for lo, hi in itertools.pairwise(cuts)]


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, starts): a stable order of `keys` (nearly sorted keys sort fast) and where each run of equal
    keys begins in it."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    return order, np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(keys) else order


def _level_sums(parent: np.ndarray, levels: list[np.ndarray], values: np.ndarray) -> np.ndarray:
    """`subtree_sums` over `_by_level`'s levels (no cycle): per level, deepest first, the level's totals summed
    per parent (a segmented sum over the level sorted by parent; `np.add.at` costs ~20x as much a node)."""
    total = values.astype(np.int64).copy()
    for group in reversed(levels[1:]):
        order, starts = _segments(parent[group])
        total[parent[group[order[starts]]]] += np.add.reduceat(total[group[order]], starts)
    return total


def preorder(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, size): each node's number in a depth-first preorder of the forest (parent indices, -1 at roots;
    siblings in index order) and the number of nodes in its subtree, itself included, so that the nodes a
    node encloses, however deep, are exactly those numbered in [first, first + size). Without recursion: the
    sizes summed up a level at a time, the numbers handed down a level at a time (a node's number: its
    parent's, plus one, plus the sizes of its siblings before it). A node on a cycle of parents (a malformed
    table) counts as a root."""
    n = len(parent)
    depth = rooted_depths(parent)
    up = np.where(depth > 0, parent, -1)  # a node on a cycle, or below one, starts a tree of its own
    if (depth < 0).any():
        depth = rooted_depths(up)
    levels = _by_level(depth)
    size = _level_sums(up, levels, np.ones(n, dtype=np.int64))
    first = np.empty(n, dtype=np.int64)
    for level, at in enumerate(levels):
        order, starts = _segments(up[at])
        at = at[order]
        before = np.cumsum(size[at]) - size[at]
        run = np.zeros(len(at), dtype=bool)
        run[starts] = True
        offset = before - np.maximum.accumulate(np.where(run, before, 0))
        first[at] = offset if level == 0 else first[up[at]] + 1 + offset
    return first, size


def has_equal_ancestor(parent: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Whether some strictly enclosing node has the same code (parent indices, -1 at roots): a walk up from
    every node at once, one step per level, dropping the nodes that found one or reached a root."""
    found = np.zeros(len(parent), dtype=bool)
    todo = np.flatnonzero(parent >= 0)
    at = parent[todo]
    steps = 0
    while len(todo) and steps <= len(parent):  # bounded even on a malformed (cyclic) parent array
        hit = codes[at] == codes[todo]
        found[todo[hit]] = True
        keep = ~hit & (parent[at] >= 0)
        todo, at = todo[keep], parent[at[keep]]
        steps += 1
    return found


def chains(parent: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nodes on the paths from the nodes `starts` up to their roots (parent indices, -1 at roots), sorted,
    and each one's parent as an index into them (-1 at roots): the part of a tree that sums over the nodes
    enclosing `starts` need, each node visited once (so the walk ends on parents that close a cycle too; the
    sums over the result then say so)."""
    seen = np.zeros(len(parent), dtype=bool)
    seen[starts] = True
    frontier = np.flatnonzero(seen)
    while len(frontier):
        up = parent[frontier]
        up = up[up >= 0]
        up = up[~seen[up]]  # each node once: marked as it is reached, repeats dropped by the mask below
        fresh = np.zeros(len(parent), dtype=bool)
        fresh[up] = True
        seen |= fresh
        frontier = np.flatnonzero(fresh)
    nodes = np.flatnonzero(seen)
    up = parent[nodes]
    return nodes, np.where(up >= 0, np.searchsorted(nodes, np.maximum(up, 0)), -1)


@dataclass(frozen=True, eq=False)
class RowTree:
    """A parent table (`row`, `up`: the enclosing row, null at roots) positionally: `rows` sorted and `parent`
    (the position of each one's enclosing row, -1 where that row is not in the table). Questions about
    enclosing rows (the nearest one with a property, the outermost, sums up the tree) are walks over it, where
    (row, ancestor) pairs hold rows x depth entries (~10 M op pairs on the 1 GB benchmark trace, issue 25)."""

    rows: np.ndarray
    parent: np.ndarray
    row: str = "row"

    @classmethod
    def of(cls, frame: pl.DataFrame, row: str = "row", up: str = "parent_row") -> RowTree:
        table = frame.select(row, up)
        if not table[row].is_sorted():  # scopes come in row order: no sort of 1.5 M rows for nothing
            table = table.sort(row)
        rows = table[row].to_numpy().astype(np.int64)
        return cls(rows=rows, parent=positions(rows, table[up].fill_null(-1).to_numpy()), row=row)

    def find(self, rows: np.ndarray) -> np.ndarray:
        """The position of each of `rows` (-1 where it is not in the table)."""
        return positions(self.rows, rows)

    def flags(self, rows: pl.Series) -> np.ndarray:
        """A mask over the positions: True at `rows`."""
        mask = np.zeros(len(self.rows), dtype=bool)
        at = self.find(rows.to_numpy())
        mask[at[at >= 0]] = True
        return mask

    def aligned(self, frame: pl.DataFrame, column: str) -> np.ndarray:
        """`column` of `frame` (one row per table row: `row` and `column`) in the order of the positions."""
        return frame.sort(self.row)[column].to_numpy()

    def nearest(self, wanted: np.ndarray) -> np.ndarray:
        """Each row's nearest strictly enclosing row where `wanted` (-1: none)."""
        return nearest_of_kind(self.parent, wanted)

    def outermost(self, wanted: np.ndarray) -> np.ndarray:
        """Each row's outermost enclosing-or-itself row where `wanted` (-1: none): the nearest one, then the
        nearest above that, to the top, by pointer jumping."""
        up = self.nearest(wanted)
        own = np.where(wanted, np.arange(len(wanted)), up)
        top = np.where(up >= 0, up, np.arange(len(wanted)))
        for _ in range(2 * max(len(top), 1).bit_length() + 2):
            nxt = top[top]
            if np.array_equal(nxt, top):
                break
            top = nxt
        return take_or(top, own, -1)


DENSE_LOOKUP_MIN = 4096  # questions from which `positions` considers a lookup table


def positions(sorted_rows: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The position of each of `rows` in `sorted_rows` (-1 where absent; the first of equal rows). Many
    questions into dense, strictly increasing rows (a table's row numbers: the scopes' parents, 1.5 M into
    1.5 M on the 1 GB benchmark trace) are answered by a lookup table over their range, O(n), instead of a
    binary search each (random reads over the whole array: 2x slower there); else by binary search."""
    rows = np.asarray(rows, dtype=np.int64)
    n = len(sorted_rows)
    if n == 0:
        return np.full(len(rows), -1, dtype=np.int64)
    lo, hi = int(sorted_rows[0]), int(sorted_rows[-1])
    if (
        len(rows) >= DENSE_LOOKUP_MIN
        and hi - lo < 4 * (n + len(rows))
        and np.all(sorted_rows[1:] > sorted_rows[:-1])
    ):
        lookup = np.full(hi - lo + 1, -1, dtype=np.int64)
        lookup[np.asarray(sorted_rows, dtype=np.int64) - lo] = np.arange(n)
        inside = (rows >= lo) & (rows <= hi)
        out = np.full(len(rows), -1, dtype=np.int64)
        out[inside] = lookup[rows[inside] - lo]
        return out
    at = np.minimum(np.searchsorted(sorted_rows, rows), n - 1)
    return np.where(sorted_rows[at] == rows, at, -1).astype(np.int64)


def filled(values: pl.Series, missing: int) -> np.ndarray:
    """`values` as a numpy array with `missing` where null: without nulls (most columns of a step's graph)
    the column's own buffer, with no polars query (`fill_null` costs ~0.1 ms even then; a step's graph
    reads a dozen such columns)."""
    if values.null_count() == 0:
        return values.to_numpy()
    return values.fill_null(missing).to_numpy()


def at_positions(values: pl.Series, at: np.ndarray) -> pl.Series:
    """`values` at the positions `at` (`positions`' answer), null where a position is -1: a left join on a
    row-ordered table by binary search instead of hashing it."""
    index = pl.select(pl.when(pl.Series(at) >= 0).then(pl.Series(at))).to_series()
    return values.gather(index) if values.len() else values.clear(len(at))


def ancestors(
    tree: pl.DataFrame, starts: pl.Series | None = None, row: str = "row", up: str = "parent_row"
) -> pl.DataFrame:
    """(row, ancestor, level) pairs from a parent table (`row`, `up`, null at roots) for the rows `starts`
    (default: all), each row itself included at level 0. One join per tree level; the work is the number of
    pairs produced."""
    links = tree.select(pl.col(row), pl.col(up)).filter(pl.col(up).is_not_null())
    begin = tree.select(row) if starts is None else starts.alias(row).to_frame()
    pairs = [
        begin.select(pl.col(row), pl.col(row).alias("ancestor"), pl.lit(0, dtype=pl.Int32).alias("level"))
    ]
    frontier = begin.join(links, on=row, how="inner").select(pl.col(row), pl.col(up).alias("ancestor"))
    level = 1
    while frontier.height and level <= tree.height:  # a malformed parent cycle cannot loop forever
        pairs.append(frontier.with_columns(pl.lit(level, dtype=pl.Int32).alias("level")))
        step = links.rename({row: "ancestor", up: "_next"})
        frontier = frontier.join(step, on="ancestor", how="inner").select(
            pl.col(row), pl.col("_next").alias("ancestor")
        )
        level += 1
    return pl.concat(pairs)
