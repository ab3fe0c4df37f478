/* GPU timeline on a canvas: one lane per (device, stream), then per device its idle gaps coloured by cause, then
   one lane per CPU thread that launched work; wheel zoom, drag pan, hover details, launch -> kernel flows, click a
   kernel for its launch call and Python stack.

   A redraw costs O(visible events) in arithmetic but at most one rectangle per lane and pixel column is
   painted: an event wider than ~1.5 px is drawn as itself, narrower ones are summed into their pixel column
   and the column is drawn once with an opacity equal to its busy fraction. So 100k+ kernels stay responsive
   at any zoom. `window.opscopeTimeline.lastDraw` tells how much was painted (used by the browser tests). */
"use strict";

(function () {
  const { D, S, el, fmtNs, fmtInt, showTip, hideTip, colorOf } = OPS;
  const T = D.timeline;
  const canvas = document.getElementById("timeline-canvas");
  if (!T || !canvas) return;
  const note = document.getElementById("timeline-note");
  const rangeLabel = document.getElementById("timeline-range");
  const nLanes = T.lanes.length;
  // Below the GPU lanes: one idle lane per device (gaps coloured by cause) and one lane per CPU thread that
  // launched work (its operators, launch calls and syncs; report/html/cpu_lanes.py).
  const C = T.cpu || { lanes: [], lane: [], start: [], dur: [], name: [], kind: [], gpu_lane: [], gpu_start: [],
                       events: 0, shipped: 0, idle: { devices: [], device: [], start: [], dur: [], cause: [] } };
  const I = C.idle, nIdle = I.devices.length, nCpu = C.lanes.length, nAll = nLanes + nIdle + nCpu;
  // Lanes shrink when there are many (down to 6 px: a few hundred streams stay on about one screen).
  const LANE_H = Math.max(6, Math.min(20, Math.floor(720 / Math.max(nAll, 1)))), AXIS_H = 24, LABEL_W = 230, PAD = 4;
  const n = T.lane.length;

  // Decode the delta-encoded starts; events are sorted by (lane, start).
  const start = new Float64Array(n), end = new Float64Array(n);
  let acc = 0;
  for (let i = 0; i < n; i++) { acc += T.start[i]; start[i] = acc; end[i] = acc + T.dur[i]; }
  const laneFrom = new Int32Array(nLanes + 1).fill(n), maxDur = new Float64Array(nLanes);
  for (let i = n - 1; i >= 0; i--) laneFrom[T.lane[i]] = i;
  for (let l = nLanes - 1; l >= 0; l--) if (laneFrom[l] > laneFrom[l + 1]) laneFrom[l] = laneFrom[l + 1];
  laneFrom[nLanes] = n;
  for (let i = 0; i < n; i++) { const l = T.lane[i]; if (T.dur[i] > maxDur[l]) maxDur[l] = T.dur[i]; }
  const catColor = new Map();
  const colorFor = (i) => { const c = T.cat[i]; if (!catColor.has(c)) catColor.set(c, colorOf(S(c))); return catColor.get(c); };

  const full = [0, T.span_ns];
  let v0 = full[0], v1 = full[1];
  let cssW = 0, dpr = 1;
  const view = { lastDraw: null };

  function lowerBound(lo, hi, t) { // first index in [lo, hi) with start >= t
    while (lo < hi) { const mid = (lo + hi) >> 1; if (start[mid] < t) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function resize() {
    dpr = window.devicePixelRatio || 1;
    cssW = canvas.parentElement.clientWidth;
    const cssH = AXIS_H + nAll * LANE_H + PAD;
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(cssH * dpr);
    canvas.style.height = cssH + "px";
    draw();
  }

  function niceStep(span, px) {
    const raw = span / Math.max(px / 110, 1), p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function draw() {
    const t0 = performance.now();
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const W = Math.max(cssW - LABEL_W, 1);  // the page may not be laid out yet (width 0): draw nothing wider
    ctx.clearRect(0, 0, cssW, canvas.height / dpr);
    ctx.font = "11px system-ui, sans-serif";
    const scale = W / (v1 - v0);
    // time axis
    ctx.fillStyle = "#5f6b7a"; ctx.strokeStyle = "#e3e7ee"; ctx.textBaseline = "middle";
    const step = niceStep(v1 - v0, W);
    // One unit for every tick, chosen from the tick step, with the decimals the step needs (no "25.116 s" x7).
    const [div, unit] = step >= 1e9 ? [1e9, "s"] : step >= 1e6 ? [1e6, "ms"] : step >= 1e3 ? [1e3, "µs"] : [1, "ns"];
    const digits = Math.max(0, -Math.floor(Math.log10(step / div) + 1e-9));
    const tick = (t) => (t === 0 ? "0" : (t / div).toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) + " " + unit);
    for (let t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      const x = LABEL_W + (t - v0) * scale;
      ctx.fillRect(x, AXIS_H - 6, 1, 6);
      ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS_H); ctx.lineTo(x + 0.5, AXIS_H + nAll * LANE_H); ctx.stroke();
      ctx.fillText(tick(t), x + 3, AXIS_H / 2);
    }
    let rects = 0, columns = 0, visited = 0;
    const cov = new Float32Array(Math.ceil(W) + 2);
    const inset = LANE_H >= 12 ? 2 : 1;
    for (let l = 0; l < nLanes; l++) {
      const y = AXIS_H + l * LANE_H;
      ctx.fillStyle = l % 2 ? "#fafbfc" : "#f3f5f8";
      ctx.fillRect(LABEL_W, y, W, LANE_H);
      ctx.fillStyle = "#1d2330";
      if (LANE_H >= 11 || l % Math.ceil(11 / LANE_H) === 0) ctx.fillText(OPS.shortName(S(T.lanes[l].label), 34), 4, y + LANE_H / 2);
      if (T.bins) { // overview of every event (present when not all events were shipped)
        const b = T.bins, fill = b.fill[l];
        ctx.fillStyle = "#9aa5b4";
        for (let x = 0; x < W; x++) {
          const a = Math.floor((v0 + x / scale) / b.width_ns), z = Math.floor((v0 + (x + 1) / scale) / b.width_ns);
          let f = 0;
          for (let k = Math.max(a, 0); k <= Math.min(z, b.count - 1); k++) f = Math.max(f, fill[k]);
          if (f > 0) { ctx.globalAlpha = 0.35 * f; ctx.fillRect(LABEL_W + x, y + LANE_H - Math.min(5, LANE_H / 3), 1, Math.min(4, LANE_H / 4)); }
        }
        ctx.globalAlpha = 1;
      }
      cov.fill(0);
      const lo = laneFrom[l], hi = laneFrom[l + 1];
      let i = lowerBound(lo, hi, v0 - maxDur[l]);
      const byColor = new Map();
      for (; i < hi && start[i] < v1; i++) {
        if (end[i] <= v0) continue;
        visited++;
        const x0 = (Math.max(start[i], v0) - v0) * scale, x1 = (Math.min(end[i], v1) - v0) * scale;
        if (x1 - x0 >= 1.5) {
          const c = colorFor(i);
          if (!byColor.has(c)) byColor.set(c, []);
          byColor.get(c).push(x0, x1 - x0);
        } else {
          cov[Math.floor(x0)] += Math.max(x1 - x0, 0.02);
        }
      }
      for (const [c, xs] of byColor) {
        ctx.fillStyle = c; ctx.beginPath();
        for (let k = 0; k < xs.length; k += 2) ctx.rect(LABEL_W + xs[k], y + inset, Math.max(xs[k + 1] - 0.5, 1), LANE_H - 2 * inset);
        ctx.fill(); rects += xs.length / 2;
      }
      ctx.fillStyle = "#3b4a5e";
      for (let x = 0; x < cov.length; x++) {
        if (cov[x] > 0) { ctx.globalAlpha = Math.min(1, 0.25 + cov[x]); ctx.fillRect(LABEL_W + x, y + inset, 1, LANE_H - 2 * inset); columns++; }
      }
      ctx.globalAlpha = 1;
    }
    const extra = drawExtra(ctx, W, scale);
    if (view.marked) {  // a slice chosen from a finding's evidence: a band over every lane
      const [a, b] = view.marked;
      const x0 = Math.max(a, v0), x1 = Math.min(b, v1);
      if (x1 > x0 || (b === a && a >= v0 && a <= v1)) {
        ctx.fillStyle = "rgba(17, 24, 39, 0.12)"; ctx.strokeStyle = OPS.SEMANTIC.mark;
        const x = LABEL_W + (x0 - v0) * scale, w = Math.max((x1 - x0) * scale, 2);
        ctx.fillRect(x, AXIS_H, w, nAll * LANE_H); ctx.strokeRect(x + 0.5, AXIS_H + 0.5, w - 1, nAll * LANE_H - 1);
      }
    }
    rangeLabel.textContent = `${fmtNs(v0)} – ${fmtNs(v1)} (${fmtNs(v1 - v0)} shown)`;
    view.lastDraw = { rects, columns, visited, width: W, lanes: nLanes, ms: performance.now() - t0, v0, v1,
                      cpuRects: extra.cpu, idleRects: extra.idle };
  }

  // ---- CPU lanes and idle gaps --------------------------------------------------------------------------
  const cn = C.lane.length, cStart = new Float64Array(cn), cEnd = new Float64Array(cn), cDepth = new Uint8Array(cn);
  let cAcc = 0;  // starts are delta-encoded, as the GPU ones
  for (let i = 0; i < cn; i++) { cAcc += C.start[i]; cStart[i] = cAcc; cEnd[i] = cAcc + C.dur[i]; }
  const cFrom = new Int32Array(nCpu + 1).fill(cn), cMax = new Float64Array(nCpu);
  for (let i = cn - 1; i >= 0; i--) cFrom[C.lane[i]] = i;
  for (let l = nCpu - 1; l >= 0; l--) if (cFrom[l] > cFrom[l + 1]) cFrom[l] = cFrom[l + 1];
  cFrom[nCpu] = cn;
  for (let l = 0; l < nCpu; l++) {  // nesting depth: events are sorted by start, longest first
    const open = [];
    for (let i = cFrom[l]; i < cFrom[l + 1]; i++) {
      while (open.length && cEnd[open[open.length - 1]] <= cStart[i]) open.pop();
      cDepth[i] = Math.min(open.length, 6); open.push(i);
      if (C.dur[i] > cMax[l]) cMax[l] = C.dur[i];
    }
  }
  const iDev = I.devices.map((d) => d), iFrom = new Int32Array(nIdle + 1).fill(I.start.length);
  const iLane = I.device.map((d) => iDev.indexOf(d));
  for (let i = I.start.length - 1; i >= 0; i--) iFrom[iLane[i]] = i;
  for (let l = nIdle - 1; l >= 0; l--) if (iFrom[l] > iFrom[l + 1]) iFrom[l] = iFrom[l + 1];
  const CPU_COLORS = ["#b8c4d6", OPS.SEMANTIC.launch, OPS.SEMANTIC.sync];  // operator, launch call, synchronising call
  const IDLE_COLORS = [OPS.SEMANTIC.host_wait, OPS.SEMANTIC.sync, "#c4cad3"];  // host wait, sync wait, other
  const IDLE_CAUSES = ["host wait: the GPU waited for the CPU to launch work",
                       "sync wait: the host was blocked in a synchronising call",
                       "other: work was submitted but had not started (latency, waits on other streams)"];
  const KINDS = ["operator", "launch call", "synchronising call"];
  // The GPU event a launch started, found by (GPU lane, start); and back, kernel -> its launch.
  function kernelOf(i) {
    const l = C.gpu_lane[i];
    if (l < 0 || l >= nLanes) return -1;
    const k = lowerBound(laneFrom[l], laneFrom[l + 1], C.gpu_start[i]);
    return k < laneFrom[l + 1] && start[k] === C.gpu_start[i] ? k : -1;
  }
  const launchOfKernel = new Map();
  for (let i = 0; i < cn; i++) if (C.kind[i] === 1) { const k = kernelOf(i); if (k >= 0) launchOfKernel.set(k, i); }
  function cLower(lo, hi, t) { while (lo < hi) { const m = (lo + hi) >> 1; if (cStart[m] < t) lo = m + 1; else hi = m; } return lo; }

  function drawExtra(ctx, W, scale) {
    let cpu = 0, idleRects = 0;
    for (let k = 0; k < nIdle; k++) {
      const y = AXIS_H + (nLanes + k) * LANE_H;
      ctx.fillStyle = "#fff8ee"; ctx.fillRect(LABEL_W, y, W, LANE_H);
      ctx.fillStyle = "#1d2330";
      const d = iDev[k];
      ctx.fillText(`GPU ${d === null ? "?" : d} · idle (why)`, 4, y + LANE_H / 2);
      for (let i = iFrom[k]; i < iFrom[k + 1]; i++) {
        const a = I.start[i], b = a + I.dur[i];
        if (b <= v0 || a >= v1) continue;
        const x0 = (Math.max(a, v0) - v0) * scale, x1 = (Math.min(b, v1) - v0) * scale;
        ctx.fillStyle = IDLE_COLORS[I.cause[i]];
        ctx.fillRect(LABEL_W + x0, y + 2, Math.max(x1 - x0, 1), LANE_H - 4); idleRects++;
      }
    }
    for (let c = 0; c < nCpu; c++) {
      const y = AXIS_H + (nLanes + nIdle + c) * LANE_H;
      ctx.fillStyle = c % 2 ? "#f7f8fb" : "#eef1f6"; ctx.fillRect(LABEL_W, y, W, LANE_H);
      ctx.fillStyle = "#1d2330";
      ctx.fillText(OPS.shortName(S(C.lanes[c].label), 34), 4, y + LANE_H / 2);
      const hi = cFrom[c + 1];
      for (let i = cLower(cFrom[c], hi, v0 - cMax[c]); i < hi && cStart[i] < v1; i++) {
        if (cEnd[i] <= v0) continue;
        const x0 = (Math.max(cStart[i], v0) - v0) * scale, x1 = (Math.min(cEnd[i], v1) - v0) * scale;
        const inset = Math.min(cDepth[i] * 2, LANE_H / 2 - 1);
        ctx.fillStyle = CPU_COLORS[C.kind[i]];
        ctx.fillRect(LABEL_W + x0, y + 1 + inset, Math.max(x1 - x0, 1), Math.max(LANE_H - 2 - inset, 2)); cpu++;
      }
    }
    return { cpu, idle: idleRects };
  }
  function laneOfY(y) { return Math.floor((y - AXIS_H) / LANE_H); }
  function hitExtra(x, y) {  // {kind: "cpu" | "idle", i} or null
    const l = laneOfY(y);
    if (l < nLanes || l >= nAll || x < LABEL_W) return null;
    const scale = (cssW - LABEL_W) / (v1 - v0), t = v0 + (x - LABEL_W) / scale, slack = 3 / scale;
    if (l < nLanes + nIdle) {
      const k = l - nLanes;
      for (let i = iFrom[k]; i < iFrom[k + 1]; i++) if (I.start[i] - slack <= t && t <= I.start[i] + I.dur[i] + slack) return { kind: "idle", i };
      return null;
    }
    const c = l - nLanes - nIdle, hi = cFrom[c + 1];
    let best = -1;  // the innermost (last drawn) event under the pointer
    for (let i = cLower(cFrom[c], hi, t - slack - cMax[c]); i < hi && cStart[i] <= t + slack; i++) {
      if (cEnd[i] >= t - slack) best = i;
    }
    return best < 0 ? null : { kind: "cpu", i: best };
  }
  function describeExtra(h) {
    if (h.kind === "idle") {
      return [`GPU ${I.device[h.i]} idle`, [["cause", IDLE_CAUSES[I.cause[h.i]]], ["duration", fmtNs(I.dur[h.i])], ["start", fmtNs(I.start[h.i])]]];
    }
    const i = h.i, rows = [["kind", KINDS[C.kind[i]]], ["duration", fmtNs(C.dur[i])], ["start", fmtNs(cStart[i])]];
    const k = C.kind[i] === 1 ? kernelOf(i) : -1;
    if (k >= 0) rows.push(["launched", S(T.name[k])], ["launch delay", fmtNs(start[k] - cStart[i])]);
    return [S(C.name[i]), rows];
  }
  function cpuPixel(i) { const l = nLanes + nIdle + C.lane[i]; return { x: LABEL_W + (cStart[i] - v0) * (cssW - LABEL_W) / (v1 - v0), y: AXIS_H + l * LANE_H + LANE_H / 2 }; }
  function gpuPixel(k) { return { x: LABEL_W + (start[k] - v0) * (cssW - LABEL_W) / (v1 - v0), y: AXIS_H + T.lane[k] * LANE_H + LANE_H / 2 }; }
  // The flow from a launch call to its kernel, drawn over the lanes while one of the two is hovered.
  function drawFlow(launch, kernel) {
    draw();
    const ctx = canvas.getContext("2d"), a = cpuPixel(launch), b = gpuPixel(kernel);
    ctx.save(); ctx.strokeStyle = OPS.SEMANTIC.mark; ctx.lineWidth = 1.5; ctx.beginPath();
    ctx.moveTo(a.x, a.y); ctx.bezierCurveTo(a.x, (a.y + b.y) / 2, b.x, (a.y + b.y) / 2, b.x, b.y); ctx.stroke();
    ctx.fillStyle = OPS.SEMANTIC.mark; ctx.beginPath(); ctx.arc(b.x, b.y, 3, 0, 2 * Math.PI); ctx.fill(); ctx.restore();
    view.flow = { launch, kernel, from: a, to: b };
  }
  let flowShown = false;
  function clearFlow() { if (flowShown) { flowShown = false; view.flow = null; draw(); } }

  function clampView(a, b) {
    const minSpan = 1000; // 1 µs
    let span = Math.max(b - a, minSpan);
    span = Math.min(span, full[1] - full[0]);
    a = Math.min(Math.max(a, full[0]), full[1] - span);
    v0 = a; v1 = a + span;
  }
  function zoom(factor, anchorX) {
    const W = Math.max(cssW - LABEL_W, 1);
    const frac = anchorX === undefined ? 0.5 : Math.min(Math.max((anchorX - LABEL_W) / W, 0), 1);
    const t = v0 + (v1 - v0) * frac, span = (v1 - v0) * factor;
    clampView(t - span * frac, t - span * frac + span);
    draw();
  }
  function pan(fraction) { const span = v1 - v0; clampView(v0 + span * fraction, v1 + span * fraction); draw(); }

  function hit(x, y) {
    const l = Math.floor((y - AXIS_H) / LANE_H);
    if (l < 0 || l >= nLanes || x < LABEL_W) return -1;
    const scale = (cssW - LABEL_W) / (v1 - v0);
    const t = v0 + (x - LABEL_W) / scale, slack = 3 / scale;
    let best = -1, bestScore = -Infinity;
    const hi = laneFrom[l + 1];
    for (let i = lowerBound(laneFrom[l], hi, t - slack - maxDur[l]); i < hi && start[i] <= t + slack; i++) {
      if (end[i] < t - slack) continue;
      const inside = start[i] <= t && t <= end[i];
      const score = (inside ? 1e18 : 0) + T.dur[i];
      if (score > bestScore) { bestScore = score; best = i; }
    }
    return best;
  }
  function describe(i) {
    const lane = T.lanes[T.lane[i]];
    return [S(T.name[i]), [
      ["launched by", T.op[i] >= 0 ? S(T.op[i]) : "(no op recorded)"],
      ["duration", fmtNs(T.dur[i])],
      ["launch delay", T.delay[i] >= 0 ? fmtNs(T.delay[i]) : "—"],
      ["start", fmtNs(start[i])],
      ["category", S(T.cat[i])],
      ["device · stream", `${lane.device} · ${lane.stream}` + (S(lane.device_name) ? ` (${S(lane.device_name)})` : "")],
    ]];
  }

  // Click a kernel: its launch call and the Python frames above it (with_stack traces), the innermost frame of
  // the user's code first, then the frames that called it; the framework frames between that frame and the
  // launch are folded underneath. Names go in as text only.
  const detail = document.getElementById("timeline-detail");
  const P = T.python || { stacks: [], user: [] };
  function kernelDetail(i) {
    const p = T.py ? T.py[i] : -1, names = p >= 0 ? P.stacks[p].map(S) : [], user = p >= 0 ? P.user[p] : [];
    const k = user.indexOf(1);
    return {
      name: S(T.name[i]),
      launch: T.launch && T.launch[i] >= 0 ? S(T.launch[i]) : null,
      op: T.op[i] >= 0 ? S(T.op[i]) : null,
      frame: k >= 0 ? names[k] : null,  // the innermost frame of the user's code
      above: k >= 0 ? names.slice(k) : names,  // from it (or the innermost frame) outwards
      aboveUser: k >= 0 ? user.slice(k) : user,
      below: k >= 0 ? names.slice(0, k) : [],  // framework frames between the launch and the user's frame
    };
  }
  function showDetail(i) {
    if (!detail) return;
    const d = kernelDetail(i);
    detail.textContent = "";
    detail.append(el("div", { class: "d-title" }, d.name));
    detail.append(el("div", { class: "d-row", "data-key": "launch" }, "launch call: " + (d.launch || "(not in the trace)")));
    detail.append(el("div", { class: "d-row", "data-key": "op" }, "launched by: " + (d.op || "(no op recorded)")));
    if (d.frame) detail.append(el("div", { class: "d-row d-at", "data-key": "at" }, "at " + OPS.shortFrame(d.frame)));
    if (!d.above.length) {
      detail.append(el("p", { class: "note" }, P.stacks.length
        ? "No Python frame was running on the launching thread when the launch call started."
        : "No Python stacks in this trace: record them with opscope.profile(..., with_stack=True) or torch.profiler.profile(with_stack=True)."));
    } else {
      detail.append(el("div", { class: "d-row" }, d.frame ? "Python frames, your code's innermost first:" : "Python frames, innermost first (none of your code's):"));
      const list = el("ol", { class: "frames" });
      d.above.forEach((name, j) => list.append(el("li", { class: d.aboveUser[j] ? "user" : "framework", title: name }, name)));
      detail.append(list);
      if (d.below.length) {
        const more = el("details", { class: "frames-below" });
        more.append(el("summary", null, `${fmtInt(d.below.length)} framework frame(s) between the launch and your code`));
        const inner = el("ol", { class: "frames" });
        for (const name of d.below) inner.append(el("li", { class: "framework", title: name }, name));
        more.append(inner);
        detail.append(more);
      }
    }
    detail.hidden = false;
    view.selected = i;
  }

  let drag = null, downAt = null;
  canvas.addEventListener("click", (e) => {
    const r = canvas.getBoundingClientRect();
    if (downAt && Math.abs(e.clientX - downAt[0]) + Math.abs(e.clientY - downAt[1]) > 4) return;  // a drag, not a click
    const i = hit(e.clientX - r.left, e.clientY - r.top);
    if (i >= 0) showDetail(i);
  });
  canvas.addEventListener("wheel", (e) => { e.preventDefault(); const r = canvas.getBoundingClientRect(); zoom(Math.pow(1.0015, e.deltaY), e.clientX - r.left); }, { passive: false });
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, v0, v1 }; downAt = [e.clientX, e.clientY]; });
  window.addEventListener("mouseup", () => { drag = null; });
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    if (drag) {
      const dt = (e.clientX - drag.x) / (cssW - LABEL_W) * (drag.v1 - drag.v0);
      clampView(drag.v0 - dt, drag.v1 - dt); draw(); hideTip(); return;
    }
    const extraHit = hitExtra(x, y);
    if (extraHit) {
      const [title, rows] = describeExtra(extraHit);
      const k = extraHit.kind === "cpu" && C.kind[extraHit.i] === 1 ? kernelOf(extraHit.i) : -1;
      if (k >= 0) { drawFlow(extraHit.i, k); flowShown = true; } else clearFlow();
      showTip(e.clientX, e.clientY, title, rows); return;
    }
    const i = hit(x, y);
    if (i < 0) { clearFlow(); hideTip(); return; }
    const launch = launchOfKernel.has(i) ? launchOfKernel.get(i) : -1;
    if (launch >= 0) { drawFlow(launch, i); flowShown = true; } else clearFlow();
    const [title, rows] = describe(i);
    showTip(e.clientX, e.clientY, title, rows);
  });
  canvas.addEventListener("mouseleave", () => { hideTip(); clearFlow(); });
  canvas.addEventListener("dblclick", () => { clampView(full[0], full[1]); draw(); });
  canvas.addEventListener("keydown", (e) => {
    const k = e.key.toLowerCase();
    if (k === "w") zoom(0.7); else if (k === "s") zoom(1 / 0.7); else if (k === "a") pan(-0.2); else if (k === "d") pan(0.2);
  });
  document.querySelectorAll("#timeline .controls button").forEach((b) => b.addEventListener("click", () => {
    const act = b.getAttribute("data-act");
    if (act === "in") zoom(0.5); else if (act === "out") zoom(2); else if (act === "left") pan(-0.25);
    else if (act === "right") pan(0.25); else { clampView(full[0], full[1]); draw(); }
  }));

  let text = `${fmtInt(T.events)} GPU events in ${fmtInt(nLanes)} lanes; times relative to the window start.`;
  if (nIdle) text += " Idle lanes: why each GPU waited (orange: for the CPU to launch work; dark slate: the host was blocked in a sync; grey: work submitted, not started).";
  if (nCpu) text += ` CPU lanes: the ${fmtInt(nCpu)} thread(s) that launched GPU work, with their operators (grey), launch calls (orange) and synchronising calls (dark slate); hover a launch or a kernel to see the flow between them.`;
  if (P.stacks.length) text += " Click a kernel for its launch call and the Python frames that launched it.";
  if (C.shipped < C.events) text += ` The ${fmtInt(C.shipped)} longest of ${fmtInt(C.events)} CPU events are drawn.`;
  if (T.shipped < T.events) text += ` The ${fmtInt(T.shipped)} longest are drawn one by one; the grey strip under each lane shows every event's busy fraction.`;
  note.textContent = text;
  window.addEventListener("resize", resize);
  resize();

  view.zoomTo = (a, b) => { clampView(a, b); draw(); return view.lastDraw; };
  view.marked = null;
  // Mark [a, b] (ns from t0) and zoom to it with some context around (a finding's evidence row was clicked).
  view.markSpan = (a, b) => { view.marked = [a, b]; const pad = Math.max((b - a) * 0.5, 20000); return view.zoomTo(a - pad, b + pad); };
  view.longestOf = (nameId) => {  // the index of the longest event of that name (string id), -1 if none shipped
    let best = -1;
    for (let i = 0; i < n; i++) if (T.name[i] === nameId && (best < 0 || T.dur[i] > T.dur[best])) best = i;
    return best;
  };
  view.reset = () => { clampView(full[0], full[1]); draw(); return view.lastDraw; };
  view.hit = hit;
  view.span = (i) => [start[i], end[i]];
  view.show = (i) => { const pad = Math.max(T.dur[i] * 4, 20000); return view.zoomTo(start[i] - pad, end[i] + pad); };
  view.describe = (i) => describe(i);
  view.detail = (i) => kernelDetail(i);
  view.select = (i) => showDetail(i);
  view.pixelOf = (i) => ({ x: LABEL_W + ((start[i] + end[i]) / 2 - v0) * (cssW - LABEL_W) / (v1 - v0), y: AXIS_H + T.lane[i] * LANE_H + LANE_H / 2 });
  view.count = n;
  view.cpu = { count: cn, lanes: nCpu, idleLanes: nIdle, idleCount: I.start.length, kernelOf, launchOf: (k) => (launchOfKernel.has(k) ? launchOfKernel.get(k) : -1),
               pixelOf: cpuPixel, describe: (i) => describeExtra({ kind: "cpu", i }), hit: hitExtra,
               span: (i) => [cStart[i], cEnd[i]], idleDescribe: (i) => describeExtra({ kind: "idle", i }),
               idlePixel: (i) => ({ x: LABEL_W + (I.start[i] + I.dur[i] / 2 - v0) * (cssW - LABEL_W) / (v1 - v0), y: AXIS_H + (nLanes + iLane[i]) * LANE_H + LANE_H / 2 }) };
  window.opscopeTimeline = view;
})();
