"""Timeline: when the GPU works and why it waits.

Step windows (`windows`: ProfilerStep#N and `--steps`) and the analysed window (`window`), interval arithmetic
(`intervals`), row selection by device, stream and step (`select`), the GPU activity prepared once (`activity`),
busy / idle per device and stream (`busy`), idle split by cause (`idle`), launch delay (`launch_delay`),
synchronising calls (`syncs`) and memory copies (`memcpy`). Definitions: docs/analysis-timeline.md.
"""
