"""Attribution: which CPU code launched which GPU work.

Over the link table and time nesting of the ground floor (`analysis/base/linking.py`, `nesting.py`): the
per-operator table (`ops`), its
CPU-only view for captures (`cpu_ops`), the operator tree (`tree`), per-step figures (`steps`, the one
definition of busy time per step), and GPU time by the user's source line (`lines`, over the Python frames
told apart by `frames`). Definitions: docs/analysis-attribution.md.
"""

# `opscope tree --python`: how python_function frames show in the tree (here, so the CLI can list the choices
# without importing the analyses).
PYTHON_MODES = ("modules", "all", "none", "user")
# `opscope tree --modules`: repeated nn.Module instances (`Layer_0`, `Layer_1`, ...) merged into one node per
# module type (default), or one node per instance.
MODULE_MODES = ("types", "instances")
# `opscope lines --keep`: the groups of framework frames (analysis/attribution/frames.py), each skipped unless kept.
FRAME_GROUPS = ("torch", "stdlib", "builtins", "compiled")
