/* Trace report: headline cards, top-kernels chart and table, categories, steps, launch delay, memcpy. */
"use strict";

(function () {
  const { D, S, el, esc, fmtUs, fmtPct, fmtInt, fmtBytes, colorOf, table, chart, cards, tipHtml, shortName, empty } = OPS;
  const NO_GPU = "No GPU kernels, memcpys or memsets in this trace (a CPU-only capture?).";
  const H = D.headline;

  document.getElementById("report-subtitle").textContent =
    `${D.trace.path} · ${D.trace.devices.join(", ") || "no GPU recorded"} · ${fmtInt(D.trace.events)} events, ${fmtInt(D.trace.kernels)} kernels`;

  const devDetail = H.devices.length > 1
    ? H.devices.map((d) => `GPU ${d.device}: ${fmtPct(d.utilization)}`).join(", ") : "union of GPU activity / window";
  cards("headline", [
    { key: "window", label: "Window", value: fmtUs(H.window_us), detail: "first to last GPU or CPU event" },
    { key: "busy", label: "GPU busy", value: fmtPct(H.busy_pct / 100), detail: devDetail },
    { key: "idle", label: "GPU idle", value: fmtPct(H.idle_pct / 100), detail: "window − busy" },
    { key: "top-category", label: "Top category", value: H.top_category || "—",
      detail: H.top_category ? `${fmtPct(H.top_category_share)} of GPU time` : "" },
    { key: "gpu-time", label: "GPU time", value: fmtUs(H.gpu_time_us), detail: "sum of activity durations" },
  ]);

  // Top kernels chart + full table.
  const rows = D.kernels.rows;
  const top = rows.slice(0, 20).reverse();
  if (!rows.length) empty("kernels-chart", NO_GPU);
  else chart("kernels-chart", {
    grid: { left: 330, right: 90, top: 10, bottom: 30 },
    tooltip: { trigger: "item", formatter: (p) => { const r = top[p.dataIndex];
      return tipHtml(S(r.name), [["total", fmtUs(r.total_us)], ["share", fmtPct(r.share)], ["calls", fmtInt(r.calls)], ["mean", fmtUs(r.avg_us)], ["category", r.category]]); } },
    xAxis: OPS.usAxis(Math.max(0, ...top.map((r) => r.total_us || 0))),
    yAxis: { type: "category", data: top.map((r) => S(r.short_name)), axisLabel: { fontSize: 11 } },
    series: [{ type: "bar", data: top.map((r) => ({ value: r.total_us, itemStyle: { color: colorOf(r.category) } })),
               label: { show: true, position: "right", formatter: (p) => fmtPct(top[p.dataIndex].share) } }],
  });
  table(document.getElementById("kernels-table"), [
    { key: "name", label: "Name", kind: "name", get: (r) => S(r.name) },
    { key: "kind", label: "Kind", kind: "text" },
    { key: "category", label: "Category", kind: "text" },
    { key: "calls", label: "Calls", kind: "int" },
    { key: "total_us", label: "Total", kind: "us" },
    { key: "avg_us", label: "Mean", kind: "us" },
    { key: "min_us", label: "Min", kind: "us" },
    { key: "max_us", label: "Max", kind: "us" },
    { key: "median_us", label: "Median", kind: "us" },
    { key: "share", label: "Share", kind: "pct" },
    // `report --metrics`: the joined Nsight Compute means of each kernel's profiled launches
    ...(D.kernels.ncu && D.kernels.ncu.matched_launches ? [
      { key: "ncu_launches", label: "ncu launches", kind: "int", get: (r) => (r.ncu ? r.ncu.launches : null) },
      { key: "ncu_sm", label: "SM %", kind: "float", get: (r) => (r.ncu ? r.ncu.sm_throughput_pct : null) },
      { key: "ncu_mem", label: "Mem %", kind: "float", get: (r) => (r.ncu ? r.ncu.memory_throughput_pct : null) },
      { key: "ncu_occ", label: "Ach occ %", kind: "float", get: (r) => (r.ncu ? r.ncu.achieved_occupancy_pct : null) },
      { key: "ncu_bound", label: "Bound", kind: "text", get: (r) => (r.ncu && r.ncu.bound) || "—" },
    ] : []),
  ], rows, { id: "kernel-table", sortKey: "total_us", sortDir: -1 });
  const ncu = D.kernels.ncu;
  if (ncu) {  // how many profiled launches the join paired (none: the metrics are not shown)
    document.getElementById("kernels-table").after(el("p", { class: "note", id: "kernels-ncu" },
      `Nsight Compute (${ncu.path}): ${fmtInt(ncu.matched_launches)} of ${fmtInt(ncu.profiled_launches)} profiled ` +
      "launches matched to trace kernels by name and launch order" +
      (ncu.matched_launches ? "." : "; no metrics joined (opscope ncu FILE reads the export on its own).")));
  }
  const rest = D.kernels.rest;
  if (rest) {  // the page carries the heaviest rows only; say what was left out and where every row is
    const note = el("p", { class: "note", id: "kernels-capped" },
      `Showing the ${fmtInt(rows.length)} rows with the most GPU time of ${fmtInt(D.kernels.rows_total)}; ` +
      `the other ${fmtInt(rest.rows)} hold ${fmtUs(rest.total_us)} (${fmtPct(rest.share)} of GPU time, ` +
      `${fmtInt(rest.calls)} calls). `);
    const full = D.kernels.full;
    if (full) {
      note.append("Every row: ");
      full.forEach((name, i) => { if (i) note.append(", "); note.append(el("a", { href: encodeURI(name) }, name)); });
      note.append(" (beside this page).");
    } else note.append("Every row: opscope summary --top 0 --format csv.");
    document.getElementById("kernels-table").after(note);
  }

  // Categories.
  const cats = D.categories;
  if (!cats.length) empty("categories-chart", NO_GPU);
  else chart("categories-chart", {
    tooltip: { trigger: "item", formatter: (p) => { const c = cats[p.dataIndex];
      return tipHtml(c.category, [["GPU time", fmtUs(c.total_us)], ["share", fmtPct(c.share)], ["calls", fmtInt(c.calls)]]); } },
    grid: { left: 120, right: 90, top: 10, bottom: 30 },
    xAxis: OPS.usAxis(Math.max(0, ...cats.map((c) => c.total_us || 0))),
    yAxis: { type: "category", inverse: true, data: cats.map((c) => c.category) },
    series: [{ type: "bar", data: cats.map((c) => ({ value: c.total_us, itemStyle: { color: colorOf(c.category) } })),
               label: { show: true, position: "right", formatter: (p) => fmtPct(cats[p.dataIndex].share) } }],
  });
  table(document.getElementById("categories-table"), [
    { key: "category", label: "Category", kind: "text" }, { key: "calls", label: "Calls", kind: "int" },
    { key: "total_us", label: "GPU time", kind: "us" }, { key: "share", label: "Share", kind: "pct" },
  ], cats, { filter: false, id: "category-table" });

  // Steps: GPU time per category stacked, plus idle (wall − busy); without GPU activity, the CPU operators' time
  // and the rest of the step (Python and framework work between operators), not a GPU that was never there.
  const steps = D.steps;
  const gpuPanels = (D.panels || []).includes("kernels");
  if (!steps.length) {
    document.getElementById("steps-chart").replaceWith(el("p", { class: "note" }, "No ProfilerStep#N annotations in this trace."));
  } else if (!gpuPanels) {
    const cpuSeries = [
      { name: "CPU operators", color: "#4e79a7", get: (s) => s.cpu_busy_us || 0 },
      { name: "between operators (Python, framework)", color: colorOf("idle"), get: (s) => Math.max(s.wall_us - (s.cpu_busy_us || 0), 0) },
    ];
    chart("steps-chart", {
      legend: { top: 0 },
      grid: { left: 80, right: 20, top: 36, bottom: 40 },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: (ps) => { const s = steps[ps[0].dataIndex];
        return tipHtml(s.name, [["wall", fmtUs(s.wall_us)], ...ps.map((p) => [p.seriesName, fmtUs(p.value)])]); } },
      xAxis: { type: "category", data: steps.map((s) => s.name.replace("ProfilerStep", "step ")) },
      yAxis: OPS.usAxis(Math.max(0, ...steps.map((s) => s.wall_us || 0))),
      series: cpuSeries.map((c) => ({ name: c.name, type: "bar", stack: "cpu", itemStyle: { color: c.color }, data: steps.map(c.get) })),
    });
    document.getElementById("steps-chart").after(el("p", { class: "note", id: "steps-note" },
      "Each step's wall time: the time at least one CPU operator was running, and the rest."));
  } else {
    const catNames = [...new Set(steps.flatMap((s) => Object.keys(s.by_category)))];
    const series = catNames.map((c) => ({ name: c, type: "bar", stack: "gpu", itemStyle: { color: colorOf(c) },
      data: steps.map((s) => s.by_category[c] || 0) }));
    series.push({ name: "idle", type: "bar", stack: "gpu", itemStyle: { color: colorOf("idle") },
      data: steps.map((s) => Math.max(s.wall_us - s.busy_us, 0)) });
    chart("steps-chart", {
      legend: { top: 0 },
      grid: { left: 80, right: 20, top: 36, bottom: 40 },
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: (ps) => { const s = steps[ps[0].dataIndex];
        return tipHtml(s.name, [["wall", fmtUs(s.wall_us)], ["GPU busy", fmtUs(s.busy_us)], ...ps.map((p) => [p.seriesName, fmtUs(p.value)])]); } },
      xAxis: { type: "category", data: steps.map((s) => s.name.replace("ProfilerStep", "step ")) },
      yAxis: OPS.usAxis(Math.max(0, ...steps.map((s) => Math.max(s.wall_us || 0, s.busy_us || 0)))),
      series,
    });
  }

  // Launch delay histogram.
  const L = D.launch_delay;
  const facts = document.getElementById("launch-delay-facts");
  for (const [k, v] of [["kernels measured", fmtInt(L.kernels)], ["median", fmtUs(L.p50_us)], ["p95", fmtUs(L.p95_us)], ["max", fmtUs(L.max_us)], ["mean", fmtUs(L.mean_us)]]) {
    const span = el("span", null, k + ": "); span.append(el("b", { "data-fact": k }, v)); facts.append(span);
  }
  OPS.launchDelayNote(document.getElementById("launch-delay-explain"), L);
  if (L.counts.length) {
    // Bin edges in one unit (µs, the axis name), with thousands separators; the chart keeps room for them.
    const edge = (us) => (us === 0 ? "0" : Number(us).toLocaleString("en-US", { maximumFractionDigits: 2 }));
    const labels = L.counts.map((_, i) => `${edge(L.edges_us[i])}–${i + 2 < L.edges_us.length ? edge(L.edges_us[i + 1]) : "∞"}`);
    chart("launch-delay-chart", {
      grid: { left: 60, right: 30, top: 10, bottom: 20, containLabel: true },
      tooltip: { trigger: "item", formatter: (p) => tipHtml(labels[p.dataIndex] + " µs", [["kernels", fmtInt(p.value)]]) },
      xAxis: { type: "category", name: "µs", nameLocation: "end", data: labels, axisLabel: { rotate: 35, fontSize: 10, interval: 0 } },
      yAxis: { type: "value", name: "kernels" },
      series: [{ type: "bar", data: L.counts, itemStyle: { color: "#4e79a7" } }],
    });
  } else {
    document.getElementById("launch-delay-chart").replaceWith(el("p", { class: "note" }, "No kernel with a launch call in this trace."));
  }

  // Memory copies.
  const memBox = document.getElementById("memcpy-table");
  if (!D.memcpy.length) memBox.append(el("p", { class: "note" }, "No memory copies in this trace."));
  else table(memBox, [
    { key: "direction", label: "Direction", kind: "text" },
    { key: "host_memory", label: "Host memory", kind: "text", get: (r) => r.host_memory || "—" },
    { key: "calls", label: "Calls", kind: "int" }, { key: "bytes", label: "Bytes", kind: "bytes" },
    { key: "total_us", label: "Time", kind: "us" }, { key: "busy_us", label: "Busy", kind: "us" },
    { key: "bandwidth_gbps", label: "GB/s", kind: "float" }, { key: "share", label: "Share of GPU time", kind: "pct" },
  ], D.memcpy, { filter: false, id: "memcpy-rows", sortKey: "total_us" });

  OPS.panels(D.panels);
  OPS.about(D.sources, D.warnings);
  void esc; void fmtBytes;
  window.opscopeReady = performance.now();  // every view drawn (read by the benchmark and the tests)
})();
