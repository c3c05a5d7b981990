"""A vision encoder in front of a language model (Qwen3-VL): a ViT over image patches and the merger that
folds `spatial_merge_size`² patches into one language-model token."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Size = Annotated[int, Field(ge=1, le=10**7)]


class VisionEncoder(BaseModel):
    """The ViT of a vision-language model as its config.json `vision_config` describes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    depth: Size
    hidden_size: Size
    intermediate_size: Size
    num_heads: Size
    patch_size: Size
    temporal_patch_size: Size = 2
    """An image is repeated over this many frames and patched as one 3-D patch (Qwen-VL's video patching)."""
    spatial_merge_size: Size = 2
    out_hidden_size: Size
    """The language model's hidden size, which the merger projects to."""
    deepstack_layers: int = Field(0, ge=0)
    """Extra mergers that feed intermediate ViT features into early LM layers (Qwen3-VL deepstack)."""
    source: str

    @property
    def patches_per_token(self) -> int:
        """ViT patches folded into one language-model (vision) token."""
        return self.spatial_merge_size**2

    @property
    def block_params(self) -> int:
        """One ViT block: qkv and output projections, and a two-matrix MLP (biases and norms ignored)."""
        h = self.hidden_size
        return 4 * h * h + 2 * h * self.intermediate_size

    @property
    def merger_params(self) -> int:
        """One patch merger: an MLP from merge²·hidden to merge²·hidden to the LM width."""
        w = self.hidden_size * self.patches_per_token
        return w * w + w * self.out_hidden_size

    @property
    def patch_embed_params(self) -> int:
        return 3 * self.temporal_patch_size * self.patch_size**2 * self.hidden_size

    @property
    def params(self) -> int:
        """All weights of the encoder (blocks, patch embedding, the main merger and the deepstack mergers)."""
        return (self.depth * self.block_params + self.patch_embed_params
                + (1 + self.deepstack_layers) * self.merger_params)


__all__ = ["VisionEncoder"]
