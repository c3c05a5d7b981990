"""A round's software as named differences from the current one: profile inheritance (`base`) and CUDA-graph
batch padding, each on a hand-worked case."""

from __future__ import annotations

import pytest
import yaml

from gpusim.errors import InputError
from gpusim.perf.step import BatchShape, StepCostModel
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import load_hardware
from gpusim.specs.model import load_model
from gpusim.specs.software import GraphBatches, load_software, software_overlay

GRAPHS = {"batch_sizes": [256, 128, 512, 384], "padding": True, "source": "test", "grade": "B"}


def test_captured_sizes_pad_up_and_larger_batches_run_unpadded():
    g = GraphBatches(**GRAPHS)
    assert g.batch_sizes == (128, 256, 384, 512)
    assert [g.rows(n) for n in (1, 128, 129, 300, 512, 513)] == [128, 128, 256, 384, 512, 513]
    assert GraphBatches(**{**GRAPHS, "padding": False}).rows(129) == 129


def _child(tmp_path, **fields) -> str:
    path = tmp_path / "child.yaml"
    path.write_text(yaml.safe_dump({"id": "child", "name": "child", "base": "trtllm", **fields}))
    return str(path)


def test_a_profile_with_a_base_holds_the_bases_constants_except_its_own(tmp_path):
    base = load_software("trtllm")
    own = {"value": 0.3, "source": "test", "grade": "D"}
    child = load_software(_child(tmp_path, moe_efficiency_fp4=own,
                                 overrides={"hopper": {"moe_efficiency_fp4": {**own, "value": 0.2}}}))
    assert child.value("step_overhead_us") == base.value("step_overhead_us")
    assert child.table_timing == base.table_timing and child.adp_balance == base.adp_balance
    # the base overrides moe_efficiency_fp4 on Blackwell; the child's top-level value replaces it there too,
    # while its own Hopper override holds and the base's other Blackwell overrides stay
    assert base.for_architecture("blackwell").value("moe_efficiency_fp4") != 0.3
    assert child.for_architecture("blackwell").value("moe_efficiency_fp4") == 0.3
    assert child.for_architecture("hopper").value("moe_efficiency_fp4") == 0.2
    assert (child.for_architecture("blackwell").value("allreduce_busbw_fraction")
            == base.for_architecture("blackwell").value("allreduce_busbw_fraction"))


def test_constants_carried_from_another_stack_take_the_inherited_grade(tmp_path):
    """vllm-rocm is vLLM's constants on ROCm, unmeasured: every one at grade D with a source naming vllm, none of
    vllm's per-architecture overrides or table timing (measured on NVIDIA GPUs), and its own fields kept."""
    vllm, rocm = load_software("vllm"), load_software("vllm-rocm")
    assert rocm.hbm_bandwidth_fraction.value == vllm.hbm_bandwidth_fraction.value
    assert rocm.hbm_bandwidth_fraction.grade == "D" and "vllm" in rocm.hbm_bandwidth_fraction.source
    assert vllm.overrides and not rocm.overrides and not rocm.table_timing and rocm.calibration is None
    own = {"value": 0.3, "source": "test", "grade": "B"}
    child = load_software(_child(tmp_path, inherited_grade="C", gemm_efficiency_max=own))
    assert child.gemm_efficiency_max.grade == "B" and child.gemm_m_half.grade == "C"


def test_an_unknown_base_names_the_profile_and_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"id": "bad", "name": "bad", "base": "no-such-engine"}))
    with pytest.raises(InputError, match="base"):
        load_software(str(path))


def test_v5_1_is_the_current_kernels_with_its_own_moe_kernel_and_graphs():
    v51, now = load_software("trtllm-v5.1"), load_software("trtllm")
    assert v51.value("gemm_efficiency_fp4") == now.value("gemm_efficiency_fp4")
    assert v51.value("moe_efficiency_fp4") < now.value("moe_efficiency_fp4")
    assert v51.graph_batches is not None and now.graph_batches is None
    assert v51.features.max_ep == 8


GB300 = load_hardware("gb300-nvl72")
R1 = load_model("deepseek-r1")
ADP = Deployment(tp=8, ep=8, attention_dp=True, weights="fp4", activations="fp4", kv_cache="fp8", frontend="http")


