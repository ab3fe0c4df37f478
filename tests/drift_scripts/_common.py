"""Shared by the drift scripts: a tiny model, its optimizer, and the planted drift's start."""

import torch

STEPS = 1500
ONSET = 400  # the planted drift starts at this step

torch.manual_seed(0)
torch.set_num_threads(1)
weight = torch.randn(64, 64, requires_grad=True)
optimizer = torch.optim.SGD([weight], lr=1e-4)


def train_step(x: torch.Tensor) -> None:
    loss = (x @ weight).relu().sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
