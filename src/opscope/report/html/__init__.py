"""The HTML reports: computed results (the bundle of `analysis/bundle.py`, a diff, ranks, the history) packed into
one self-contained page. `page` renders a payload through a Jinja2 template (`templates/`) with the inlined
scripts and the charting library (`assets/`); `trace_report` and its panel modules (`cpu_lanes`, `cpu_panel`,
`critical_path_report`, `efficiency_report`, `memory_panel`, `timeline_data`) lay the bundle out
as the `opscope.report/1` payload; `history_html` does the same for the run history. Nothing here computes a
figure (tests/test_layers.py)."""
