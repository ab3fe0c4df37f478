/* Findings (advice rules, docs/advice.md): the first section of the trace report. Text from the trace goes
   into the page as textContent only (through el / table). */
"use strict";

(function () {
  const { D, el, table, shortFrame } = OPS;
  // key=value pairs, and " at file(line): function" where the evidence names the user frame that launched it
  const evidenceText = (e) => {
    const text = Object.entries(e).filter(([k]) => k !== "frame")
      .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`).join("; ");
    return typeof e.frame === "string" ? `${text} at ${shortFrame(e.frame)}` : text;
  };
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
      get: (f) => f.evidence.slice(0, 3).map(evidenceText).join(" | ") },
  ], F, { filter: false, id: "findings-rows", sortKey: "time_at_stake_us" });
})();
