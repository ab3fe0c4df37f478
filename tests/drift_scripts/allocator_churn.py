"""From ONSET on, more short-lived buffers every step (freed at once, asked for again): allocations per step rise."""

import torch
from _common import ONSET, STEPS, train_step

import opscope

x = torch.randn(64, 64)
for step in range(STEPS):
    train_step(x)
    for _ in range(max(0, step - ONSET) // 25):
        torch.empty(1024).fill_(1.0)
    opscope.step()
