/* Efficiency view: a roofline (GEMM / convolution / attention ops as points, sized by their time, against the
   device's bandwidth and compute roofs) and the report's ops table: every op with GPU time, with the efficiency
   columns where it is sized. On a trace without GPU activity (E.basis "cpu") the same figures over the ops' CPU
   time. Data: D.efficiency. */
"use strict";

(function () {
  const { D, S, el, fmtUs, fmtInt, table, chart, tipHtml, shortName, colorOf } = OPS;
  const E = D.efficiency;
  if (!E) return;
  const facts = document.getElementById("efficiency-facts");
  const P = E.peaks;
  const cpu = E.basis === "cpu";
  const TIME = cpu ? "CPU time" : "GPU time";
  // a CPU reaches GFLOP/s and GB/s: the same figures, in units that show them
  const SCALE = cpu ? 1e3 : 1, FLOPS = cpu ? "GFLOP/s" : "TFLOP/s", BYTES = cpu ? "GB/s" : "TB/s";
  const rate = (v) => (v === null || v === undefined ? null : v * SCALE);
  const device = P ? `${E.device} → ${P.name} (${P.source})`
    : cpu ? "the CPU: not in the peak table, no roofs or percentages"
    : `${E.device || "no device recorded"}: not in the peak table, no roofs or percentages`;
  const sized = cpu ? `${fmtUs(E.sized_time_us)} of ${fmtUs(E.time_us)} CPU operator time` : `${fmtUs(E.sized_gpu_time_us)} of ${fmtUs(E.gpu_time_us)} GPU time`;
  if (cpu) document.getElementById("efficiency-ops-title").textContent = "Ops by CPU time: achieved GFLOP/s, GB/s, bound";
  for (const [k, v] of [["device", device], ["sized ops", sized]]) {
    const span = el("span", null, k + ": "); span.append(el("b", { "data-fact": k }, v)); facts.append(span);
  }
  const fmt = (v, d) => (v === null || v === undefined ? "—" : Number(v).toFixed(d));
  const points = E.rows.filter((r) => r.achieved_tflops !== null && r.intensity_flops_per_byte > 0);
  if (!points.length) {
    OPS.empty("efficiency-chart", E.rows.length ? "No GEMM, convolution or attention op to place on the roofline."
      : E.why_nothing_sized || "No op could be sized.");
  } else {
    const maxT = Math.max(...points.map((r) => r.time_us));
    const xs = points.map((r) => r.intensity_flops_per_byte);
    let lo = Math.min(...xs) / 4, hi = Math.max(...xs) * 4;
    const series = [{
      name: "ops", type: "scatter",
      data: points.map((r) => ({ value: [r.intensity_flops_per_byte, rate(r.achieved_tflops)],
        symbolSize: 6 + 34 * Math.sqrt(r.time_us / maxT), itemStyle: { color: colorOf(r.family === "conv" ? "convolution" : r.family), opacity: 0.75 } })),
      tooltip: { formatter: (p) => { const r = points[p.dataIndex];
        return tipHtml(S(r.op), [["shape", r.shape || "—"], ["dtype", r.dtype], [TIME, fmtUs(r.time_us)], ["calls", fmtInt(r.calls)],
          [FLOPS, fmt(rate(r.achieved_tflops), 2)], ["% of peak", fmt(r.pct_of_peak_compute, 1)], ["FLOP/byte", fmt(r.intensity_flops_per_byte, 1)],
          ["bound", r.bound || "—"], ["model", r.model]]); } },
    }];
    if (P && P.bandwidth_tbps) {  // roofs: min(peak, bandwidth x intensity), one per dtype present
      const dtypes = [...new Set(points.map((r) => r.dtype))].filter((d) => P.tflops[d]);
      for (const d of dtypes) { lo = Math.min(lo, P.tflops[d] / P.bandwidth_tbps / 8); hi = Math.max(hi, P.tflops[d] / P.bandwidth_tbps * 8); }
      for (const d of dtypes) {
        const ridge = P.tflops[d] / P.bandwidth_tbps;
        series.push({ name: `${d} roof`, type: "line", symbol: "none", silent: true, lineStyle: { width: 1.5 },
          data: [[lo, P.bandwidth_tbps * lo], [ridge, P.tflops[d]], [hi, P.tflops[d]]] });
      }
    }
    lo = 10 ** Math.floor(Math.log10(lo)); hi = 10 ** Math.ceil(Math.log10(hi));  // whole decades
    for (const s of series.slice(1)) { s.data[0] = [lo, P.bandwidth_tbps * lo]; s.data[2][0] = hi; }
    chart("efficiency-chart", {
      legend: { top: 0 }, grid: { left: 70, right: 30, top: 36, bottom: 50 }, tooltip: { trigger: "item" },
      xAxis: { type: "log", name: "FLOP / byte", nameLocation: "middle", nameGap: 28, min: lo, max: hi },
      yAxis: { type: "log", name: FLOPS },
      series,
    });
  }
  // One ops table: the sized rows and the unsized ops (their time, no efficiency figures), by time.
  const ops = [...E.rows, ...E.unsized.map((u) => ({ ...u, dtype: null, achieved_tflops: null, pct_of_peak_compute: null,
    achieved_tbps: null, pct_of_peak_bandwidth: null, bound: null, model: null }))];
  table(document.getElementById("efficiency-table"), [
    { key: "op", label: "Op", kind: "name", get: (r) => S(r.op) },
    { key: "shape", label: "Shape", kind: "text", get: (r) => shortName(r.shape || "—", 60) },
    { key: "dtype", label: "dtype", kind: "text", get: (r) => r.dtype || "—" },
    { key: "calls", label: "Calls", kind: "int" },
    { key: "time_us", label: TIME, kind: "us" },
    { key: "achieved_tflops", label: FLOPS, kind: "float", get: (r) => rate(r.achieved_tflops) },
    { key: "pct_of_peak_compute", label: "% peak FLOP/s", kind: "float" },
    { key: "achieved_tbps", label: BYTES, kind: "float", get: (r) => rate(r.achieved_tbps) },
    { key: "pct_of_peak_bandwidth", label: "% peak BW", kind: "float" },
    { key: "bound", label: "Bound", kind: "text", get: (r) => r.bound || "—" },
    { key: "model", label: "Model", kind: "text", get: (r) => r.reason ? `not sized: ${r.reason}` : r.model },
  ], ops, { id: "efficiency-rows", sortKey: "time_us", sortDir: -1 });
  const note = el("p", { class: "note", id: "efficiency-unsized" },
    (cpu ? "The figures are over the operators' CPU time (a sized op's CPU total, the ops inside it included; an unsized op's self time); "
      : "The report's ops table: every op with GPU time, each GPU event counted once (sized + unsized = GPU time): in the outermost sized op call around its launch, else in the op that launched it, else in (no op); ") +
    "the efficiency columns where the model sizes the op, \u2014 and the reason where it cannot (never guessed). Definitions: docs/efficiency.md.");
  document.getElementById("efficiency-table").after(note);
})();
