"""Cost of generating videos with a diffusion transformer (Wan 2.2 T2V-A14B) on one instance.

One request is one video: the text encoder once (prompt and, with guidance, the negative prompt), `steps`
denoising steps of the DiT over the video latent, each a conditional and an unconditional pass (CFG), the
high-noise expert for the steps whose shifted timestep is at or above the boundary and the low-noise one
after (both resident; the same cost per step), then the VAE decode.

An instance spreads one video over its `tp` GPUs as submitters do (xDiT/USP): CFG parallelism puts the two
guidance passes on two halves of the GPUs (when `tp` is even), and sequence parallelism splits the latent
tokens over the GPUs of each half. Ulysses all-to-all re-shards q, k, v and the attention output by heads
(degree gcd(sp, heads)); the rest of the degree is ring attention, passing key/value shards around. The
communication crosses NVLink inside the domain and the scale-out fabric beyond, and is not overlapped.
Per GPU, GEMM and attention FLOPs fall as 1/sp, the weights are replicated, and the VAE decode is split over
up to `VAE_PARALLEL_MAX` of the instance's GPUs. This is the layout of NVIDIA's v6.1 harness: SingleStream on a
GB300 NVL72 is cfg 2 × Ulysses 4 × a 2-D context-parallel degree 9, on a B300x8 cfg 2 × Ulysses 4, and
Offline one GPU per video.
"""

from __future__ import annotations

import math

from gpusim.errors import InputError
from gpusim.perf.items import Kernels
from gpusim.perf.ops import wider
from gpusim.perf.step import BatchShape
from gpusim.specs.deployment import Deployment
from gpusim.specs.diffusion import DiffusionModelSpec, Generation
from gpusim.specs.hardware import Hardware
from gpusim.specs.software import SoftwareProfile, load_software

BF16 = 2.0
VAE_PARALLEL_MAX = 8
"""GPUs one video's VAE decode is split over at most: NVIDIA's v6.1 Wan harness runs vae=8 on B300x8 and vae=4 on
GB300 x4 and x72 (grade B, its README's parallelism table)."""
WORKSPACE_SHARE = 0.1
"""HBM kept for activations and the framework beside the weights (grade D)."""


class DiffusionCost:
    """Seconds to generate a batch of videos on one instance (`ItemCost`)."""

    def __init__(self, hw: Hardware, model: DiffusionModelSpec, gen: Generation, dep: Deployment,
                 software: SoftwareProfile | None = None, source: str = "deployment") -> None:
        sw = (software or load_software(dep.software)).for_architecture(hw.gpu.architecture)
        self.hw, self.model, self.gen, self.dep = hw, model, gen, dep
        self.k = Kernels(hw, sw)
        self.gpus = dep.tp * dep.pp
        self.cfg_groups = 2 if gen.cfg and self.gpus % 2 == 0 else 1
        self.sp = self.gpus // self.cfg_groups
        self.ulysses = math.gcd(self.sp, model.num_heads)
        self.ring = self.sp // self.ulysses
        self.dtype = wider(dep.weights, dep.activations)
        self.attn_dtype = "bf16" if dep.activations == "bf16" else "fp8"
        self.tokens = model.latent_tokens(gen)
        inside = self.gpus <= hw.domain_gpus
        self._bw = (hw.domain_bandwidth(self.gpus - 1, alltoall=True) if inside else hw.scaleout_bandwidth) * \
            sw.alltoall_efficiency.value
        self._alpha = (sw.nvlink_hop_latency_us.value if inside else hw.scaleout.latency_us.value) * 1e-6
        self.check_memory(source)

    # ---- memory --------------------------------------------------------------------------------
    def weights_per_gpu(self) -> float:
        """Both experts (replicated under sequence parallelism) and the text encoder in bf16."""
        m = self.model
        return m.params * Kernels.bytes_per_value(self.dep.weights) + m.text_encoder_params.value * BF16

    def check_memory(self, source: str) -> None:
        need = self.weights_per_gpu() / (1 - WORKSPACE_SHARE)
        if need > self.hw.hbm_bytes:
            raise InputError(source, "weights", f"{self.model.id} needs {need / 2**30:.0f} GiB per GPU at "
                             f"{self.dep.weights} weights but {self.hw.gpu.name} has "
                             f"{self.hw.hbm_bytes / 2**30:.0f} GiB; valid: fp8 or fp4 weights")

    # ---- one pass of the DiT -------------------------------------------------------------------
    def pass_seconds(self, videos: int = 1) -> dict[str, float]:
        """One forward pass of one expert over `videos` latents, per GPU of a CFG group: GEMMs, attention,
        communication."""
        m, n = self.model, self.tokens / self.sp * videos
        d, L = m.hidden_size, self.gen.text_tokens
        video_params = 6 * d * d + 2 * d * m.ffn_size  # self-attn q,k,v,o; cross-attn q,o; MLP
        wbytes = Kernels.bytes_per_value(self.dep.weights)
        gemm = m.num_layers * self.k.gemm(2 * n * video_params, m.block_params * wbytes, n, self.dtype,
                                          act_bytes=n * d * BF16 * 10)
        keys = self.tokens  # each query sees the whole latent (after the all-to-all or around the ring)
        self_attn = m.num_layers * self.k.attention(4 * n * keys * d, n * keys * m.num_heads, self.attn_dtype)
        cross = m.num_layers * self.k.attention(4 * n * L * d, n * L * m.num_heads, self.attn_dtype)
        shard = n * d * BF16
        a2a = 4 * shard * (self.ulysses - 1) / self.ulysses / self._bw + self._alpha * math.log2(self.ulysses) \
            if self.ulysses > 1 else 0.0
        ring = (self.ring - 1) * (2 * shard / self._bw + self._alpha) if self.ring > 1 else 0.0
        return {"gemm": gemm, "attention": self_attn + cross, "communication": m.num_layers * (a2a + ring)}

    def parts(self, videos: int = 1) -> dict[str, float]:
        """Seconds of a batch of `videos` by stage (denoising split by expert, text encoder, VAE)."""
        g, m = self.gen, self.model
        one = sum(self.pass_seconds(videos).values())
        passes = (2 if g.cfg else 1) / self.cfg_groups  # guidance passes each CFG group runs per step
        step = passes * one + (self._cfg_gather(videos) if self.cfg_groups > 1 else 0.0)
        high = m.high_noise_steps(g)
        prompts = videos * (2 if g.cfg else 1)
        text = self.k.gemm(2 * m.text_encoder_params.value * g.text_tokens * prompts,
                           m.text_encoder_params.value * BF16, g.text_tokens * prompts, "bf16")
        pixels = g.frames * g.height * g.width * videos
        vae = self.k.gemm(m.vae_decode_flops_per_pixel.value * pixels / min(self.gpus, VAE_PARALLEL_MAX), 0.0,
                          pixels, "bf16")
        return {"text_encoder": text, "denoise_high_noise": high * step,
                "denoise_low_noise": (g.steps - high) * step, "vae_decode": vae}

    def _cfg_gather(self, videos: int) -> float:
        """The two guidance branches exchange their noise predictions once a step."""
        c = self.model.latent_channels * self.tokens / self.sp * videos * BF16
        return c / self._bw + self._alpha

    # ---- the engine's interface ------------------------------------------------------------------
    def step_time(self, b: BatchShape) -> float:
        videos = b.prefill_seqs
        return sum(self.parts(videos).values()) if videos > 0 else 0.0

    def items_per_s(self, batch: int, work: float) -> float:
        return batch / sum(self.parts(batch).values())


__all__ = ["DiffusionCost"]
