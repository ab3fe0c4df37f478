"""A tiny diffusion-style denoiser for `opscope demo`: a UNet-like model (time embedding, residual conv blocks with
GroupNorm and SiLU, one down/up level with a skip connection, self-attention in the middle) and a short
deterministic denoising loop. It is small enough to run in about a second on two CPU cores and has the
operator mix of a real diffusion UNet (convolutions, normalisation, attention, elementwise).

torch is imported when `build_denoiser` runs, so this module can be imported without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from opscope.capture._torch import require_torch


def build_denoiser(channels: int = 4, width: int = 32, seed: int = 0) -> Any:
    """The model: `model(latents [B, channels, H, W], timestep [B]) -> predicted noise`, H and W even."""
    torch = require_torch()
    nn, F = torch.nn, torch.nn.functional
    Module: Any = nn.Module  # torch is imported lazily, so its classes are Any to the type checker

    class ResBlock(Module):
        def __init__(self, c_in: int, c_out: int, t_dim: int) -> None:
            super().__init__()
            self.norm1, self.conv1 = nn.GroupNorm(8, c_in), nn.Conv2d(c_in, c_out, 3, padding=1)
            self.time = nn.Linear(t_dim, c_out)
            self.norm2, self.conv2 = nn.GroupNorm(8, c_out), nn.Conv2d(c_out, c_out, 3, padding=1)
            self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

        def forward(self, x: Any, t_emb: Any) -> Any:
            h = self.conv1(F.silu(self.norm1(x)))
            h = h + self.time(t_emb)[:, :, None, None]
            h = self.conv2(F.silu(self.norm2(h)))
            return h + self.skip(x)

    class Attention(Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.norm, self.qkv, self.out = nn.GroupNorm(8, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

        def forward(self, x: Any) -> Any:
            b, c, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(b, 3, c, h * w).transpose(-1, -2).unbind(1)
            attended = F.scaled_dot_product_attention(q, k, v)
            return x + self.out(attended.transpose(-1, -2).reshape(b, c, h, w))

    class TinyUNet(Module):
        def __init__(self) -> None:
            super().__init__()
            t_dim, wide = 4 * width, 2 * width
            self.width = width
            self.time_mlp = nn.Sequential(nn.Linear(width, t_dim), nn.SiLU(), nn.Linear(t_dim, t_dim))
            self.conv_in = nn.Conv2d(channels, width, 3, padding=1)
            self.down1 = ResBlock(width, width, t_dim)
            self.downsample = nn.Conv2d(width, wide, 3, stride=2, padding=1)
            self.down2 = ResBlock(wide, wide, t_dim)
            self.mid_attn = Attention(wide)
            self.mid = ResBlock(wide, wide, t_dim)
            self.upsample = nn.Conv2d(wide, width, 3, padding=1)
            self.up = ResBlock(2 * width, width, t_dim)
            self.norm_out, self.conv_out = nn.GroupNorm(8, width), nn.Conv2d(width, channels, 3, padding=1)

        def embed(self, timestep: Any) -> Any:
            half = self.width // 2
            freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=timestep.device) / half)
            angles = timestep.float()[:, None] * freqs[None, :]
            return self.time_mlp(torch.cat([angles.sin(), angles.cos()], dim=1))

        def forward(self, latents: Any, timestep: Any) -> Any:
            t_emb = self.embed(timestep)
            skip = self.down1(self.conv_in(latents), t_emb)
            h = self.down2(self.downsample(skip), t_emb)
            h = self.mid(self.mid_attn(h), t_emb)
            h = self.upsample(F.interpolate(h, scale_factor=2.0, mode="nearest"))
            h = self.up(torch.cat([h, skip], dim=1), t_emb)
            return self.conv_out(F.silu(self.norm_out(h)))

    torch.manual_seed(seed)
    return TinyUNet().eval()


def denoise(model: Any, latents: Any, steps: int, on_step: Callable[[int], None] | None = None) -> Any:
    """A deterministic DDIM-style loop over `steps` timesteps from 999 down to 0; `on_step(i)` after each step."""
    torch = require_torch()
    timesteps = torch.linspace(999, 0, steps, device=latents.device).round().long()
    alphas = torch.cos((timesteps.float() / 1000 + 0.008) / 1.008 * math.pi / 2) ** 2  # cosine schedule
    with torch.no_grad():
        for i, t in enumerate(timesteps):
            noise = model(latents, t.expand(latents.shape[0]))
            alpha = alphas[i]
            alpha_next = alphas[i + 1] if i + 1 < steps else torch.tensor(1.0, device=latents.device)
            clean = (latents - (1 - alpha).sqrt() * noise) / alpha.sqrt()
            latents = alpha_next.sqrt() * clean + (1 - alpha_next).sqrt() * noise
            if on_step is not None:
                on_step(i)
    return latents
