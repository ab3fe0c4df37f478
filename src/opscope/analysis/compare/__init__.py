"""Compare: traces side by side.

The figures both comparisons share (`headline`: scope, GPU activity and operators in it, busy time), one trace
reduced to what a comparison needs (`profile`), `opscope diff` (`diff`) with its CI gates (`gates`), and
`opscope ranks` (`ranks`). Definitions: docs/compare.md.
"""
