/* Diff report (opscope.diff/1 data): headline before/after, a waterfall of the kernel changes ranked by size,
   categories before/after, and the kernel and operator tables. */
"use strict";

(function () {
  const { D, el, fmtUs, fmtPct, fmtInt, table, chart, cards, tipHtml, shortName } = OPS;
  const scope = D.per_step ? "per step" : "whole traces";
  document.getElementById("report-subtitle").textContent = `BASE ${D.base.path} → NEW ${D.new.path} · ${scope}`;

  const value = (f, v) => (f.unit === "us" ? fmtUs(v) : fmtPct(v));
  const change = (f) => (f.unit === "us"
    ? (f.change_pct === null ? "—" : (f.change_pct > 0 ? "+" : "") + f.change_pct.toFixed(1) + "%")
    : (f.delta === null ? "—" : (f.delta > 0 ? "+" : "") + (f.delta * 100).toFixed(1) + " pp"));
  const main = D.headline.filter((f) => ["time", "gpu_time", "gpu_busy", "utilization"].includes(f.key));
  cards("diff-cards", main.map((f) => ({ key: f.key, label: f.label, value: value(f, f.after),
    detail: `before ${value(f, f.before)} · change ${change(f)}` })));
  table(document.getElementById("headline-table"), [
    { key: "label", label: "Figure", kind: "text" },
    { key: "before", label: "Before", kind: "text", get: (f) => value(f, f.before) },
    { key: "after", label: "After", kind: "text", get: (f) => value(f, f.after) },
    { key: "change", label: "Change", kind: "text", get: change },
  ], D.headline, { filter: false, id: "headline-rows" });

  // Waterfall: BASE GPU time, the largest changes one by one, the rest together, NEW GPU time.
  const rows = D.kernels.rows;
  const TOP = 15;
  const sum = (xs) => xs.reduce((a, b) => a + (b || 0), 0);
  const before = sum(rows.map((r) => r.total_before_us)), after = sum(rows.map((r) => r.total_after_us));
  const top = rows.slice(0, TOP);
  const rest = sum(rows.slice(TOP).map((r) => r.delta_us)) + (D.kernels.hidden_delta_us || 0);
  const steps = [{ label: "BASE", total: before }];
  for (const r of top) steps.push({ label: r.name, short: r.short_name, delta: r.delta_us, row: r });
  if (rows.length > TOP || D.kernels.rows_hidden) steps.push({ label: `${rows.length - TOP + (D.kernels.rows_hidden || 0)} other changes`, delta: rest });
  steps.push({ label: "NEW", total: after });
  let running = 0, low = Infinity;
  const hidden = [], shown = [];
  for (const s of steps) {
    if (s.total !== undefined) { hidden.push(0); shown.push({ value: s.total, itemStyle: { color: "#7b8794" } }); running = s.total; }
    else {
      const next = running + s.delta;
      hidden.push(Math.min(running, next));
      shown.push({ value: Math.abs(s.delta), itemStyle: { color: s.delta > 0 ? "#c5221f" : "#1e8e3e" } });
      running = next;
    }
    low = Math.min(low, running);
  }
  document.getElementById("waterfall-note").textContent =
    `GPU time ${scope}: ${fmtUs(before)} → ${fmtUs(after)} (${after >= before ? "+" : ""}${fmtUs(after - before)}). Red: more time in NEW; green: less.`;
  // The axis starts at zero: a cut axis (43.4 ms at the left edge) makes a 2% change look like a doubling.
  const high = Math.max(before, after, ...hidden.map((h, i) => h + shown[i].value));
  chart("waterfall-chart", {
    grid: { left: 320, right: 40, top: 10, bottom: 30 },
    tooltip: { trigger: "item", formatter: (p) => { const s = steps[p.dataIndex];
      if (s.total !== undefined) return tipHtml(s.label, [["GPU time", fmtUs(s.total)]]);
      const rows2 = [["change", (s.delta > 0 ? "+" : "") + fmtUs(s.delta)]];
      if (s.row) rows2.push(["before", fmtUs(s.row.total_before_us)], ["after", fmtUs(s.row.total_after_us)], ["status", s.row.status]);
      return tipHtml(s.label, rows2); } },
    xAxis: OPS.usAxis(high, { min: 0 }),
    yAxis: { type: "category", inverse: true, data: steps.map((s) => s.short || shortName(s.label, 50)), axisLabel: { fontSize: 11 } },
    series: [
      { type: "bar", stack: "w", silent: true, itemStyle: { color: "transparent" }, data: hidden },
      { type: "bar", stack: "w", data: shown },
    ],
  });

  const cats = D.categories.filter((c) => c.before_us || c.after_us);
  chart("categories-chart", {
    legend: { top: 0 },
    grid: { left: 110, right: 30, top: 30, bottom: 30 },
    tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, formatter: (ps) => { const c = cats[ps[0].dataIndex];
      return tipHtml(c.category, [["before", fmtUs(c.before_us)], ["after", fmtUs(c.after_us)], ["change", (c.delta_us > 0 ? "+" : "") + fmtUs(c.delta_us)]]); } },
    xAxis: OPS.usAxis(Math.max(0, ...cats.map((c) => Math.max(c.before_us || 0, c.after_us || 0)))),
    yAxis: { type: "category", inverse: true, data: cats.map((c) => c.category) },
    series: [{ name: "BASE", type: "bar", data: cats.map((c) => c.before_us), itemStyle: { color: "#9aa5b4" } },
             { name: "NEW", type: "bar", data: cats.map((c) => c.after_us), itemStyle: { color: "#2f6fdb" } }],
  });

  const rowColumns = (extra) => [
    { key: "name", label: "Name", kind: "name" }, ...extra,
    { key: "status", label: "Status", kind: "text" },
    { key: "calls_before", label: D.per_step ? "Calls/step B" : "Calls B", kind: "count" },
    { key: "calls_after", label: D.per_step ? "Calls/step N" : "Calls N", kind: "count" },
    { key: "total_before_us", label: "Total B", kind: "us" }, { key: "total_after_us", label: "Total N", kind: "us" },
    { key: "delta_us", label: "Delta", kind: "signed_us" }, { key: "ratio", label: "Ratio", kind: "float" },
  ];
  // A page carries at most a few thousand rows per table: say how many changes it leaves out and their net delta.
  function hiddenNote(box, part, what) {
    if (!part.rows_hidden) return;
    box.append(el("p", { class: "note", id: `${what}-hidden` },
      `${fmtInt(part.rows_hidden)} more ${what} rows not shown (net delta ${fmtUs(part.hidden_delta_us)}); every row: ` +
      `opscope diff BASE NEW --top 0 --format csv (or json).`));
  }
  table(document.getElementById("kernels-table"), rowColumns([{ key: "kind", label: "Kind", kind: "text" }]), rows, { id: "kernel-diff" });
  hiddenNote(document.getElementById("kernels-table"), D.kernels, "kernel");
  const opsBox = document.getElementById("ops-table");
  opsBox.append(el("p", { class: "note" }, D.ops.metric === "gpu" ? "Operators compared by the GPU time of the kernels they launched." : "Operators compared by inclusive CPU time."));
  const shapeCol = D.ops.rows.some((r) => r.shape !== undefined) ? [{ key: "shape", label: "Shape", kind: "text" }] : [];
  table(opsBox, rowColumns(shapeCol), D.ops.rows, { id: "op-diff" });
  hiddenNote(opsBox, D.ops, "operator");
  // CPU-side causes (a DataLoader, Python overhead) that operators ranked by GPU time would hide.
  const cpuBox = document.getElementById("cpu-ops-table");
  const cpuOps = D.cpu_ops || { rows: [] };
  cpuBox.append(el("p", { class: "note" }, "Operators compared by CPU self time (time in the operator itself, not in the operators inside it)."));
  table(cpuBox, rowColumns(shapeCol), cpuOps.rows, { id: "cpu-op-diff" });
  hiddenNote(cpuBox, cpuOps, "cpu-operator");

  // The same model on two GPUs: the work matched operator by operator and shapes (the CLI's "Operators across
  // hardware" table and the JSON's `hardware`), each side's percent of its own peak as bars.
  const hw = D.hardware;
  if (!hw) {
    document.getElementById("hardware").hidden = true;
    const link = document.querySelector('#nav a[href="#hardware"]');
    if (link) link.hidden = true;
  } else {
    const note = document.getElementById("hardware-note");
    note.append(el("p", { class: "note" }, `BASE ${hw.base_device} · NEW ${hw.new_device} · matched ` +
      `${(100 * hw.coverage_base).toFixed(1)}% of BASE's GPU time and ${(100 * hw.coverage_new).toFixed(1)}% of NEW's.`));
    for (const line of [...hw.verdict, ...hw.library_notes, ...(hw.projections || [])]) note.append(el("p", { class: "note" }, line));
    const side = (r, s, key) => (r[s] ? r[s][key] : null);
    const rated = hw.rows.filter((r) => side(r, "base", "pct_of_peak") !== null || side(r, "new", "pct_of_peak") !== null).slice(0, 15);
    const label = (r) => shortName(r.op) + (r.shape ? " " + r.shape.slice(0, 40) : "");
    if (rated.length) {
      chart("hardware-chart", {
        legend: { top: 0 },
        grid: { left: 260, right: 30, top: 30, bottom: 30 },
        tooltip: { trigger: "axis", axisPointer: { type: "shadow" } },
        xAxis: { type: "value", name: "% of its own peak" },
        yAxis: { type: "category", inverse: true, data: rated.map(label) },
        series: [{ name: "BASE", type: "bar", data: rated.map((r) => side(r, "base", "pct_of_peak")), itemStyle: { color: "#9aa5b4" } },
                 { name: "NEW", type: "bar", data: rated.map((r) => side(r, "new", "pct_of_peak")), itemStyle: { color: "#2f6fdb" } }],
      });
    } else {
      document.getElementById("hardware-chart").hidden = true;
    }
    table(document.getElementById("hardware-table"), [
      { key: "op", label: "Op", kind: "name" },
      { key: "shape", label: "Shape", kind: "text" },
      { key: "match", label: "Matched by", kind: "text", get: (r) => r.match || "one side only" },
      { key: "base_us", label: "BASE", kind: "us", get: (r) => side(r, "base", "gpu_time_us") },
      { key: "new_us", label: "NEW", kind: "us", get: (r) => side(r, "new", "gpu_time_us") },
      { key: "delta_us", label: "Delta", kind: "signed_us" },
      { key: "ratio", label: "NEW/BASE", kind: "float" },
      { key: "base_lib", label: "BASE kernels", kind: "text", get: (r) => side(r, "base", "library") || "" },
      { key: "new_lib", label: "NEW kernels", kind: "text", get: (r) => side(r, "new", "library") || "" },
      { key: "base_pct", label: "BASE %pk", kind: "float", get: (r) => side(r, "base", "pct_of_peak") },
      { key: "new_pct", label: "NEW %pk", kind: "float", get: (r) => side(r, "new", "pct_of_peak") },
    ], hw.rows, { id: "hardware-rows" });
  }

  // The advice findings compared (opscope advise on each trace; the CLI's "findings" lines and JSON key).
  const found = Object.assign({ fixed: [], new: [], remaining: [], not_comparable: [] }, D.findings || {});
  const box = document.getElementById("findings-tables");
  if (!found.fixed.length && !found.new.length && !found.remaining.length) {
    box.append(el("p", { class: "note" }, "No advice finding on either trace (opscope advise)."));
  }
  for (const [key, title] of [["new", "New on NEW"], ["fixed", "Fixed (on BASE, not on NEW)"]]) {
    if (!found[key].length) continue;
    box.append(el("h3", null, title));
    table(box, [{ key: "id", label: "Finding", kind: "text" }, { key: "severity", label: "Severity", kind: "text" },
                { key: "title", label: "What", kind: "text" },
                { key: "predicted_saving_us", label: "Saving", kind: "us" }], found[key], { filter: false, id: `findings-${key}` });
  }
  if (found.remaining.length) {
    box.append(el("h3", null, "Remaining (on both)"));
    table(box, [{ key: "id", label: "Finding", kind: "text" },
                { key: "severity", label: "Severity", kind: "text", get: (f) => `${f.severity_before} → ${f.severity_after}` },
                { key: "predicted_saving_before_us", label: "Saving BASE", kind: "us" },
                { key: "predicted_saving_after_us", label: "Saving NEW", kind: "us" }], found.remaining, { filter: false, id: "findings-remaining" });
  }
  // Each fixed or reduced finding: the saving BASE predicted against the change NEW measured (issue 53)
  const checked = [...found.fixed, ...found.remaining].filter((f) => f.realised);
  if (checked.length) {
    box.append(el("h3", null, "Predicted vs realised"));
    box.append(el("p", { class: "note" }, "Realised: BASE's mean step less NEW's (per step), or the window's fall without step markers; several findings fixed together share one realised figure."));
    const per = (f, a, b) => (f.realised.per_step ? f.realised[a] : f.realised[b]);
    table(box, [{ key: "id", label: "Finding", kind: "text" },
                { key: "status", label: "Change", kind: "text", get: (f) => f.realised.status },
                { key: "predicted", label: "Predicted", kind: "us", get: (f) => per(f, "predicted_per_step_us", "predicted_us") },
                { key: "realised", label: "Realised", kind: "us", get: (f) => per(f, "realised_per_step_us", "realised_us") },
                { key: "unit", label: "Per", kind: "text", get: (f) => (f.realised.per_step ? "step" : "window") },
                { key: "ratio", label: "Realised / predicted", kind: "text", get: (f) => (f.realised.ratio == null ? "-" : `${f.realised.ratio.toFixed(2)}x`) },
                { key: "also", label: "Also changed", kind: "text", get: (f) => f.realised.also_changed.join("; ") }],
          checked, { filter: false, id: "findings-realised" });
  }
  if (found.not_comparable.length) {
    // a rule not evaluated on one side, or whose events the two traces' vendors name differently
    box.append(el("h3", null, "Not comparable"));
    table(box, [{ key: "id", label: "Finding", kind: "text" }, { key: "reason", label: "Why", kind: "text" }],
          found.not_comparable, { filter: false, id: "findings-not-comparable" });
  }

  const gates = document.getElementById("gates-table");
  if (!D.gates.length) gates.append(el("p", { class: "note" }, "No regression gates were given (--fail-above, --fail-kernel, --fail-category)."));
  else table(gates, [{ key: "result", label: "Result", kind: "text", get: (g) => (g.tripped ? "FAIL" : "pass") },
                     { key: "reason", label: "Gate", kind: "text" }], D.gates, { filter: false, id: "gate-rows" });
  OPS.alerts(D.mismatches);
  OPS.about(D.sources, D.warnings);
  window.opscopeReady = performance.now();
})();
