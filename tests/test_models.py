"""Model architectures: YAML validity, derived parameter counts and KV-cache sizes."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml

from gpusim.specs.model import MLA, ModelSpec, MoE, load_model, model_names, tokens_per_step

# our id -> (reference id in ../shared/reference/model_specs.yaml, KV key in that entry)
REFERENCE = {
    "deepseek-r1": ("deepseek_v3", "kv_cache_bytes_per_token_bf16_mla"),
    "deepseek-v3": ("deepseek_v3", "kv_cache_bytes_per_token_bf16_mla"),
    "gpt-oss-120b": ("gpt_oss_120b", "kv_cache_bytes_per_token_bf16_full_layers"),
    "gpt-oss-20b": ("gpt_oss_20b", "kv_cache_bytes_per_token_bf16_full_layers"),
    "llama3.1-405b": ("llama31_405b", "kv_cache_bytes_per_token_bf16"),
    "llama3.1-70b": ("llama31_70b", "kv_cache_bytes_per_token_bf16"),
    "llama3.1-8b": ("llama31_8b", "kv_cache_bytes_per_token_bf16"),
    "llama2-70b": ("llama2_70b", "kv_cache_bytes_per_token_bf16"),
    "mixtral-8x7b": ("mixtral_8x7b", "kv_cache_bytes_per_token_bf16"),
    "qwen3-235b-a22b": ("qwen3_235b_a22b", "kv_cache_bytes_per_token_bf16"),
    "qwen3-32b": ("qwen3_32b", "kv_cache_bytes_per_token_bf16"),
}
MOE_MODELS = ["deepseek-r1", "deepseek-v3", "gpt-oss-120b", "gpt-oss-20b", "mixtral-8x7b", "qwen3-235b-a22b"]
TOL = 0.015


@cache
def _read_reference(path: Path) -> dict[str, dict]:
    data = yaml.safe_load(path.read_text())
    return {m["id"]: m for m in data["models"]}


@pytest.fixture
def reference(shared_dir: Path) -> dict[str, dict]:
    """model_specs.yaml entries by reference id (skips when ../shared is absent)."""
    return _read_reference(shared_dir / "reference" / "model_specs.yaml")


def test_catalog_complete():
    assert set(REFERENCE) <= set(model_names())


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_model_loads_with_matching_id(name):
    m = load_model(name)
    assert m.id == name
    assert m.source.strip()


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_params_and_kv_match_reference(name, reference):
    m = load_model(name)
    ref_id, kv_key = REFERENCE[name]
    ref = reference[ref_id]
    assert m.hf_id.split("/")[0] == ref["hf_id"].split("/")[0]

    total = ref.get("total_params_b_derived", ref.get("total_params_b_official"))
    assert m.total_params / 1e9 == pytest.approx(total, rel=TOL)

    if "active_params_b_derived" in ref:
        assert m.active_params / 1e9 == pytest.approx(ref["active_params_b_derived"], rel=TOL)
    elif "active_params_b_official" in ref:
        # vendors' convention excludes the input-embedding lookup (see the reference's header)
        active = (m.active_params - m.vocab_size * m.hidden_size) / 1e9
        assert active == pytest.approx(ref["active_params_b_official"], rel=TOL)

    assert m.kv_bytes_per_token(2) == ref[kv_key]


def test_deepseek_mtp_module_size():
    # DeepSeek's weights doc: MTP module 11.5B unique (reference mtp_unique_params_b_official)
    assert load_model("deepseek-r1").mtp_params / 1e9 == pytest.approx(11.5, rel=0.03)


@pytest.mark.parametrize("name", MOE_MODELS)
def test_moe_active_below_total(name):
    m = load_model(name)
    assert m.moe is not None
    assert 0 < m.active_params < m.total_params


def test_deepseek_r1_and_v3_share_architecture():
    r1, v3 = load_model("deepseek-r1"), load_model("deepseek-v3")
    measured = {"id": True, "name": True, "hf_id": True, "source": True, "mtp_measured": True,
                "moe": {"unbalanced_load": True}}  # measurements on DeepSeek-R1 only
    assert r1.model_dump(exclude=measured) == v3.model_dump(exclude=measured)


# ---- synthetic models: hand-computed sizes, no reference data needed ---------------------------
def _tiny(**kw) -> ModelSpec:
    base = dict(
        id="tiny",
        name="tiny",
        hf_id="x/tiny",
        num_layers=4,
        hidden_size=64,
        num_attention_heads=8,
        num_kv_heads=2,
        head_dim=8,
        vocab_size=100,
        intermediate_size=128,
        source="test",
    )
    return ModelSpec(**{**base, **kw})


def test_gqa_kv_hand_computed():
    m = _tiny()
    # 4 layers x (K + V) x 2 kv heads x 8 dims x 2 bytes
    assert m.kv_bytes_per_token(2) == 4 * 2 * 2 * 8 * 2 == 256
    assert m.kv_bytes(1000, 2) == 256 * 1000
    # params: attention 64*64 (q) + 2*64*16 (k, v) + 64*64 (o); ffn 3*64*128; embed + head 2*100*64
    attn = 64 * 64 + 2 * 64 * 16 + 64 * 64
    assert m.total_params == 4 * (attn + 3 * 64 * 128) + 2 * 100 * 64
    assert m.active_params == m.total_params


def test_mla_kv_hand_computed():
    mla = MLA(q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
    m = _tiny(mla=mla)
    # 4 layers x (latent 32 + rope key 4) x 2 bytes; independent of the head counts
    assert m.kv_bytes_per_token(2) == 4 * 36 * 2 == 288
    assert m.kv_bytes(10, 1) == 4 * 36 * 10


def test_sliding_window_caps_kv():
    m = _tiny(sliding_window=16, sliding_layers=2)
    per_layer = 2 * 2 * 8 * 2  # K+V x kv heads x head_dim x bytes
    assert m.kv_bytes_per_token(2) == 2 * per_layer  # only the 2 full-attention layers grow
    # below the window every layer holds the whole context
    assert m.kv_bytes(10, 2) == 4 * per_layer * 10
    # beyond it the 2 sliding layers hold 16 tokens each
    assert m.kv_bytes(1000, 2) == 2 * per_layer * 1000 + 2 * per_layer * 16


def test_synthetic_moe_active_params():
    moe = MoE(num_experts=8, top_k=2, expert_intermediate_size=32, shared_experts=1, first_dense_layers=1)
    m = _tiny(moe=moe)
    expert = 3 * 64 * 32
    assert m.num_moe_layers == 3
    inactive = 3 * (8 - 2) * expert  # 6 idle routed experts in each of 3 MoE layers
    assert m.total_params - m.active_params == inactive
    assert m.active_params < m.total_params


def test_qwen35_hybrid_matches_its_name_and_keeps_kv_only_in_full_layers():
    m = load_model("qwen3.5-397b-a17b")
    assert m.total_params / 1e9 == pytest.approx(397, rel=TOL)  # "397B-A17B"
    assert m.active_params / 1e9 == pytest.approx(17, rel=0.03)
    assert m.full_attention_layers == 15 and m.num_linear_layers == 45
    assert m.kv_bytes_per_token(2) == 15 * 2 * 2 * 256 * 2  # 15 layers x K+V x 2 KV heads x 256 x bf16
    # per sequence: 45 layers x (64 value heads x 128 x 128 fp32 state + 12288 channels x 3 conv taps x bf16)
    assert m.state_bytes_per_sequence == 45 * (64 * 128 * 128 * 4 + 12288 * 3 * 2)


def test_linear_attention_params_by_hand():
    from gpusim.specs.model import LinearAttention

    la = LinearAttention(layers=2, num_key_heads=2, key_head_dim=4, num_value_heads=4, value_head_dim=4)
    qkv = 2 * 2 * 4 + 4 * 4  # q and k, then v
    # in-projection to q, k, v, the gate z (value width) and per-value-head beta and decay; conv; out-projection
    assert la.params(64) == 64 * (qkv + 16 + 2 * 4) + qkv * 4 + 16 * 64
    m = _tiny(linear_attention=la)
    assert m.full_attention_layers == 2
    assert m.total_params - _tiny().total_params == 2 * (la.params(64) - _tiny().attention_params)


def test_measured_tokens_per_step_scale_every_depths_acceptance_by_one_factor():
    """Default acceptance (0.8, 0.5) yields 1 + 0.8 + 0.4 = 2.2 tokens at two drafts. Measured at one draft on
    other prompts: 1.4 tokens, so the factor is 0.4 / 0.8 = 0.5 and the acceptance (0.4, 0.25), 1.5 tokens at two
    drafts. Prompts without a measurement keep None."""
    base = load_model("deepseek-r1").model_dump()
    base.update(mtp_acceptance=[0.8, 0.5], mtp_measured=[
        {"prompts": "p", "drafts": 1, "tokens_per_step": 1.4, "source": "hand-worked", "grade": "C"}])
    model = ModelSpec(**base)
    acceptance, measured = model.mtp_acceptance_on("p")
    assert acceptance == pytest.approx([0.4, 0.25], abs=1e-9)
    assert tokens_per_step(acceptance) == pytest.approx(1.5, abs=1e-9)
    assert measured.source == "hand-worked"
    assert model.mtp_acceptance_on("other prompts") is None
