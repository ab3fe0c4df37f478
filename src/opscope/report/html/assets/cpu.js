/* Trace report: the CPU operator view and the diagnosis (report/html/cpu_panel.py data). On a trace without GPU
   activity (a CPU-only capture) the page has no GPU panels (D.panels, hidden by OPS.panels), and the CPU view
   says why. */
"use strict";

(function () {
  const { D, el, fmtUs, fmtInt, table } = OPS;
  const C = D.cpu || { ops: [], threads: 0, self_total_us: 0, rest: null };
  const diag = document.getElementById("diagnosis");
  for (const line of D.diagnosis || []) diag.append(el("p", { class: "diagnosis" }, "diagnosis: " + line));
  const gpu = (D.panels || []).includes("kernels");
  const causes = D.idle_causes || [];
  const causesNote = document.getElementById("idle-causes-note");
  if (!causes.length) {
    causesNote.textContent = "No idle time on any GPU in the analysed window.";
  } else {
    causesNote.textContent = "Each idle instant of a GPU gets one cause, the first that holds: a wait for the GPU, work already launched, " +
      "a runtime call, a launch call, the DataLoader, a CPU operator, Python between operators, the window's head or tail, else nothing recorded. " +
      "A GPU's rows add up to its idle time (docs/analysis-timeline.md).";
    table(document.getElementById("idle-causes-table"), [
      { key: "device", label: "GPU", kind: "text" }, { key: "cause", label: "Cause", kind: "text" },
      { key: "idle_us", label: "Idle", kind: "us" }, { key: "share", label: "Of idle", kind: "pct" },
      { key: "meaning", label: "Meaning", kind: "text" }, { key: "top", label: "Heaviest", kind: "name" },
    ], causes, { id: "idle-cause-rows", sortKey: "idle_us", filter: false });
    const steps = D.idle_causes_steps || [];
    if (steps.length) {
      const box = document.getElementById("idle-causes-steps");
      box.append(el("h3", null, "Step by step (ms; a row's causes add up to its idle time)"));
      table(box, [
        { key: "step", label: "Step", kind: "text" }, { key: "device", label: "GPU", kind: "text" },
        { key: "idle_us", label: "Idle", kind: "us" }, { key: "causes", label: "What the host was doing (ms)", kind: "text" },
      ], steps, { id: "idle-cause-step-rows", filter: steps.length > 10 });
    }
  }
  const note = document.getElementById("cpu-note");
  if (!C.ops.length) {
    note.textContent = "No CPU operators in this trace (a GPU-only capture?).";
  } else {
    note.textContent = `${fmtUs(C.self_total_us)} of self time on ${fmtInt(C.threads)} thread(s); ` +
      "self time = an operator's (or annotation's) time minus the operators inside it; ranked as opscope ops ranks CPU self time. " +
      (gpu ? "The GPU panels below show the GPU side." : "These are the operators that took the time.");
    table(document.getElementById("cpu-ops-table"), [
      { key: "name", label: "Operator", kind: "name" }, { key: "kind", label: "Kind", kind: "text" },
      { key: "calls", label: "Calls", kind: "int" },
      { key: "self_us", label: "Self", kind: "us" }, { key: "total_us", label: "Total", kind: "us" },
      { key: "avg_us", label: "Mean", kind: "us" }, { key: "share", label: "Share of self time", kind: "pct" },
    ], C.ops, { id: "cpu-op-rows", sortKey: "self_us" });
    if (C.rest) note.after(el("p", { class: "note" }, `${fmtInt(C.rest.rows)} more operators: ${fmtUs(C.rest.self_us)} of self time.`));
  }
  if (!gpu) document.body.classList.add("no-gpu");  // a CPU-only capture: report.css hides the GPU cards
})();
