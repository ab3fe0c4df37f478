"""A DataLoader whose items take longer and longer from ONSET on (a dataset reading ever bigger files)."""

import time

import torch
from _common import ONSET, STEPS, train_step
from torch.utils.data import DataLoader, Dataset

import opscope


class Slower(Dataset):
    def __len__(self) -> int:
        return STEPS

    def __getitem__(self, i: int) -> torch.Tensor:
        if i >= ONSET:
            time.sleep(2e-6 * (i - ONSET))
        return torch.randn(64, 64)


for x in DataLoader(Slower(), batch_size=None, num_workers=0):
    train_step(x)
    opscope.step()
