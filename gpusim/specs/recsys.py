"""A generative recommender (DLRMv3): HSTU layers over a user's interaction history with the candidates to
score appended, and embedding tables looked up for every item of the sequence."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Size = Annotated[int, Field(ge=1, le=10**12)]


class EmbeddingTable(BaseModel):
    """One embedding table: `rows` × `dim` values of `bytes_per_value` bytes."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rows: Size
    dim: Size
    bytes_per_value: float = 2.0
    lookups_per_token: float = 1.0
    """Rows read per sequence token (item id and category per item; the user id once per query is ~0)."""

    @property
    def bytes(self) -> float:
        return self.rows * self.dim * self.bytes_per_value

    @property
    def row_bytes(self) -> float:
        return self.dim * self.bytes_per_value


class RecsysModelSpec(BaseModel):
    """An HSTU ranking model as its configs describe it (the fields that set cost)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: Literal["recsys"]
    name: str
    hf_id: str = "-"
    num_layers: Size
    embedding_dim: Size
    num_heads: Size
    qk_dim: Size
    linear_dim: Size
    candidates: Size
    """Candidates scored per query (appended to the history; they attend to it, not to each other)."""
    tables: dict[str, EmbeddingTable]
    source: str

    @property
    def layer_params(self) -> int:
        """One HSTU layer: the fused u/v/q/k projection and the output projection."""
        d, h = self.embedding_dim, self.num_heads
        return d * h * (2 * self.linear_dim + 2 * self.qk_dim) + h * self.linear_dim * d

    @property
    def dense_params(self) -> int:
        return self.num_layers * self.layer_params

    @property
    def embedding_bytes(self) -> float:
        return sum(t.bytes for t in self.tables.values())

    @property
    def lookup_bytes_per_token(self) -> float:
        return sum(t.row_bytes * t.lookups_per_token for t in self.tables.values())


__all__ = ["EmbeddingTable", "RecsysModelSpec"]
