"""A tensor that grows every step from ONSET on (an accumulated batch never cut): the matmul gets slower."""

import torch
from _common import ONSET, STEPS, train_step

import opscope

x = torch.randn(64, 64)
for step in range(STEPS):
    if step >= ONSET:
        x = torch.cat([x, torch.randn(8, 64)])
    train_step(x)
    opscope.step()
