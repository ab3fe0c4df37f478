/* Critical path panel: a breakdown bar per step (ECharts) and the path itself on a strip that follows the GPU
   timeline's view (same time origin, redrawn when the timeline zooms or pans). Click a step's bar to show that
   step on both. Data: D.critical_path (report/html/critical_path_report.py). */
"use strict";

(function () {
  const { D, S, fmtNs, fmtUs, fmtPct, fmtInt, showTip, hideTip, chart, tipHtml, empty } = OPS;
  const C = D.critical_path;
  const canvas = document.getElementById("critical-path-canvas");
  if (!C || !canvas) return;
  const KIND_COLORS = {
    cpu_bound: "#4e79a7", gpu_compute_bound: "#59a14f", gpu_communication_bound: "#b07aa1",
    gpu_kernel_kernel_overhead: "#edc948", gpu_kernel_launch_overhead: OPS.SEMANTIC.launch, sync_wait: OPS.SEMANTIC.sync,
    memcpy: "#76b7b2", gpu_backlog: "#9c755f",
  };
  const colorOfKind = (k) => KIND_COLORS[k] || "#888";
  const note = document.getElementById("critical-path-note");
  const G = C.segments, n = G.start_ns.length;
  const steps = C.steps;

  if (!steps.length) { empty("critical-path-chart", "No work in this trace to build a critical path from."); }
  else chart("critical-path-chart", {
    grid: { left: 140, right: 40, top: 30, bottom: 30 },
    legend: { top: 0, data: C.kinds },
    tooltip: { trigger: "item", formatter: (p) => { const s = steps[p.dataIndex];
      return tipHtml(s.name, [[p.seriesName, fmtUs(p.value)], ["of path", fmtPct(p.value / Math.max(s.path_us, 1e-9))],
                              ["path", fmtUs(s.path_us)], ["wall", fmtUs(s.wall_us)]]); } },
    xAxis: { type: "value", name: "ms", axisLabel: { formatter: (v) => (v / 1e3).toLocaleString("en-US") } },
    yAxis: { type: "category", inverse: true, data: steps.map((s) => s.name) },
    series: C.kinds.map((k) => ({ name: k, type: "bar", stack: "path", itemStyle: { color: colorOfKind(k) },
                                  data: steps.map((s) => s.breakdown_us[k] || 0) })),
  }).on("click", (p) => {
    const s = steps[p.dataIndex];
    const a = s.start_ns, b = s.start_ns + s.path_us * 1e3;
    if (window.opscopeTimeline) window.opscopeTimeline.zoomTo(a, b);
    v0 = a; v1 = b; draw();
  });

  const LABEL_W = 230, AXIS_H = 6, ROW_H = 18;
  const rows = ["CPU side of the path", "GPU side of the path"];
  let v0 = 0, v1 = 1, cssW = 0, dpr = 1;
  if (n) { v0 = Math.min(0, G.start_ns[0]); v1 = Math.max(...steps.map((s) => s.start_ns + s.path_us * 1e3), v0 + 1); }

  function draw() {
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const W = Math.max(cssW - LABEL_W, 1), scale = W / Math.max(v1 - v0, 1);
    ctx.clearRect(0, 0, cssW, canvas.height / dpr);
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    rows.forEach((label, r) => {
      const y = AXIS_H + r * ROW_H;
      ctx.fillStyle = r % 2 ? "#fafbfc" : "#f3f5f8"; ctx.fillRect(LABEL_W, y, W, ROW_H);
      ctx.fillStyle = "#1d2330"; ctx.fillText(label, 4, y + ROW_H / 2);
    });
    for (let i = 0; i < n; i++) {
      const a = G.start_ns[i], b = a + G.dur_ns[i];
      if (b < v0 || a > v1) continue;
      const x0 = (Math.max(a, v0) - v0) * scale, x1 = (Math.min(b, v1) - v0) * scale;
      ctx.fillStyle = colorOfKind(C.kinds[G.kind[i]]);
      ctx.fillRect(LABEL_W + x0, AXIS_H + G.gpu[i] * ROW_H + 2, Math.max(x1 - x0, 1), ROW_H - 4);
    }
  }
  function resize() {
    dpr = window.devicePixelRatio || 1;
    cssW = canvas.parentElement.clientWidth;
    const cssH = AXIS_H + rows.length * ROW_H + 4;
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(cssH * dpr); canvas.style.height = cssH + "px";
    draw();
  }
  // Follow the GPU timeline's view (it exposes the range it last drew).
  function follow() {
    const t = window.opscopeTimeline && window.opscopeTimeline.lastDraw;
    if (t && (t.v0 !== v0 || t.v1 !== v1)) { v0 = t.v0; v1 = t.v1; draw(); }
    window.requestAnimationFrame(follow);
  }
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    const row = Math.floor((y - AXIS_H) / ROW_H), W = Math.max(cssW - LABEL_W, 1);
    const t = v0 + (x - LABEL_W) / W * (v1 - v0), slack = 3 * (v1 - v0) / W;
    for (let i = 0; i < n; i++) {
      if (G.gpu[i] === row && G.start_ns[i] - slack <= t && t <= G.start_ns[i] + G.dur_ns[i] + slack) {
        showTip(e.clientX, e.clientY, S(G.name[i]) || "(between top-level events)",
                [["kind", C.kinds[G.kind[i]]], ["on path", fmtNs(G.dur_ns[i])], ["start", fmtNs(G.start_ns[i])]]);
        return;
      }
    }
    hideTip();
  });
  canvas.addEventListener("mouseleave", hideTip);
  window.addEventListener("resize", resize);
  resize();
  window.requestAnimationFrame(follow);
  let text = `${fmtInt(C.total_steps)} ${C.from_markers ? "step(s)" : "window (no ProfilerStep markers: the whole trace)"}; `;
  if (steps.length < C.total_steps) text += `the first ${fmtInt(steps.length)} shown; `;
  text += `${fmtInt(C.shipped)} path pieces drawn${C.shipped < C.segments_total ? ` (the longest of ${fmtInt(C.segments_total)})` : ""}. ` +
    "The strip follows the GPU timeline above; click a step's bar to show it. Kinds: docs/critical-path.md.";
  note.textContent = text;
  window.opscopeCriticalPath = { draw: () => { draw(); return { v0, v1, pieces: n }; } };
})();
