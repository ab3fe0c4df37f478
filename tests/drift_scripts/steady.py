"""No drift: the same step 1,500 times."""

import torch
from _common import STEPS, train_step

import opscope

x = torch.randn(64, 64)
for _ in range(STEPS):
    train_step(x)
    opscope.step()
