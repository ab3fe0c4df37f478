/* Trace report: the memory panel (allocated and reserved over time per device with the peak marked, top
   allocating operators, live-at-end allocations) and a peak-memory card. Op names are untrusted: table()
   writes them with textContent, tooltips go through esc() (tipHtml). */
"use strict";

(function () {
  const { D, el, fmtBytes, fmtInt, table, chart, cards, tipHtml, fmtUs } = OPS;
  const M = D.memory;
  const box = document.getElementById("memory-body");
  if (!M || !M.devices.length) {
    box.append(el("p", { class: "note", id: "memory-none" },
      "No [memory] events in this trace: record with profile_memory=True (opscope run --profile-memory)."));
    window.opscopeMemoryReady = performance.now();
    return;
  }
  cards("headline", M.devices.filter((d) => d.device !== "cpu").slice(0, 4).map((d) => ({
    key: "memory-" + d.device, label: `Peak memory ${d.device}`, value: fmtBytes(d.peak_allocated_bytes),
    detail: d.peak_reserved_bytes === null ? (d.relative ? "relative (no allocator totals)" : "allocated")
      : `reserved ${fmtBytes(d.peak_reserved_bytes)}` + (d.capacity_bytes ? ` of ${fmtBytes(d.capacity_bytes)}` : ""),
  })));
  table(box, [
    { key: "device", label: "Device", kind: "text" },
    { key: "peak_allocated_bytes", label: "Peak allocated", kind: "bytes" },
    { key: "peak_reserved_bytes", label: "Peak reserved", kind: "bytes" },
    { key: "fragmentation_at_peak_bytes", label: "Fragmentation at peak", kind: "bytes" },
    { key: "capacity_bytes", label: "Capacity", kind: "bytes" },
    { key: "peak_allocated_op", label: "Op at peak", kind: "name", get: (r) => r.peak_allocated_op || "—" },
    { key: "alloc_count", label: "Allocations", kind: "int" },
    { key: "live", label: "Live at end", kind: "text",
      get: (r) => (r.live_at_end ? `${fmtInt(r.live_at_end.count)} (${fmtBytes(r.live_at_end.bytes)})` : "—") },
  ], M.devices, { filter: false, id: "memory-devices" });
  for (const d of M.devices) {
    const s = M.series[d.device];
    if (!s) continue;
    const id = "memory-chart-" + d.device.replace(/[^a-z0-9]/gi, "-");
    box.append(el("h3", null, `${d.device}: allocated${s.reserved ? " and reserved" : ""} over time` + (d.relative ? " (relative)" : "")));
    box.append(el("div", { class: "chart", id }));
    const peakAt = s.allocated.indexOf(Math.max(...s.allocated));
    const series = [{ name: "allocated", type: "line", step: "end", showSymbol: false, data: s.t_us.map((t, i) => [t, s.allocated[i]]),
      markPoint: { symbolSize: 38, data: [{ coord: [s.t_us[peakAt], s.allocated[peakAt]], value: "peak" }] } }];
    if (s.reserved) series.push({ name: "reserved", type: "line", step: "end", showSymbol: false, data: s.t_us.map((t, i) => [t, s.reserved[i]]) });
    chart(id, {
      legend: { top: 0 }, grid: { left: 90, right: 20, top: 36, bottom: 40 },
      tooltip: { trigger: "axis", formatter: (ps) => tipHtml(fmtUs(ps[0].value[0]), ps.map((p) => [p.seriesName, fmtBytes(p.value[1])])) },
      xAxis: { type: "value", name: "µs from the first event", nameLocation: "middle", nameGap: 26 },
      yAxis: { type: "value", axisLabel: { formatter: (v) => fmtBytes(v) } },
      series,
    });
  }
  box.append(el("h3", null, "Top allocating operators"));
  table(box, [
    { key: "op", label: "Operator", kind: "name" }, { key: "device", label: "Device", kind: "text" },
    { key: "self_alloc_bytes", label: "Self allocated", kind: "bytes" }, { key: "self_alloc_count", label: "Self allocations", kind: "int" },
    { key: "live_at_end_bytes", label: "Live at end", kind: "bytes" }, { key: "alloc_bytes", label: "Inclusive", kind: "bytes" },
  ], M.top_ops, { id: "memory-ops", sortKey: "self_alloc_bytes", sortDir: -1 });
  box.append(el("h3", null, "Live at the end (leak candidates)"));
  if (!M.live_at_end.length) box.append(el("p", { class: "note", id: "memory-live-none" }, "Every allocation with an address was freed."));
  else table(box, [
    { key: "device", label: "Device", kind: "text" }, { key: "bytes", label: "Size", kind: "bytes" },
    { key: "op", label: "Allocated by", kind: "name" },
  ], M.live_at_end, { filter: false, id: "memory-live", sortKey: "bytes", sortDir: -1 });
  for (const w of M.warnings) box.append(el("p", { class: "warn" }, "warning: " + w));
  window.opscopeMemoryReady = performance.now();
})();
