/* opscope report: shared helpers. Trace text (kernel, op, file names) is untrusted: it goes into the DOM with
   textContent only, and into chart tooltips (which ECharts sets as HTML) through esc(). Never innerHTML. */
"use strict";

const OPS = (function () {
  const D = JSON.parse(document.getElementById("opscope-data").textContent);
  const STR = D.strings || [];
  const S = (i) => (i === null || i === undefined || i < 0 ? "" : STR[i]);

  function esc(text) {
    return String(text).replace(/[&<>"'`=\/]/g, (c) => "&#" + c.charCodeAt(0) + ";");
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    if (attrs) for (const k of Object.keys(attrs)) node.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // Durations arrive in microseconds (tables) or nanoseconds (timeline); one formatter each.
  function fmtUs(us) {
    if (us === null || us === undefined || Number.isNaN(us)) return "—";
    if (us === 0) return "0 µs";  // not "0.00 µs"
    const a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3) + " s";
    if (a >= 1e3) return (us / 1e3).toFixed(3) + " ms";
    return us.toFixed(a >= 100 ? 1 : 2) + " µs";
  }
  // A value axis in one unit, chosen from its largest value (never "0.00 µs" next to "1.000 ms"): the unit is the
  // axis name, the labels plain numbers with thousands separators.
  function usAxis(maxUs, extra) {
    const m = Math.abs(maxUs || 0);
    const [div, unit] = m >= 1e6 ? [1e6, "s"] : m >= 1e3 ? [1e3, "ms"] : [1, "µs"];
    return Object.assign({ type: "value", name: unit, nameGap: 8,
      axisLabel: { formatter: (v) => (v === 0 ? "0" : (v / div).toLocaleString("en-US", { maximumFractionDigits: 3 })) } }, extra || {});
  }
  const fmtNs = (ns) => (ns === null || ns === undefined ? "—" : fmtUs(ns / 1e3));
  const fmtPct = (share, digits) => (share === null || share === undefined ? "—" : (share * 100).toFixed(digits === undefined ? 1 : digits) + "%");
  const fmtInt = (n) => (n === null || n === undefined ? "—" : Math.round(n).toLocaleString("en-US"));
  // Bytes in binary units, labelled (KiB, MiB, GiB: what the terminal's MiB columns use; an 80 GB H100 is
  // 79.19 GiB, never "85.02 GB"), with thousands separators.
  function fmtBytes(b) {
    if (b === null || b === undefined) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = b;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 }) : fmtInt(v)) + " " + units[i];
  }
  const FORMAT = { text: String, name: String, int: fmtInt, us: fmtUs, pct: fmtPct, bytes: fmtBytes,
                   float: (v) => (v === null || v === undefined ? "—" : Number(v).toFixed(3)),
                   count: (v) => (v === null || v === undefined ? "—" : Number(v).toLocaleString("en-US", { maximumFractionDigits: 1 })),
                   signed_us: (v) => (v === null || v === undefined ? "—" : (v > 0 ? "+" : "") + fmtUs(v)),
                   signed_pct: (v) => (v === null || v === undefined ? "—" : (v > 0 ? "+" : "") + fmtPct(v)) };
  const NUMERIC = new Set(["int", "us", "pct", "bytes", "float", "count", "signed_us", "signed_pct"]);

  const CATEGORY_COLORS = { gemm: "#4e79a7", convolution: "#f28e2b", attention: "#e15759", elementwise: "#76b7b2",
    reduction: "#59a14f", normalization: "#edc948", softmax: "#b07aa1", communication: "#ff9da7",
    memcpy: "#9c755f", memset: "#bab0ac", other: "#8c8c8c", kernel: "#4e79a7", idle: "#d9dde3" };
  // Colours with a meaning of their own, none of them a category's (issue 28: red was both attention and a
  // blocking sync): a synchronising call / sync wait, a launch call, the host waiting, a marked slice or flow.
  // Each is far from every category colour (tests/test_report_panels.py measures it): the launch call was an
  // orange next to convolution's.
  const SEMANTIC = { sync: "#37474f", launch: "#17becf", host_wait: "#8c510a", mark: "#111827" };
  const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  function hashColor(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619); }
    return PALETTE[(h >>> 0) % PALETTE.length];
  }
  const colorOf = (category) => CATEGORY_COLORS[category] || hashColor(String(category));

  /* Sortable, filterable table. columns: [{key, label, kind, get?}]; rows: objects. Filter: substring, or a
     regular expression when written /like this/. Shows `pageSize` rows, then a "show more" button. */
  function table(container, columns, rows, opts) {
    opts = opts || {};
    const pageSize = opts.pageSize || 100;
    const value = (row, col) => (col.get ? col.get(row) : row[col.key]);
    let sortCol = opts.sortKey ? columns.findIndex((c) => c.key === opts.sortKey) : -1;
    let sortDir = opts.sortDir || -1;
    let shown = pageSize;
    let filtered = rows.slice();
    const tools = el("div", { class: "table-tools" });
    const input = el("input", { type: "search", placeholder: opts.placeholder || "filter names (text or /regex/)", "aria-label": "filter" });
    const count = el("span", { class: "count" });
    if (opts.filter !== false) tools.append(input);
    tools.append(count);
    const tbl = el("table", { class: "data" });
    if (opts.id) tbl.id = opts.id;
    const thead = el("thead"), tbody = el("tbody"), headRow = el("tr");
    columns.forEach((col, i) => {
      const th = el("th", { class: NUMERIC.has(col.kind) ? "num" : "", "data-key": col.key }, col.label);
      th.addEventListener("click", () => {
        sortDir = sortCol === i ? -sortDir : (NUMERIC.has(col.kind) ? -1 : 1);
        sortCol = i;
        render();
      });
      headRow.append(th);
    });
    thead.append(headRow);
    tbl.append(thead, tbody);
    const more = el("button", { type: "button", class: "more" }, "show more");
    more.addEventListener("click", () => { shown += pageSize * 5; render(); });
    const scroll = el("div", { class: "table-scroll" });
    scroll.append(tbl);
    container.append(tools, scroll, more);

    function matcher(text) {
      const t = text.trim();
      if (!t) return null;
      if (t.length > 2 && t.startsWith("/") && t.endsWith("/")) {
        try { const re = new RegExp(t.slice(1, -1), "i"); return (s) => re.test(s); } catch (e) { /* fall through */ }
      }
      const low = t.toLowerCase();
      return (s) => s.toLowerCase().includes(low);
    }
    function applyFilter() {
      const m = matcher(input.value);
      const textCols = columns.filter((c) => !NUMERIC.has(c.kind));
      filtered = m ? rows.filter((r) => textCols.some((c) => m(String(value(r, c))))) : rows.slice();
      shown = pageSize;
      render();
    }
    input.addEventListener("input", applyFilter);

    function render() {
      if (sortCol >= 0) {
        const col = columns[sortCol];
        filtered.sort((a, b) => {
          const x = value(a, col), y = value(b, col);
          if (x === y) return 0;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : 1) * sortDir;
        });
      }
      headRow.childNodes.forEach((th, i) => {
        if (i === sortCol) th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
        else th.removeAttribute("aria-sort");
      });
      tbody.textContent = "";
      const frag = document.createDocumentFragment();
      for (const row of filtered.slice(0, shown)) {
        const tr = el("tr");
        if (opts.rowId) tr.id = opts.rowId(row);
        for (const col of columns) {
          const v = value(row, col);
          const cls = NUMERIC.has(col.kind) ? "num" : col.kind === "name" ? "name" : "";
          const td = el("td", { class: cls }, (FORMAT[col.kind] || String)(v));
          if (col.kind === "name") td.title = String(v);
          if (col.kind === "signed_us" || col.kind === "signed_pct") td.classList.add(v > 0 ? "pos" : v < 0 ? "neg" : "zero");
          tr.append(td);
        }
        frag.append(tr);
      }
      tbody.append(frag);
      count.textContent = filtered.length === rows.length ? `${fmtInt(rows.length)} rows` : `${fmtInt(filtered.length)} of ${fmtInt(rows.length)} rows`;
      more.hidden = filtered.length <= shown;
    }
    render();
    return { render, input, table: tbl };
  }

  const charts = [];
  function chart(id, option) {
    const node = document.getElementById(id);
    const c = echarts.init(node, null, { renderer: "canvas" });
    option.animation = false;
    c.setOption(option);
    charts.push(c);
    return c;
  }
  window.addEventListener("resize", () => charts.forEach((c) => c.resize()));

  // One tooltip element for the canvas views; its content is built with text nodes.
  const tip = document.getElementById("tooltip");
  function showTip(x, y, title, rows) {
    tip.textContent = "";
    tip.append(el("div", { class: "t-name" }, title));
    for (const [k, v] of rows) tip.append(el("div", { class: "t-row" }, `${k}: ${v}`));
    tip.hidden = false;
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.min(x + 14, window.innerWidth - w - 8) + "px";
    tip.style.top = (y + 16 + h > window.innerHeight ? y - h - 10 : y + 16) + "px";
  }
  const hideTip = () => { tip.hidden = true; };

  function cards(containerId, items) {
    const box = document.getElementById(containerId);
    for (const item of items) {
      const card = el("div", { class: "card", "data-card": item.key });
      card.append(el("div", { class: "label" }, item.label), el("div", { class: "value" }, item.value));
      if (item.detail) card.append(el("div", { class: "detail" }, item.detail));
      box.append(card);
    }
  }

  // The page shows the panels the data lists (D.panels: section ids with "_" for "-") and hides the others with
  // their links, so that "About this report" (D.sources, the same panels) names exactly what is on the page.
  function panels(shown) {
    if (!shown) return;
    for (const section of document.querySelectorAll("main > section[id]")) {
      if (section.id === "about" || shown.includes(section.id.replace(/-/g, "_"))) continue;
      section.hidden = true;
      const link = document.querySelector(`#nav a[href="#${section.id}"]`);
      if (link) link.hidden = true;
    }
  }

  function about(sources, warnings) {
    const box = document.getElementById("sources");
    if (sources && Object.keys(sources).length) {
      box.append(el("h3", null, "Which analysis produced each view"));
      const rows = Object.keys(sources).map((k) => ({ view: k, source: sources[k] }));
      table(box, [{ key: "view", label: "View", kind: "text" }, { key: "source", label: "Source", kind: "text" }], rows, { filter: false });
    }
    const wbox = document.getElementById("warnings");
    for (const w of warnings || []) wbox.append(el("p", { class: "warn" }, "warning: " + w));
  }

  // What the validity checks found on the traces read (docs/validity.md): one banner line per warn or error
  // check, above everything else on the page (the data's `banners`; `validity` has every check).
  function validity(lines) {
    const box = document.getElementById("validity");
    if (!box) return;
    for (const line of lines || []) {
      const level = /^(?:[^:]*: )?(ERROR|WARN|REPAIRED)\b/.exec(line);
      box.append(el("p", { class: "banner " + (level ? level[1].toLowerCase() : "warn") }, line));
    }
    box.hidden = !box.childElementCount;
  }
  validity(D.banners);

  // Warnings that change what the figures mean (a pair recorded on different GPU models) open the page.
  function alerts(list) {
    const box = document.getElementById("alerts");
    for (const w of list || []) box.append(el("p", { class: "warn alert", role: "alert" }, "Warning: " + w));
  }

  // What a launch delay means (docs/reports.md): a long median is a deep queue behind earlier GPU work (the GPU
  // is the bottleneck), a short one an empty queue (if the GPU also idles, the CPU does not launch fast enough).
  const DEEP_QUEUE_US = 1000, SHORT_QUEUE_US = 50;
  function launchDelayNote(box, L) {
    if (!box || !L || !L.kernels) return;
    const p50 = L.p50_us;
    let text;
    if (p50 >= DEEP_QUEUE_US) {
      text = `A median of ${fmtUs(p50)} means a deep queue: the CPU launches far ahead and each kernel waits behind earlier GPU work. ` +
        "The GPU is the bottleneck (GPU-bound), not the launches: speed up the kernels, not the CPU side.";
    } else if (p50 >= SHORT_QUEUE_US) {
      text = `A median of ${fmtUs(p50)}: kernels wait in a short queue behind earlier GPU work; the CPU keeps the GPU fed.`;
    } else {
      text = `A median of ${fmtUs(p50)}: kernels start almost as soon as they are launched, the queue is nearly empty. ` +
        "If the GPU is also often idle, the CPU does not launch work fast enough (CPU- or launch-bound): see the idle gaps on the timeline.";
    }
    box.textContent = text + " Launch delay = kernel start − launch call start: queueing behind earlier work plus launch latency.";
  }

  // A view with nothing to show says so instead of drawing empty axes.
  function empty(id, text) {
    const node = document.getElementById(id);
    if (node) node.replaceWith(el("p", { class: "note", id }, text));
  }

  // Shared tooltip formatter pieces for ECharts (which renders tooltip strings as HTML: escape everything).
  const tipHtml = (title, rows) => `<b>${esc(title)}</b>` + rows.map(([k, v]) => `<br>${esc(k)}: ${esc(v)}`).join("");
  const shortName = (s, n) => (s.length > n ? s.slice(0, Math.ceil(n / 2) - 1) + "…" + s.slice(s.length - Math.floor(n / 2)) : s);
  // A Python frame `dir/file.py(12): fn` as `file.py(12): fn` (report/frame_names.py's short_frame).
  function shortFrame(name) {
    const m = /^([\s\S]*)\((\d+)\): ([\s\S]*)$/.exec(name);
    return m ? `${m[1].replace(/\/+$/, "").split("/").pop()}(${m[2]}): ${m[3]}` : name;
  }

  return { D, S, esc, el, fmtUs, fmtNs, fmtPct, fmtInt, fmtBytes, colorOf, hashColor, table, chart, showTip, hideTip, SEMANTIC,
           cards, panels, about, alerts, usAxis, launchDelayNote, tipHtml, shortName, shortFrame, charts, empty };
})();
window.OPS = OPS;
