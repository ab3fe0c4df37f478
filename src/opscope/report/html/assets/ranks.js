/* Ranks report (opscope.ranks/1 data): per-rank breakdown, a rank x top-kernel heatmap, and the spreads. */
"use strict";

(function () {
  const { D, fmtUs, fmtPct, fmtInt, table, chart, cards, tipHtml, shortName, colorOf } = OPS;
  const unit = D.per_step ? "per step" : "whole trace";
  document.getElementById("report-subtitle").textContent =
    `${fmtInt(D.ranks_found)} of ${fmtInt(D.world_size)} ranks · ${unit}` + (D.complete ? "" : ` · INCOMPLETE: missing ${D.missing_ranks.join(", ")}`);
  const ranks = D.ranks;
  const util = ranks.map((r) => r.utilization || 0);
  const items = [
    { key: "ranks", label: "Ranks", value: `${fmtInt(D.ranks_found)} / ${fmtInt(D.world_size)}`, detail: D.complete ? "complete" : "incomplete" },
    { key: "utilization", label: "GPU utilization", value: `${fmtPct(Math.min(...util))} – ${fmtPct(Math.max(...util))}`, detail: "lowest – highest rank" },
  ];
  if (D.straggler) items.push({ key: "straggler", label: "Straggler", value: `rank ${D.straggler.rank}`, detail: D.straggler.reason });
  if (D.collective_skew && D.collective_skew.matched) items.push({ key: "skew", label: "Collective skew", value: fmtUs(D.collective_skew.p50_us),
    detail: `median over ${fmtInt(D.collective_skew.matched)} collectives; max ${fmtUs(D.collective_skew.max_us)}` });
  cards("headline", items);

  // Per rank: compute only, overlap, communication only, other busy, idle (stacks add up to busy + idle).
  const parts = [
    ["compute only", (r) => r.compute_us - r.overlap_us, "#4e79a7"],
    ["compute ∩ communication", (r) => r.overlap_us, "#b07aa1"],
    ["communication only", (r) => r.communication_us - r.overlap_us, "#ff9da7"],
    ["other busy", (r) => Math.max(r.busy_us - (r.compute_us + r.communication_us - r.overlap_us), 0), "#9c755f"],
    ["idle", (r) => r.idle_us, colorOf("idle")],
  ];
  chart("breakdown-chart", {
    legend: { top: 0 },
    grid: { left: 80, right: 20, top: 36, bottom: 40 },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: (ps) => { const r = ranks[ps[0].dataIndex];
      return tipHtml(`rank ${r.rank}`, [["busy", fmtUs(r.busy_us)], ["utilization", fmtPct(r.utilization)], ...ps.map((p) => [p.seriesName, fmtUs(p.value)])]); } },
    xAxis: { type: "category", data: ranks.map((r) => `rank ${r.rank}`) },
    yAxis: OPS.usAxis(Math.max(0, ...ranks.map((r) => r.step_us || 0))),
    series: parts.map(([name, f, color]) => ({ name, type: "bar", stack: "r", itemStyle: { color }, data: ranks.map(f) })),
  });
  table(document.getElementById("ranks-table"), [
    { key: "rank", label: "Rank", kind: "int" }, { key: "steps", label: "Steps", kind: "int" },
    { key: "step_us", label: "Step / window", kind: "us" }, { key: "busy_us", label: "GPU busy", kind: "us" },
    { key: "compute_us", label: "Compute", kind: "us" }, { key: "communication_us", label: "Comm", kind: "us" },
    { key: "overlap_us", label: "Overlap", kind: "us" }, { key: "idle_us", label: "Idle", kind: "us" },
    { key: "utilization", label: "Util", kind: "pct" }, { key: "path", label: "Trace", kind: "text" },
  ], ranks, { filter: false, id: "rank-rows", sortKey: "rank", sortDir: 1 });

  // Heatmap: one row per top kernel, one column per rank, colour = time / the kernel's median over ranks.
  const kernels = D.kernels;
  const cells = [];
  kernels.forEach((k, y) => k.per_rank_us.forEach((v, x) => {
    const ratio = k.median_us ? (v || 0) / k.median_us : null;
    cells.push([x, y, ratio === null ? null : Math.round(ratio * 1000) / 1000]);
  }));
  chart("heatmap-chart", {
    grid: { left: 320, right: 30, top: 10, bottom: 80 },
    tooltip: { formatter: (p) => { const k = kernels[p.data[1]], r = ranks[p.data[0]];
      return tipHtml(k.name, [["rank", r ? r.rank : p.data[0]], ["time", fmtUs(k.per_rank_us[p.data[0]])], ["median over ranks", fmtUs(k.median_us)],
        ["relative to median", p.data[2] === null ? "—" : p.data[2].toFixed(2) + "×"]]); } },
    xAxis: { type: "category", data: ranks.map((r) => `rank ${r.rank}`), splitArea: { show: true } },
    yAxis: { type: "category", inverse: true, data: kernels.map((k) => k.short_name || shortName(k.name, 50)), axisLabel: { fontSize: 11 } },
    visualMap: { min: 0.5, max: 1.5, calculable: true, orient: "horizontal", left: "center", bottom: 0,
                 inRange: { color: ["#2c7bb6", "#f7f7f7", "#d7191c"] }, text: ["1.5× median", "0.5×"] },
    series: [{ type: "heatmap", data: cells, label: { show: ranks.length <= 16, fontSize: 10,
               formatter: (p) => (p.data[2] === null ? "" : p.data[2].toFixed(2)) } }],
  });

  const spreadColumns = [
    { key: "name", label: "Name", kind: "name" }, { key: "mean_us", label: "Mean", kind: "us" },
    { key: "min_us", label: "Min", kind: "us" }, { key: "max_us", label: "Max", kind: "us" },
    { key: "worst_rank", label: "Worst rank", kind: "int" }, { key: "excess", label: "Over median", kind: "pct" },
    { key: "flagged", label: "Flag", kind: "text", get: (s) => (s.flagged ? "!" : "") },
    { key: "calls", label: "Calls (all)", kind: "int" }, { key: "call_p50_us", label: "p50/call", kind: "us" },
    { key: "call_p99_us", label: "p99/call", kind: "us" },
  ];
  table(document.getElementById("kernels-table"), spreadColumns, kernels, { id: "kernel-spread" });
  table(document.getElementById("ops-table"), spreadColumns, D.ops, { id: "op-spread" });
  OPS.alerts(D.mismatches);
  OPS.about(D.sources, D.warnings);
  window.opscopeReady = performance.now();
})();
