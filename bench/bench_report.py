"""Benchmark: the HTML report of the largest trace in ../shared/traces (by event count): file size and
headless render time, against the targets (< 10 MB, < 3 s).

  render time = from navigation start to the moment every view of the page is drawn (`window.opscopeReady`,
  set by the last report script), in headless Debian Chromium driven by Playwright, best of 3 page loads;
  build time = `opscope report` in-process (trace from the cache, report data, HTML), best of 2.

Also builds the report of a hand-made trace with --kernels kernels (default 200,000) on 4 streams, the scale
the corpus lacks, and prints the same figures plus the time of one timeline redraw at full zoom.

  python bench/bench_report.py                  # prints both; needs chromium + playwright for render times
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]

import opscope  # noqa: E402
from _timing import best_of  # noqa: E402  (bench/_timing.py; bench/ is on sys.path)
from opscope.analysis.bundle import trace_bundle  # noqa: E402
from opscope.report.html.page import render_html  # noqa: E402
from opscope.report.html.trace_report import trace_report  # noqa: E402

TRACES = REPO.parent / "shared" / "traces"
CHROMIUM = "/usr/bin/chromium"
SIZE_TARGET_MB, RENDER_TARGET_S = 10.0, 3.0


def largest_trace() -> tuple[Path, int]:
    best: tuple[Path, int] | None = None
    for path in sorted(p for p in TRACES.rglob("*") if p.is_file() and not p.name.endswith((".md", ".csv"))):
        try:
            trace = opscope.load(path)
        except opscope.OpscopeError:
            continue
        if trace.count() and (best is None or trace.count() > best[1]):
            best = (path, trace.count())
    assert best is not None, f"no trace found under {TRACES}"
    return best


def build(path: Path, out: Path) -> float:
    def once() -> None:
        data = trace_report(trace_bundle(opscope.load(path)))
        out.write_text(render_html(data, title=path.name), encoding="utf-8")

    return best_of(once, 2)


def render(out: Path) -> tuple[float, float]:
    """(best seconds to every view drawn, ms of one full-zoom timeline redraw)."""
    from playwright.sync_api import sync_playwright

    times, redraw = [], 0.0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        for _ in range(3):
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.goto(out.resolve().as_uri())
            page.wait_for_function("window.opscopeReady !== undefined", timeout=60_000)
            times.append(page.evaluate("window.opscopeReady") / 1e3)
            redraw = page.evaluate("window.opscopeTimeline.reset().ms")
            page.close()
        browser.close()
    return min(times), redraw


def report_line(label: str, out: Path, build_s: float, with_browser: bool) -> None:
    size_mb = out.stat().st_size / 1e6
    print(
        f"{label}\n  report size: {size_mb:.2f} MB (target < {SIZE_TARGET_MB:.0f} MB: "
        f"{size_mb / SIZE_TARGET_MB:.2f} of it)\n  build (load from cache + data + HTML): {build_s:.2f} s"
    )
    if with_browser:
        seconds, redraw = render(out)
        print(
            f"  headless render to every view drawn: {seconds:.2f} s (target < {RENDER_TARGET_S:.0f} s: "
            f"{seconds / RENDER_TARGET_S:.2f} of it); one full-zoom timeline redraw: {redraw:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kernels", type=int, default=200_000, help="kernels of the hand-made trace (0: skip)"
    )
    args = parser.parse_args()
    with_browser = Path(CHROMIUM).exists()
    if not with_browser:
        print(f"(no {CHROMIUM}: sizes and build times only)")
    with tempfile.TemporaryDirectory() as tmp:
        path, events = largest_trace()
        out = Path(tmp) / "largest.html"
        report_line(
            f"largest corpus trace: {path.relative_to(TRACES)} ({events:,} events)",
            out,
            build(path, out),
            with_browser,
        )
        if args.kernels:
            from rawfixtures import many_kernels_trace

            synthetic = many_kernels_trace(Path(tmp) / "many.json.gz", args.kernels)
            out = Path(tmp) / "many.html"
            report_line(
                f"hand-made trace: {args.kernels:,} kernels on 4 streams",
                out,
                build(synthetic, out),
                with_browser,
            )


if __name__ == "__main__":
    main()
