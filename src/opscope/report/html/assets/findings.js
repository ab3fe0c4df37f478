/* The brief (report/brief_view.py: the lines of `opscope brief`), the first section of the trace report, and the
   findings (advice rules, docs/advice.md) after it. Text from the trace goes into the page as textContent only
   (through el / table). */
"use strict";

(function () {
  const { D, el } = OPS;
  const box = document.getElementById("brief-lines");
  if (!box) return;
  for (const line of D.brief || []) {
    const p = el("p", { class: "brief" });
    p.append(el("b", null, line.label + ": "), document.createTextNode(line.text));
    box.append(p);
  }
})();

(function () {
  const { D, el, table } = OPS;
  const box = document.getElementById("findings-table");
  if (!box) return;
  const F = D.findings || [];
  if (!F.length) {
    box.append(el("p", { class: "note" }, "No finding: no rule fired on this trace (opscope advise --list-rules lists them)."));
    return;
  }
  table(box, [
    { key: "severity", label: "Severity", kind: "text" },
    { key: "id", label: "Rule", kind: "text" },
    { key: "time_at_stake_us", label: "At stake", kind: "us" },
    { key: "share", label: "Share", kind: "pct" },
    { key: "title", label: "Finding", kind: "text" },
    { key: "advice", label: "Advice", kind: "text" },
    { key: "evidence", label: "Evidence (top 3)", kind: "text",
      get: (f) => f.evidence.slice(0, 3).map((e) => Object.entries(e).map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("; ")).join(" | ") },
  ], F, { filter: false, id: "findings-rows", sortKey: "time_at_stake_us" });
})();
