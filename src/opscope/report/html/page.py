"""Self-contained HTML reports: one file with the data, the page code and the charting library inlined.

A report is plain data (a JSON-ready dict with a `kind`: trace, diff or ranks) rendered through a Jinja2
template (report/html/templates/) into one page that opens from file:// with no network access: Apache ECharts
(vendored under report/html/assets/, licence beside it) draws the charts, the report's own scripts draw the GPU
timeline and the flame graph on canvas.

Untrusted text (kernel, op and file names come from whoever wrote the trace) never reaches the page as
markup: the data travels inside `<script type="application/json">` with `<`, `>` and `&` written as
`\\u003c`, `\\u003e`, `\\u0026` (so a name containing `</script>` cannot end the block), and the scripts put
it into the DOM with `textContent` or escape it for chart tooltips. Everything the template itself prints is
autoescaped.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import msgspec

from opscope._version import __version__
from opscope.errors import MissingDependency
from opscope.extras import install_command

LIBRARY = "echarts.min.js"
KINDS: dict[str, tuple[str, ...]] = {
    # report kind -> page scripts (after the shared ones), in load order
    "trace": (
        "timeline.js",
        "flame.js",
        "cpu.js",
        "efficiency.js",
        "trace.js",
        "critical_path.js",
        "findings.js",
        "memory.js",
        "lines.js",
    ),
    "diff": ("diff.js",),
    "ranks": ("ranks.js",),
    "history": ("history.js",),
    "drift": ("drift.js",),
}
SHARED = ("common.js",)
_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)


def json_for_script(data: Any) -> str:
    """`data` as JSON that is safe inside a <script> element: no `<`, `>` or `&` appear literally. Encoded by
    msgspec, as the JSON formats are (a 1 GB trace's page: 0.9 s of `json.dumps` -> 0.07 s), the unsafe
    characters replaced in its bytes (a regular expression with a callback per match took 0.4 s)."""
    raw = msgspec.json.encode(data)
    for char, escaped in _JSON_ESCAPES.items():  # on the UTF-8 bytes: 20x faster than on a wide str
        raw = raw.replace(char.encode(), escaped.encode())
    return raw.decode()


@cache
def asset(name: str) -> str:
    """An inlined script or style sheet. A literal `</script` (none today) would end the element early."""
    text = (
        resources.files("opscope.report.html").joinpath("assets").joinpath(name).read_text(encoding="utf-8")
    )
    return _SCRIPT_END.sub(r"<\\/\1", text)


def _environment() -> Any:
    try:
        import jinja2
    except ImportError:
        raise MissingDependency(f"HTML reports need jinja2: {install_command('html')}") from None
    return jinja2.Environment(
        loader=jinja2.PackageLoader("opscope.report.html", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def render_html(data: dict[str, Any], title: str, kind: str | None = None) -> str:
    """The whole page for report data: `kind` is trace (`opscope.report/1` data), diff (`opscope.diff/1`)
    or ranks (`opscope.ranks/1`); by default `data["kind"]`."""
    kind = kind or data.get("kind")
    if kind not in KINDS:
        raise ValueError(f"unknown report kind: {kind!r}")
    template = _environment().get_template(f"{kind}.html.j2")  # type: ignore[str-bytes-safe]
    scripts = [asset(name) for name in (*SHARED, *KINDS[kind])]
    page = template.render(
        title=title,
        version=__version__,
        data_json=_DATA_SLOT,
        library=asset(LIBRARY),
        style=asset("report.css"),
        scripts=scripts,
    )
    # the data (24 MB on the 1 GB benchmark trace) goes into its slot after rendering: the template engine
    # would copy it into a Markup object and join it with the page again (~0.1 s there)
    before, slot, after = page.partition(_DATA_SLOT)
    if not slot:  # pragma: no cover - every page template has the data element
        raise ValueError(f"{kind}.html.j2 has no data slot")
    return before + json_for_script(data) + after


_DATA_SLOT = "\x00opscope-report-data\x00"  # a text no template contains (a NUL character cannot be in one)