def _models():
    padded = load_software("trtllm").model_copy(update={"id": "padded", "graph_batches": GraphBatches(**GRAPHS)})
    with software_overlay(padded):
        return StepCostModel(GB300, R1, ADP), StepCostModel(GB300, R1, ADP.model_copy(update={"software": "padded"}))


def _decode(seqs: int, real: int, rank_seqs: int, rank_real: int, context: float = 2000.0) -> BatchShape:
    """A generation step of `seqs` rows, of which `real` read `context` KV tokens each (attention-DP rank: the
    busiest one's `rank_seqs` rows and `rank_real` real sequences)."""
    return BatchShape(decode_seqs=seqs, decode_context=real * context, attn_rank_seqs=rank_seqs,
                      attn_rank_context=rank_real * context)


def test_a_generation_step_computes_its_padded_rows_and_reads_its_real_kv():
    plain, padded = _models()
    # 8 ranks x 130 sequences pad to 8 x 256: the kernels see 2,048 rows, attention reads the real KV (the
    # dummies' context is nothing) and the host handles the 1,040 real sequences
    real = _decode(1040, 1040, 130, 130)
    rows = _decode(2048, 1040, 256, 130)
    host = plain.breakdown(real).by_op["host"]
    assert host == pytest.approx(plain.breakdown(rows).by_op["host"] * 130 / 256)
    assert padded.step_time(real) == pytest.approx(plain.step_time(rows) - plain.breakdown(rows).by_op["host"] + host)
    assert padded.breakdown(real).total_s == pytest.approx(padded.step_time(real))
    # a captured size runs as it is, and a step with prompt tokens runs without a graph
    exact = _decode(1024, 1024, 128, 128)
    assert padded.step_time(exact) == pytest.approx(plain.step_time(exact))
    mixed = BatchShape(prefill_tokens=900, prefill_attn_pairs=900 * 451.0, prefill_seqs=1, decode_seqs=1040,
                       decode_context=1040 * 2000.0, attn_rank_seqs=130, attn_rank_context=130 * 2000.0)
    assert padded.step_time(mixed) == pytest.approx(plain.step_time(mixed))


def test_compiled_token_counts_pad_a_step_with_prompt_tokens():
    """XLA runs compiled shapes only (vLLM TPU): a step of 900 prompt tokens and 100 generating sequences (1,000
    tokens) runs its GEMMs, experts and collectives at the next compiled count, 1,024, as a step of 924 prompt
    tokens would, while its attention and LM head see the real 900 tokens and 101 rows. A generation-only step
    is padded by its sequences, not its tokens."""
    g = GraphBatches(**{**GRAPHS, "token_sizes": [4096, 1024, 2048]})
    assert g.token_sizes == (1024, 2048, 4096)
    assert [g.tokens(n) for n in (1, 1000, 1024, 1025, 5000)] == [1024, 1024, 1024, 2048, 5000]
    assert GraphBatches(**GRAPHS).tokens(1000) == 1000  # CUDA engines: no token padding

    tp = Deployment(tp=8, ep=8, weights="fp4", activations="fp4", kv_cache="fp8")
    xla = load_software("trtllm").model_copy(update={"id": "xla", "graph_batches": g})
    with software_overlay(xla):
        plain = StepCostModel(GB300, R1, tp)
        padded = StepCostModel(GB300, R1, tp.model_copy(update={"software": "xla"}))

    def mixed(prompt: int) -> BatchShape:
        return BatchShape(prefill_tokens=prompt, prefill_attn_pairs=900 * 451.0, prefill_seqs=1, decode_seqs=100,
                          decode_context=100 * 2000.0)

    got, real, as_1024 = padded.breakdown(mixed(900)).by_op, plain.breakdown(mixed(900)).by_op, plain.breakdown(
        mixed(924)).by_op
    per_token = set(got) - {"attention_prefill", "attention_decode", "lm_head", "step_overhead", "host"}
    assert per_token and any(got[op] > real[op] for op in per_token)
    for op in per_token:
        assert got[op] == pytest.approx(as_1024[op]), op
    for op in ("attention_prefill", "attention_decode", "lm_head"):
        assert got[op] == pytest.approx(real[op]), op
    assert padded.step_time(mixed(900)) == pytest.approx(padded.breakdown(mixed(900)).total_s)
    assert padded.step_time(mixed(924)) == pytest.approx(plain.step_time(mixed(924)))  # 1,024: compiled as it is
