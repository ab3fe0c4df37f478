/* "By source" (opscope lines, report/html/lines_panel.py data): GPU time by the line of the user's Python code
   that launched it. Frame, op and kernel names are trace text: into the page as textContent only (el / table). */
"use strict";

(function () {
  const { D, S, table } = OPS;
  const L = D.lines;
  const box = document.getElementById("lines-table");
  const note = document.getElementById("lines-note");
  if (!L || !box || !note) return;
  note.textContent = L.unattributed;
  if (!L.has_stacks) return;
  const rows = L.rows.map((r) => ({
    frame: S(r.short), gpu_time_us: r.gpu_time_us, share: r.share, kernels: r.kernels, cpu_self_us: r.cpu_self_us,
    top_ops: r.top_ops.map(S).join(", "), top_kernel: r.top_kernels.length ? S(r.top_kernels[0]) : "", full: S(r.frame),
  }));
  table(box, [
    { key: "frame", label: "Frame", kind: "text" },
    { key: "gpu_time_us", label: "GPU time", kind: "us" },
    { key: "share", label: "Share", kind: "pct" },
    { key: "kernels", label: "Kernels", kind: "int" },
    { key: "cpu_self_us", label: "CPU self", kind: "us" },
    { key: "top_ops", label: "Top ops", kind: "text" },
    { key: "top_kernel", label: "Top kernel", kind: "name" },
    { key: "full", label: "Full frame", kind: "name" },
  ], rows, { id: "lines-rows", sortKey: "gpu_time_us", placeholder: "filter frames, ops, kernels (text or /regex/)" });
  if (L.rows_total > L.rows.length) {
    note.textContent += ` The ${L.rows.length} rows with the most GPU time of ${L.rows_total} are shown (opscope lines --top 0 lists all).`;
  }
})();
