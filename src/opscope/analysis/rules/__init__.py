"""Rules: advice derived from the other rooms' results, one rule per kind of finding.

`model` holds the data types (a `Rule` is data: id, source, metric, default threshold, advice, and the check
that computes its trigger); `context` prepares what every check reads once per trace; each rule family is one
small module (`memcpy`, `syncs`, `gemm`, `attention`, `host`, `launch`, `layout`, `idle`, `memory`,
`occupancy`); `registry` lists them (adding a rule = one module + one line there); `engine` runs them, sets
the severity from the time at stake and applies thresholds from a TOML file; `advise` is the entry point
(`analyze`, then the rules over its result). The findings they produce are `analysis/findings.py`'s types. Definitions: docs/advice.md.
"""
