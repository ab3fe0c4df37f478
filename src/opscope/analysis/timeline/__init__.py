"""Timeline: when the GPU works and why it waits.

The GPU activity prepared once (`activity`), busy / idle per device and stream (`busy`), idle split by cause
(`idle`), launch delay (`launch_delay`), synchronising calls (`syncs`) and memory copies (`memcpy`). Step windows,
the analysed window, intervals and selections are on the ground floor (`analysis/base/`).
Definitions: docs/analysis-timeline.md.
"""
