"""torch.compile recompiling every 25 steps from ONSET on: each new input shape fails the guards (dynamic=False)."""

import torch
import torch._dynamo
from _common import ONSET, STEPS, train_step

import opscope

for name in (
    "recompile_limit",
    "cache_size_limit",
    "accumulated_recompile_limit",
    "accumulated_cache_size_limit",
):
    if hasattr(torch._dynamo.config, name):
        setattr(torch._dynamo.config, name, 10_000)


@torch.compile(backend="eager", dynamic=False)
def features(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2 + 1


rows = 64
for step in range(STEPS):
    if step >= ONSET and step % 25 == 0:
        rows += 1
    x = features(torch.randn(rows, 64))
    train_step(x)
    opscope.step()
