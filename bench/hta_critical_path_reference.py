"""Regenerate tests/data/hta_critical_path.json: HolisticTraceAnalysis's critical-path breakdown on the corpus traces
where it runs, the reference `tests/test_critical_path_hta.py` compares opscope against.

Needs HolisticTraceAnalysis (not a dependency of opscope or its tests) in a virtual environment of its own, with
pandas < 3 (HTA 0.5.0 fails on pandas 3: "Cannot specify both 'axis' and 'index'/'columns'"):
`python -m venv /tmp/hta && /tmp/hta/bin/pip install HolisticTraceAnalysis==0.5.0 'pandas<3'`.
Run: `/tmp/hta/bin/python bench/hta_critical_path_reference.py ../shared/traces > tests/data/hta_critical_path.json`.
Each case names the trace, HTA's annotation and instance; the breakdown is HTA's `bound_by` sum of edge weights
in microseconds (`get_critical_path_breakdown()`), and `failed` records the traces where HTA raises.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import traceback
from importlib.metadata import version
from pathlib import Path

CASES = [  # (trace, annotation, instance_id)
    ("hta/critical_path_cuda_event_sync_event_sync_trace.json.gz", "ProfilerStep", 0),
    ("hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz", "", 0),
    ("hta/critical_path_simple_add_benchmark_result_493459_1694039959_trace.json.gz", "", 0),
    ("hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz", "", 0),
    ("hta/ns_resolution_trace_rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", "ProfilerStep", 0),
    ("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz", "ProfilerStep", 0),
    ("hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz", "ProfilerStep", 0),
    (
        "kineto/tb_plugin_samples_resnet50_autograd_api_num_workers_0_worker0.pt.trace.json.gz",
        "ProfilerStep",
        0,
    ),
    ("kineto/plugin_samples_resnet50_num_workers_0_worker0.pt.trace.json.gz", "ProfilerStep", 0),
]


def run(root: Path, trace: str, annotation: str, instance: int) -> dict[str, object]:
    from hta.trace_analysis import TraceAnalysis

    src = root / trace
    with tempfile.TemporaryDirectory() as tmp:
        link = Path(tmp) / src.name
        link.symlink_to(src)
        analyzer = TraceAnalysis(trace_files={0: str(link)}, trace_dir=tmp)
        result = analyzer.critical_path_analysis(rank=0, annotation=annotation, instance_id=instance)
        if result is None:
            raise RuntimeError(f"annotation {annotation!r} not found")
        graph, ok = result
        if not ok:
            raise RuntimeError("critical path failed")
        edges = graph.get_critical_path_breakdown()
        by = edges.groupby("bound_by").duration.sum()
        return {
            "breakdown_us": {k or "dependency": round(float(v), 3) for k, v in by.items()},
            "path_us": round(float(edges.duration.sum()), 3),
        }


def main() -> int:
    logging.disable(logging.WARNING)
    root = Path(sys.argv[1])
    out: dict[str, object] = {"hta_version": version("HolisticTraceAnalysis"), "cases": []}
    for trace, annotation, instance in CASES:
        case: dict[str, object] = {"trace": trace, "annotation": annotation, "instance": instance}
        try:
            case.update(run(root, trace, annotation, instance))
        except Exception as exc:  # record HTA's failure: the point is that opscope works there
            case["failed"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            traceback.print_exc(limit=2, file=sys.stderr)
        out["cases"].append(case)  # type: ignore[attr-defined]
        print(trace, case.get("breakdown_us", case.get("failed")), file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
