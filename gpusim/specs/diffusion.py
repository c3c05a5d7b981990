"""A text-to-video diffusion model (Wan 2.2 T2V-A14B): a text encoder, a diffusion transformer run for a fixed
number of denoising steps over the video latent (two experts switching at a boundary timestep), and a VAE
decoder. The generation settings (resolution, frames, steps, guidance) belong to the benchmark."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpusim.specs.sourced import Sourced

Size = Annotated[int, Field(ge=1, le=10**7)]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Generation(_Spec):
    """What one request generates: `height`×`width`, `frames`, `steps` denoising steps, classifier-free guidance
    (a conditional and an unconditional pass per step when `cfg`), a `text_tokens` prompt."""

    height: Size
    width: Size
    frames: Size
    steps: Size
    cfg: bool = True
    text_tokens: Size = 512
    source: str


class DiffusionModelSpec(_Spec):
    """A DiT video model as its config describes it (the fields that set cost)."""

    id: str
    kind: Literal["diffusion"]
    name: str
    hf_id: str
    num_layers: Size
    """Transformer blocks of one expert."""
    hidden_size: Size
    ffn_size: Size
    num_heads: Size
    text_dim: Size
    """Width of the text encoder's output (the cross-attention keys' input)."""
    experts: Size = 1
    """Whole-model experts chosen by timestep (Wan 2.2: high-noise for t ≥ boundary, low-noise below)."""
    boundary: float = Field(1.0, gt=0, le=1)
    """Fraction of the training timesteps above which the high-noise expert runs."""
    sample_shift: float = Field(1.0, gt=0)
    """Flow-matching timestep shift: t = shift·s / (1 + (shift − 1)·s) for s from 1 to 0."""
    patch: tuple[int, int, int]
    vae_stride: tuple[int, int, int]
    latent_channels: Size
    text_encoder_params: Sourced
    """umT5-XXL encoder weights (run once per prompt, twice with guidance)."""
    vae_decode_flops_per_pixel: Sourced
    """FLOPs of the VAE decoder per output pixel (per frame)."""
    source: str

    # ---- sizes ----------------------------------------------------------------------------------
    def latent_tokens(self, g: Generation) -> int:
        """DiT tokens of one video: latent frames × latent height × latent width over the patch."""
        st, sh, sw = self.vae_stride
        pt, ph, pw = self.patch
        frames = (g.frames - 1) // st + 1
        return math.ceil(frames / pt) * (g.height // sh // ph) * (g.width // sw // pw)

    @property
    def block_params(self) -> int:
        """One DiT block: self-attention q/k/v/o, cross-attention q/o on the video and k/v on the text, the MLP."""
        d = self.hidden_size
        return 6 * d * d + 2 * self.text_dim * d + 2 * d * self.ffn_size

    @property
    def expert_params(self) -> int:
        return self.num_layers * self.block_params

    @property
    def params(self) -> int:
        """DiT weights of every expert (all resident: the switch happens within one request)."""
        return self.experts * self.expert_params

    def high_noise_steps(self, g: Generation) -> int:
        """Denoising steps on the high-noise expert: those whose shifted timestep is ≥ the boundary."""
        if self.experts < 2:
            return g.steps
        count = 0
        for i in range(g.steps):
            s = 1 - i / g.steps
            t = self.sample_shift * s / (1 + (self.sample_shift - 1) * s)
            count += t >= self.boundary
        return count


__all__ = ["DiffusionModelSpec", "Generation"]
