/* Operator -> kernel icicle (a flame graph drawn top-down): the root is all GPU time, each row one level of the
   launch stack (ops, annotations, nn.Module frames), the last level the GPU events; width = GPU time.
   Click a frame to zoom into it; hover for its time and shares. Two views, switched by the buttons above the
   canvas: module instances merged by type (default) or one frame per instance. */
"use strict";

(function () {
  const { D, S, fmtNs, fmtPct, showTip, hideTip, colorOf, el } = OPS;
  const canvas = document.getElementById("flame-canvas");
  if (!D.flame || !canvas) return;
  if (!D.flame.total_ns) { OPS.empty("flame-canvas", "No GPU time to attribute to operators in this trace."); return; }
  const ROW = 18;
  // Two views of the same GPU time: "types" (instances of a module type merged, Layer x24) and "instances"
  // (one frame per module instance); null when no module type repeats, as the two trees are then the same.
  const trees = { types: D.flame, instances: D.flame_instances || null };
  const laid = {};
  function layout(F) { // children sorted heaviest first, and the depth and x offset (GPU ns) of each node
    const n = F.parent.length;
    const children = Array.from({ length: n }, () => []);
    for (let i = 1; i < n; i++) children[F.parent[i]].push(i);
    for (const c of children) c.sort((a, b) => F.value[b] - F.value[a]);
    const depth = new Int32Array(n), x = new Float64Array(n);
    let maxDepth = 0;
    const stack = [0];
    while (stack.length) {
      const i = stack.pop();
      let off = x[i];
      for (const c of children[i]) { depth[c] = depth[i] + 1; x[c] = off; off += F.value[c]; stack.push(c); }
      if (depth[i] > maxDepth) maxDepth = depth[i];
    }
    return { F, n, children, depth, x, maxDepth };
  }
  let view = "types", F, n, children, depth, x, maxDepth;
  function use(name) {
    view = name;
    const t = laid[name] || (laid[name] = layout(trees[name]));
    ({ F, n, children, depth, x, maxDepth } = t);
  }
  use("types");
  let focus = 0, cssW = 0, dpr = 1;
  const crumbs = document.getElementById("flame-crumbs");

  function resize() {
    dpr = window.devicePixelRatio || 1;
    cssW = canvas.parentElement.clientWidth;
    const h = (maxDepth + 1) * ROW + 2;
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(h * dpr); canvas.style.height = h + "px";
    draw();
  }
  function isLeaf(i) { return children[i].length === 0 && i !== 0; }
  function color(i) { // the instances of a module type (Layer_0, Layer_1, ...) share the type's colour
    if (i === 0) return "#c9d1dc";
    if (isLeaf(i)) return "#e8a35c";
    const name = S(F.name[i]);
    return colorOf(name.startsWith("nn.Module: ") ? name.replace(/_\d+$/, "") : name.split("::")[0]);
  }

  function draw() {
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, canvas.height / dpr);
    ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
    const lo = x[focus], span = F.value[focus] || 1, scale = cssW / span, base = depth[focus];
    let drawn = 0;
    for (let i = 0; i < n; i++) {
      const inFocus = x[i] + F.value[i] > lo && x[i] < lo + span;
      if (!inFocus) continue;
      const ancestor = depth[i] < base;
      const px = ancestor ? 0 : (x[i] - lo) * scale, w = ancestor ? cssW : F.value[i] * scale;
      if (w < 0.4) continue;
      const y = depth[i] * ROW;
      ctx.globalAlpha = ancestor ? 0.45 : 1;
      ctx.fillStyle = color(i);
      ctx.fillRect(px, y + 1, Math.max(w - 0.5, 0.5), ROW - 2);
      drawn++;
      if (w > 36) {
        ctx.fillStyle = "#1d2330";
        const label = S(F.name[i]), fit = Math.floor((w - 6) / 6);
        ctx.fillText(label.length > fit ? label.slice(0, Math.max(fit - 1, 1)) + "…" : label, px + 3, y + ROW / 2);
      }
    }
    ctx.globalAlpha = 1;
    crumbs.textContent = "";
    const path = [];
    for (let i = focus; i > 0; i = F.parent[i]) path.unshift(i);
    crumbs.append(el("span", null, path.length ? "focus: " + path.map((i) => OPS.shortName(S(F.name[i]), 40)).join(" › ") : ""));
    window.opscopeFlame.lastDraw = { drawn, focus, view, nodes: n };
  }
  function nodeAt(px, py) {
    const d = Math.floor(py / ROW);
    const lo = x[focus], span = F.value[focus] || 1, scale = cssW / span;
    for (let i = 0; i < n; i++) {
      if (depth[i] !== d) continue;
      if (d < depth[focus]) { if (x[i] <= x[focus] && x[focus] < x[i] + F.value[i]) return i; continue; }
      const a = (x[i] - lo) * scale, b = a + F.value[i] * scale;
      if (px >= a && px < b) return i;
    }
    return -1;
  }
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect(), i = nodeAt(e.clientX - r.left, e.clientY - r.top);
    if (i < 0) { hideTip(); return; }
    const parent = F.parent[i];
    showTip(e.clientX, e.clientY, S(F.name[i]), [
      ["GPU time", fmtNs(F.value[i])],
      ["share of all GPU time", fmtPct(F.value[i] / (F.total_ns || 1), 2)],
      ["share of parent", parent >= 0 ? fmtPct(F.value[i] / (F.value[parent] || 1), 1) : "—"],
      [isLeaf(i) ? "GPU event" : "frame", isLeaf(i) ? "kernel / memcpy / memset" : `${children[i].length} children`],
    ]);
  });
  canvas.addEventListener("mouseleave", hideTip);
  canvas.addEventListener("click", (e) => {
    const r = canvas.getBoundingClientRect(), i = nodeAt(e.clientX - r.left, e.clientY - r.top);
    if (i >= 0) { focus = i; draw(); }
  });
  document.getElementById("flame-reset").addEventListener("click", () => { focus = 0; draw(); });
  const buttons = document.querySelectorAll("#flame .toggle button[data-view]");
  function setView(name) {
    if (!trees[name]) return;
    use(name);
    focus = 0;
    buttons.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.view === name)));
    hideTip();
    resize(); // the depth, hence the canvas height, differs between the views
  }
  buttons.forEach((b) => {
    if (!trees[b.dataset.view]) {
      b.disabled = true;
      b.title = "no module type repeats in this trace: the instance view is the type view";
    }
    b.addEventListener("click", () => setView(b.dataset.view));
  });
  window.opscopeFlame = {
    lastDraw: null, focusOn: (i) => { focus = i; draw(); }, setView,
    get view() { return view; }, get nodes() { return n; },
  };
  window.addEventListener("resize", resize);
  resize();
})();
