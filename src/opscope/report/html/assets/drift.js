/* Drift report (opscope.drift/1 data): the verdict, what moved (onset, rate, carriers), one chart per watched
   figure over the windows (a moved figure red, its onset marked) and the windows. Every text from the data reaches
   the page through textContent or the escaping tooltip helpers. */
"use strict";

(function () {
  const { D, el, table, chart, cards, tipHtml } = OPS;
  document.getElementById("report-subtitle").textContent = `${D.windows.length} windows · ${D.sampling_run || ""}`;
  cards("drift-cards", [
    { key: "status", label: "Status", value: D.status.replace("_", " "), detail: D.reason || "" },
    { key: "changes", label: "Figures that moved", value: String(D.changes.length), detail: `of ${D.figures.length} watched` },
    { key: "windows", label: "Windows judged", value: String(D.windows.length), detail: D.windows_left_out.length ? `left out: ${D.windows_left_out.join(", ")}` : "" },
  ]);
  const P = D.policy;
  document.getElementById("drift-rule").textContent = `A figure moved when every one of the last ${P.recent_windows} windows lies beyond the median of the first ${P.baseline_windows} by more than ${P.z} x their noise and ${Math.round((P.threshold - 1) * 100)}%.`;

  const fmt = (v, unit) => (v === null || v === undefined ? "—" : `${Number(v).toFixed(Math.abs(v) < 10 ? 3 : 1)} ${unit}`);
  table(document.getElementById("changes-table"), [
    { key: "label", label: "Figure", kind: "text" },
    { key: "direction", label: "Direction", kind: "text" },
    { key: "baseline", label: "Baseline", kind: "text", get: (c) => fmt(c.baseline, c.value_unit) },
    { key: "now", label: "Now", kind: "text", get: (c) => fmt(c.now, c.value_unit) },
    { key: "onset_window", label: "Onset window", kind: "text", get: (c) => String(c.onset_window) },
    { key: "rate", label: "Rate", kind: "text", get: (c) => `${Number(c.rate).toFixed(3)} ${c.unit}` },
    { key: "carried_by", label: "Carried by", kind: "text", get: (c) => c.carried_by.map((k) => `${k.name} (${k.change >= 0 ? "+" : ""}${k.change.toFixed(3)} ${k.unit})`).join("; ") || (c.note || "—") },
  ], D.changes, { filter: false, id: "change-rows" });

  const moved = new Map(D.changes.map((c) => [c.figure, c]));
  const xs = D.windows.map((w) => (w.first_step !== null && w.last_step !== null ? String((w.first_step + w.last_step) / 2) : String(w.index)));
  const box = document.getElementById("drift-charts");
  D.figures.forEach((f, i) => {
    box.append(el("h3", null, `${f.label} (${f.unit})`));
    const id = `drift-${i}`;
    box.append(el("div", { class: "chart", id, "data-figure": f.figure }));
    const change = moved.get(f.figure);
    const red = change ? { color: "#d62728" } : undefined;
    const onset = change ? D.windows.findIndex((w) => w.index === change.onset_window) : -1;
    chart(id, {
      grid: { left: 90, right: 30, top: 20, bottom: 40 },
      xAxis: { type: "category", name: "step", data: xs },
      yAxis: { type: "value", scale: true },
      tooltip: { trigger: "item", formatter: (p) => {
        const w = D.windows[p.dataIndex] || {};
        return tipHtml(f.label, [["window", String(w.index)], ["steps", `${w.first_step}-${w.last_step}`], ["value", fmt(p.value, f.unit)]]);
      } },
      series: [{
        name: f.label, type: "line", symbolSize: 6, connectNulls: false, data: f.values,
        lineStyle: red, itemStyle: red,
        markLine: onset >= 0 ? { symbol: "none", label: { formatter: "onset" }, data: [{ xAxis: xs[onset] }] } : undefined,
      }],
    });
  });

  table(document.getElementById("windows-table"), [
    { key: "index", label: "Window", kind: "text", get: (w) => String(w.index) },
    { key: "first_step", label: "Steps", kind: "text", get: (w) => `${w.first_step ?? "—"}-${w.last_step ?? "—"}` },
    { key: "started_at", label: "Started (UTC)", kind: "text", get: (w) => w.started_at || "" },
    { key: "history_run", label: "History run", kind: "text", get: (w) => (w.history_run === null ? "—" : String(w.history_run)) },
    { key: "trace", label: "Trace", kind: "text", get: (w) => w.trace || "(deleted: in the history)" },
  ], D.windows, { filter: true, id: "window-rows" });
  OPS.about({}, []);
})();
