"""Shared pieces of the history tests: the database backends (a SQLite file; a fresh schema on the PostgreSQL
server named by $OPSCOPE_TEST_POSTGRES) and real traces whose GPU durations are perturbed by a seeded generator.

The perturbation is the tests' own (hand-made noise over a real trace): every GPU event's duration is multiplied
by a log-normal factor (sigma `noise`), and the kernels whose names contain `slow` by `factor` on top."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from conftest import corpus_path

BERT = "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
BERT_MI300 = "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz"
ALEXNET = "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz"
# The layer-norm kernel of the BERT trace (10 calls, 10% of its GPU time): the step change is put on it.
TARGET = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)


def postgres_url() -> str | None:
    """The test server's URL; skips (or, with OPSCOPE_REQUIRE_POSTGRES=1 as in CI, fails) when there is none."""
    url = os.environ.get("OPSCOPE_TEST_POSTGRES")
    required = os.environ.get("OPSCOPE_REQUIRE_POSTGRES") == "1"
    why = None
    if not url:
        why = "no PostgreSQL server: set OPSCOPE_TEST_POSTGRES=postgresql://... (.ci/postgres.sh starts one)"
    else:
        try:
            import psycopg

            psycopg.connect(url, connect_timeout=5).close()
        except Exception as exc:
            why = f"PostgreSQL server {url} unreachable: {str(exc).strip().splitlines()[0]}"
    if why is not None:
        if required:
            pytest.fail(why)
        pytest.skip(why)
    return url


def make_db(backend: str, tmp_path) -> Iterator[str]:
    if backend == "sqlite":
        yield str(tmp_path / "history.sqlite")
        return
    import psycopg

    url = postgres_url()
    assert url is not None
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> Iterator[str]:
    yield from make_db(request.param, tmp_path)


_TRACES: dict[str, object] = {}


def real_trace(relative: str = BERT):
    """The real trace, loaded once per test session."""
    if relative not in _TRACES:
        import opscope

        _TRACES[relative] = opscope.load(corpus_path(relative), cache=False)
    return _TRACES[relative]


def perturbed(
    seed: int, *, factor: float = 1.0, slow: str = TARGET, noise: float = 0.03, relative: str = BERT
):
    """The real trace with seeded log-normal noise on every GPU duration, and `factor` on the kernels named
    `slow`. Each result is a new run (its event table differs, so its identity does)."""
    from opscope.model.schema import GPU_KINDS, Col
    from opscope.model.trace import Trace

    base = real_trace(relative)
    events = base.events
    rng = np.random.default_rng(seed)
    noise_factor = rng.lognormal(0.0, noise, events.height)
    gpu = events[Col.KIND].cast(pl.String).is_in(list(GPU_KINDS)).to_numpy()
    named = (events[Col.NAME].cast(pl.String) == slow).fill_null(False).to_numpy()
    scale = np.where(gpu, noise_factor * np.where(named, factor, 1.0), 1.0)
    factors = pl.Series("_scale", scale, dtype=pl.Float64)
    frame = events.with_columns((pl.col(Col.DUR_NS) * factors).round(0).cast(pl.Int64).alias(Col.DUR_NS))
    return Trace.from_frame(replace(base.meta, path=f"perturbed-{seed}-{factor}"), frame)
