"""A list that keeps a 256 KiB tensor every step from ONSET on (a loss history kept as tensors): memory creeps up."""

import torch
from _common import ONSET, STEPS, train_step

import opscope

x = torch.randn(64, 64)
kept = []
for step in range(STEPS):
    train_step(x)
    if step >= ONSET:
        kept.append(torch.ones(256 * 256, dtype=torch.float32))
    opscope.step()
