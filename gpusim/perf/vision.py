"""The vision encoder's cost (Qwen3-VL): an image of `v` language-model tokens is `v · merge²` ViT patches;
each of the `depth` blocks runs its projections and MLP over the patches and full attention among one
image's patches (quadratic in the patches), then the mergers fold merge² patches into one LM token
(`gpusim/specs/vision.py`). The image tokens then enter the language model's prefill as prompt tokens.

Placement: on the same GPUs as the language model (the encoder runs inside the prefill step, its seconds
added per prompt token at the dataset's mean, `VisionStepCost`), or as its own pool of instances in
front of the language model (`Deployment.vision_encoder_gpus`, whose requests are images served whole,
`VisionEncoderCost`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpusim.perf.items import Kernels
from gpusim.perf.step import BatchShape, StepBreakdown
from gpusim.specs.hardware import Dtype, Hardware
from gpusim.specs.software import SoftwareProfile
from gpusim.specs.vision import VisionEncoder


class VisionCost:
    """Seconds to encode images on one GPU of an encoder instance (`tp` GPUs split the blocks' width)."""

    def __init__(self, hw: Hardware, enc: VisionEncoder, sw: SoftwareProfile, dtype: Dtype = "bf16",
                 tp: int = 1) -> None:
        self.enc, self.dtype, self.tp = enc, dtype, tp
        self.k = Kernels(hw, sw)
        self._wbytes = Kernels.bytes_per_value(dtype)

    def seconds(self, tokens: float, images: float = 1.0) -> float:
        """Encode `images` images of `tokens` vision tokens each (one batch step)."""
        return self.batch_seconds(tokens * images, tokens * tokens * images, images)

    def batch_seconds(self, tokens: float, tokens_sq: float, images: float) -> float:
        """Encode `images` images of `tokens` vision tokens in all, Σ tokens² over the images being `tokens_sq`
        (attention is quadratic within each image)."""
        if tokens <= 0 or images <= 0:
            return 0.0
        e, tp = self.enc, self.tp
        m = e.patches_per_token
        rows = tokens * m
        h = e.hidden_size
        act = 2.0 * rows * h * 2  # bf16 in and out of each GEMM group
        blocks = e.depth * self.k.gemm(2 * rows * e.block_params / tp, e.block_params * self._wbytes / tp, rows,
                                       self.dtype, act * 6 / tp)
        pairs = tokens_sq * m * m  # patch pairs within each image
        attn = e.depth * self.k.attention(4 * pairs * h / tp, pairs * e.num_heads / tp)
        merge = (1 + e.deepstack_layers) * self.k.gemm(2 * tokens * e.merger_params / tp,
                                                       e.merger_params * self._wbytes / tp, tokens, self.dtype)
        embed = self.k.gemm(2 * rows * e.patch_embed_params, e.patch_embed_params * self._wbytes, rows, self.dtype)
        return blocks + attn + merge + embed

    def mean_seconds(self, image_tokens: Sequence[float] | np.ndarray) -> float:
        """Mean seconds per image over a dataset's images (one at a time)."""
        a = np.asarray(image_tokens, dtype=np.float64)
        return float(np.mean([self.seconds(t) for t in a])) if a.size else 0.0


def image_tokens(prompt_tokens: np.ndarray, text_tokens: float) -> np.ndarray:
    """The image tokens of each prompt: its tokens beyond the mean text tokens (at least one merged token)."""
    return np.maximum(np.asarray(prompt_tokens, dtype=np.float64) - text_tokens, 1.0)


class VisionStepCost:
    """The language model's step cost with the encoder on the same GPUs: every prompt token of a prefill
    step carries the dataset's mean encoder seconds per prompt token (image seconds / prompt tokens)."""

    def __init__(self, llm, seconds_per_prompt_token: float) -> None:
        self.llm = llm
        self.seconds_per_prompt_token = seconds_per_prompt_token

    def __getattr__(self, name: str):
        # the LM's software, deployment, sources, breakdown parts; `llm` itself is not set yet while pickle
        # rebuilds the object (it looks up __setstate__ first), so its absence is an AttributeError, not a loop
        if "llm" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.llm, name)

    def step_time(self, b: BatchShape) -> float:
        return self.llm.step_time(b) + b.prefill_tokens * self.seconds_per_prompt_token

    def breakdown(self, b: BatchShape) -> StepBreakdown:
        base = self.llm.breakdown(b)
        extra = b.prefill_tokens * self.seconds_per_prompt_token
        return StepBreakdown(base.total_s + extra, base.compute_s + extra, base.memory_s, base.communication_s,
                             base.overhead_s, {**base.by_op, "vision_encoder": extra})


class VisionEncoderCost:
    """An encoder pool's instance: requests are images whose prompt is their vision tokens; a step encodes
    the batch's images (`ItemCost`)."""

    def __init__(self, vision: VisionCost, text_tokens: float = 0.0) -> None:
        self.vision = vision
        self.text_tokens = text_tokens
        """Mean text tokens of a prompt: a mean prompt's image tokens are the rest (`items_per_s`)."""

    def step_time(self, b: BatchShape) -> float:
        """The batch's images whole: the engine's causal pairs of an unchunked image are t(t + 1)/2, so
        Σ t² = 2·pairs − Σ t."""
        if b.prefill_seqs <= 0:
            return 0.0
        return self.vision.batch_seconds(b.prefill_tokens, 2 * b.prefill_attn_pairs - b.prefill_tokens,
                                         b.prefill_seqs)

    def items_per_s(self, batch: int, work: float) -> float:
        """Images per second at `batch` images from prompts of `work` tokens (text tokens taken off)."""
        return batch / self.vision.seconds(max(work - self.text_tokens, 1.0), batch)


__all__ = ["VisionCost", "VisionEncoderCost", "VisionStepCost", "image_tokens"]
