"""Efficiency: achieved against possible throughput, per operator.

`shapes` reads record_shapes (Input Dims / Input type) into tensors, `families` sizes one op family each (FLOPs
and bytes per call), `peaks` holds the per-GPU peak table (data: opscope/data/gpu_peaks.json), `table` joins
those with the GPU time `ops` attributes to each op (`efficiency`), and `advice` picks the low-efficiency ops
(`low_efficiency_candidates`). Definitions: docs/efficiency.md.
"""
