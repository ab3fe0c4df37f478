/* The brief (report/brief_view.py: the lines of `opscope brief`), the first section of the trace report, then
   the findings (advice rules, docs/advice.md): one card per finding, the largest predicted saving first, every
   finding shown (no inner scroll). Evidence rows are short readable text (full names on hover); a row with a
   time span or a GPU event name zooms the timeline to that slice and marks it. Text from the trace goes into
   the page as textContent only (through el). */
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
  const { D, el, fmtUs, fmtPct } = OPS;
  const box = document.getElementById("findings-table");
  if (!box) return;
  const P = D.findings_panel || { rows: [], withheld: [], not_evaluated: [] };
  const F = P.rows || [];
  const cap = P.capture;
  if (cap && cap.kind !== "steady_state") {
    box.append(el("p", { class: "finding-capture" }, `Capture: ${cap.kind.replace(/_/g, " ")} (${cap.detail}). ${cap.advice}`));
  }
  if (!F.length) {
    box.append(el("p", { class: "note" }, "No finding: no rule fired with a saving on this trace (opscope advise --list-rules lists them)."));
  }

  function showOnTimeline(item) {
    const tl = window.opscopeTimeline;
    if (!tl) return;
    if (item.span) tl.markSpan(item.span[0], item.span[1]);
    else if (item.name !== null && item.name !== undefined) {
      const i = tl.longestOf(item.name);
      if (i < 0) return;
      const [a, b] = tl.span(i);
      tl.markSpan(a, b);
    }
    const section = document.getElementById("timeline");
    if (section && section.scrollIntoView) section.scrollIntoView({ block: "start" });
  }

  function card(f, rank, into) {
    const card = el("div", { class: `finding sev-${f.severity}`, id: `finding-${f.id}`, "data-rank": String(rank + 1) });
    const head = el("div", { class: "finding-head" });
    head.append(el("span", { class: `badge sev-${f.severity}` }, f.severity));
    head.append(el("span", { class: "finding-saving" }, `saving about ${fmtUs(f.saving_us)} (${fmtPct(f.saving_share)} of the window)`));
    head.append(el("code", { class: "finding-id" }, f.id));
    card.append(head);
    card.append(el("p", { class: "finding-title" }, f.title));
    card.append(el("p", { class: "finding-advice" }, f.advice));
    const basis = f.saving_basis === "estimate" ? `estimate: ${f.saving_model}` : `critical-path what-if (${f.saving_model})`;
    const model = `saving from the ${basis}; at stake ${fmtUs(f.time_at_stake_us)}` +
      (f.shared_with.length ? `; shares time with ${f.shared_with.join(", ")}` : "");
    card.append(el("p", { class: "note" }, model));
    if (f.evidence.length) {
      const t = el("table", { class: "evidence" });
      const body = el("tbody");
      for (const item of f.evidence) {
        const tr = el("tr");
        const linked = item.span || (item.name !== null && item.name !== undefined);
        for (const c of item.cells) {
          const td = el("td");
          td.append(el("span", { class: "ev-label" }, c.label + " "));
          const v = el("span", { class: "ev-value" }, c.text);
          if (c.full) v.setAttribute("title", c.full);
          td.append(v);
          tr.append(td);
        }
        if (linked) {
          tr.classList.add("linked");
          tr.setAttribute("title", "show on the timeline");
          tr.addEventListener("click", () => showOnTimeline(item));
        }
        body.append(tr);
      }
      t.append(body);
      card.append(t);
    }
    into.append(card);
  }
  F.forEach((f, rank) => card(f, rank, box));
  if (F.length) {
    box.append(el("p", { class: "finding-total" },
      `Fixing all of these: about ${fmtUs(P.combined_saving_us)} of the ${fmtUs(P.window_us)} analysed ` +
      "(savings exclusive of the findings above them; docs/advice.md)."));
  }
  if (P.withheld.length) {  // their evidence, folded: they fired, but a finding above claims their time
    const more = el("details", { class: "withheld" });
    more.append(el("summary", null, "Also fired, saving nothing of their own: " +
      P.withheld.map((w) => w.why ? `${w.id} (its time is explained by ${w.why})` : `${w.id} (no saving on the critical path)`).join("; ")));
    P.withheld.forEach((w, i) => card(w, F.length + i, more));
    box.append(more);
  }
  if (P.not_evaluated.length) {  // grouped by reason: a CPU-only trace gives most rules the same one
    const byReason = new Map();
    for (const o of P.not_evaluated) byReason.set(o.reason, [...(byReason.get(o.reason) || []), o.id]);
    box.append(el("p", { class: "note", id: "findings-not-evaluated" }, "Not evaluated: " +
      [...byReason].map(([reason, ids]) => `${ids.join(", ")} (${reason})`).join("; ")));
  }
})();
