/* History report (opscope.history.report/1 data): the check's status, one trend chart per figure over the runs
   (points carry run id and commit; regressed series red and marked), the findings and the runs. Every text from
   the database reaches the page through textContent or the escaping tooltip helpers. */
"use strict";

(function () {
  const { D, el, fmtUs, fmtPct, table, chart, cards, tipHtml, shortName } = OPS;
  const C = D.check;
  document.getElementById("report-subtitle").textContent = `${D.runs.length} runs · ${D.db}`;
  cards("history-cards", [
    { key: "status", label: "Status", value: C.status.replace("_", " "), detail: C.reason || `policy ${C.policy}` },
    { key: "regressions", label: "Regressions", value: String(C.regressions.length), detail: `recent runs ${D.recent_runs.join(", ") || "—"}` },
    { key: "improvements", label: "Improvements", value: String(C.improvements.length), detail: `baseline ${C.baseline_runs.length} runs` },
  ]);
  document.getElementById("check-rule").textContent = C.policy === "threshold"
    ? `A series regresses when every one of the ${C.recent} most recent runs is worse than ${C.threshold} x the median of the ${C.baseline} runs before them.`
    : `A series regresses when every one of the ${C.recent} most recent runs lies more than ${C.z} standard deviations of the baseline on the worse side of its mean.`;

  const byId = new Map(D.runs.map((r) => [r.id, r]));
  const fmtValue = (metric, v) => (metric.endsWith("_us") ? fmtUs(v) : ["share", "utilization"].includes(metric) ? fmtPct(v) : String(v));
  const box = document.getElementById("trend-charts");
  D.charts.forEach((c, i) => {
    box.append(el("h3", null, c.title));
    const id = `trend-${i}`;
    box.append(el("div", { class: "chart", id, "data-scope": c.scope, "data-metric": c.metric }));
    const mark = (s) => (s.state === "regression" ? "▲ " : s.state === "improvement" ? "▼ " : "");
    const made = chart(id, {
      legend: { type: "scroll", top: 0, formatter: (n) => shortName(n, 60) },
      grid: { left: 90, right: 30, top: 40, bottom: 40 },
      xAxis: { type: "category", name: "run", data: D.runs.map((r) => String(r.id)) },
      yAxis: { type: "value", axisLabel: { formatter: (v) => fmtValue(c.metric, v) } },
      tooltip: { trigger: "item", formatter: (p) => {
        const run = byId.get(Number(p.name)) || {};
        return tipHtml(p.seriesName, [["run", String(run.id)], ["commit", run.commit || "—"],
          ["added", run.added_at || ""], [c.metric, fmtValue(c.metric, p.value)]]);
      } },
      series: c.series.map((s) => {
        const values = new Map(s.points.map(([id, v]) => [id, v]));
        return {
          name: mark(s) + s.name, type: "line", symbolSize: 7, connectNulls: true,
          data: D.runs.map((r) => (values.has(r.id) ? values.get(r.id) : null)),
          lineStyle: s.state === "regression" ? { color: "#d62728", width: 3 } : undefined,
          itemStyle: s.state === "regression" ? { color: "#d62728" } : undefined,
          markPoint: s.state === "regression" ? { symbol: "pin", symbolSize: 36, itemStyle: { color: "#d62728" },
            data: s.points.filter(([id]) => D.recent_runs.includes(id)).map(([id, v]) => ({ coord: [String(id), v], value: "▲" })) } : undefined,
        };
      }),
    });
    made.on("click", (p) => {
      const row = document.getElementById(`run-${p.name}`);
      if (row) { row.scrollIntoView({ block: "center" }); row.classList.add("hit"); }
    });
  });

  const findingColumns = [
    { key: "scope", label: "Scope", kind: "text" },
    { key: "metric", label: "Metric", kind: "text" },
    { key: "baseline", label: "Baseline", kind: "text", get: (f) => fmtValue(f.metric, f.baseline) },
    { key: "values", label: "Recent", kind: "text", get: (f) => f.values.map((v) => fmtValue(f.metric, v)).join(", ") },
    { key: "ratio", label: "Ratio", kind: "text", get: (f) => (f.ratio === null ? "—" : f.ratio.toFixed(3)) },
    { key: "name", label: "Key", kind: "text" },
  ];
  const regBox = document.getElementById("regressions-table");
  regBox.append(el("h3", null, `Regressions (${C.regressions.length})`));
  table(regBox, findingColumns, C.regressions, { filter: false, id: "regression-rows" });
  const impBox = document.getElementById("improvements-table");
  impBox.append(el("h3", null, `Improvements (${C.improvements.length})`));
  table(impBox, findingColumns, C.improvements, { filter: false, id: "improvement-rows" });

  table(document.getElementById("runs-table"), [
    { key: "id", label: "Run", kind: "text" },
    { key: "added_at", label: "Added (UTC)", kind: "text" },
    { key: "commit", label: "Commit", kind: "text", get: (r) => r.commit || "" },
    { key: "branch", label: "Branch", kind: "text", get: (r) => r.branch || "" },
    { key: "gpu", label: "GPU", kind: "text", get: (r) => r.gpu || "" },
    { key: "tags", label: "Tags", kind: "text" },
    { key: "path", label: "Trace", kind: "text", get: (r) => r.path || "" },
  ], D.runs.slice().reverse(), { filter: true, id: "run-rows", rowId: (r) => `run-${r.id}` });
  OPS.about({}, []);
})();
