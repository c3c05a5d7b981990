"""A deployment made ready to simulate: hardware, benchmark, model, pools with cost models, topology."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd

from gpusim.deploy import check_deployment, decide, pool_counts, roles
from gpusim.errors import InputError
from gpusim.items import (
    AnyModel,
    encoder_pool,
    is_item,
    item_pools,
    lm_share,
    load_workload_model,
    with_vision,
)
from gpusim.loadgen.datasets import dataset_lengths
from gpusim.loadgen.workload import Workload
from gpusim.perf.capacity import Lengths, instance_rate
from gpusim.perf.kernel_tables import kernel_tables
from gpusim.perf.memory import kv_bytes_per_token_per_gpu, plan_memory
from gpusim.perf.ops import DTYPE_BYTES
from gpusim.perf.step import StepCostModel
from gpusim.perf.table_step import table_step_model
from gpusim.sim.cluster import Cluster, Pool, SimStats, StopRule
from gpusim.sim.kvtiers import Tier
from gpusim.sim.topology import Topology
from gpusim.specs.benchmark import BenchmarkSpec, load_benchmark
from gpusim.specs.deployment import AnyDeployment, Deployment
from gpusim.specs.experiment import Timing
from gpusim.specs.hardware import Hardware, load_hardware
from gpusim.specs.model import ModelSpec


@dataclass(frozen=True)
class Setup:
    """Everything a simulation needs except the workload."""

    hardware: Hardware
    bench: BenchmarkSpec
    model: AnyModel
    deployment: AnyDeployment
    pools: tuple[Pool, ...]
    timing: Timing = "roofline"

    @property
    def num_gpus(self) -> int:
        """GPUs the deployment uses."""
        return sum(p.count * p.deployment.gpus_per_instance for p in self.pools)

    def lengths(self, seed: int = 0) -> Lengths:
        """The benchmark's dataset lengths (`dataset_lengths`) as the capacity estimate reads them."""
        return Lengths.of(*dataset_lengths(self.bench, seed))

    def expected_qps(self, seed: int = 0) -> float:
        """Steady-state requests per second at the dataset's lengths (a submitter's trial run)."""
        lengths = self.lengths(seed)
        return min(p.count * instance_rate(p.role, p.cost, p.kv_capacity_tokens, p.deployment, lengths)
                   for p in self.pools)

    def thrashes(self, seed: int = 0) -> bool:
        """Whether a pool that decodes admits more sequences than its KV cache holds once they have grown
        (`Lengths.kv_batch`): it would preempt and recompute requests over and over, which no submitter runs."""
        lengths = self.lengths(seed)
        return not is_item(self.model) and any(
            p.deployment.max_batch_size > lengths.kv_batch(p.kv_capacity_tokens)
            for p in self.pools if p.role in ("aggregated", "decode"))

    def in_flight(self, seed: int = 0) -> int:
        """Sequences the decoding pool holds at a full batch (its batch cap or, below it, what its KV holds)."""
        lengths = self.lengths(seed)
        p = self.pools[-1]
        return p.count * min(p.deployment.max_batch_size, lengths.kv_batch(p.kv_capacity_tokens))

    def single_stream_qps(self, seed: int = 0) -> float:
        """Requests per second with one request in flight: every pool in turn at a batch of one."""
        lengths = self.lengths(seed)
        return 1 / sum(1 / instance_rate(p.role, p.cost, p.kv_capacity_tokens,
                                         p.deployment.model_copy(update={"max_batch_size": 1}), lengths)
                       for p in self.pools)

    def with_deployment(self, dep: AnyDeployment, source: str = "deployment") -> Setup:
        """The same hardware and benchmark with another deployment (InputError if it cannot run)."""
        return make_setup(self.hardware, self.bench, self.model, dep, source, self.timing)

    def software_ms(self, name: str) -> float:
        """A millisecond constant of the deployment's software profile, in seconds (0 for cost models
        without a profile)."""
        sw = getattr(self.pools[0].cost, "software", None)
        return sw.value(name) * 1e-3 if sw is not None else 0.0

    def frontend_s(self) -> float:
        """Front-end seconds before a request reaches the engine: the profile's request overhead behind an
        HTTP server, none for an in-process harness."""
        return self.software_ms("request_overhead_ms") if self.deployment.frontend == "http" else 0.0

    def cluster(self, workload: Workload) -> Cluster:
        """A fresh simulated cluster of this setup, fed by `workload`."""
        kvb = DTYPE_BYTES[self.deployment.kv_cache]
        encode = None
        if self.pools[0].role == "encode":  # a VLM's encoder pool: a prompt's image tokens are all but its text
            text = self.bench.text_tokens or 0.0
            encode = lambda p: max(1, int(p - text))  # noqa: E731
        return Cluster(list(self.pools), workload, Topology.from_hardware(self.hardware), self.deployment.router,
                       lambda tokens: self.model.kv_bytes(int(tokens), kvb),
                       dispatch_overhead_s=self.frontend_s(),
                       handoff_overhead_s=self.software_ms("handoff_overhead_ms"), encode_tokens=encode,
                       front_ends=self.deployment.front_ends)

    def simulate(self, workload: Workload, stop: StopRule | None = None, cluster: Cluster | None = None
                 ) -> tuple[pd.DataFrame, SimStats, float]:
        """Run `workload` to completion, or until `stop` ends it (`Cluster.run`): (per-request records of the
        completed requests, engine counters, wall seconds). `cluster`: this setup's cluster of `workload`, already
        built (and perhaps paused part way, `Cluster.run_until_issued`), to carry on."""
        started = time.perf_counter()
        cluster = cluster or self.cluster(workload)
        records = cluster.run(stop).frame()
        return records, cluster.stats(), time.perf_counter() - started


def make_setup(hw: Hardware, bench: BenchmarkSpec, model: AnyModel, dep: AnyDeployment, source: str,
               timing: Timing = "roofline") -> Setup:
    """Check `dep` against the hardware and model and build its pools (an unset front end is the
    benchmark's); item models (video, recommendation) get their own cost models (`gpusim.items`), and a
    VLM's pools that prefill carry its vision encoder."""
    if dep.frontend is None:
        dep = dep.model_copy(update={"frontend": bench.frontend})
    if is_item(model):
        return Setup(hw, bench, model, dep, item_pools(hw, bench, model, dep, source), timing)
    encoders = encoder_pool(hw, model, bench, dep, source)
    llm_dep = dep if encoders is None else lm_share(hw, dep, source)
    check_deployment(hw, model, llm_dep, source)
    pools = tuple(
        Pool(role, cost_model(hw, model, d, timing, source), plan_memory(hw, model, d).kv_capacity_tokens, d, count,
             offload_tiers(hw, model, d))
        for (role, d), count in zip(roles(llm_dep), pool_counts(hw, llm_dep, source), strict=True)
    )
    if model.vision is not None:
        prompts = dataset_lengths(bench, 0)[0]
        pools = tuple(with_vision(p, hw, model, bench, prompts) for p in pools)
    return Setup(hw, bench, model, dep, pools if encoders is None else (encoders, *pools), timing)


def offload_tiers(hw: Hardware, model: ModelSpec, dep: Deployment) -> tuple[Tier, ...]:
    """The KV tiers below HBM an instance of `dep` offloads to (`Deployment.kv_offload`), as it sees them: the
    system's capacity per GPU in tokens of the KV one GPU keeps per token (each attention-DP rank its own
    sequences, as in HBM, `plan_memory`), and a token's read time over one GPU's link (every GPU reads its share at
    once; each rank is a link of its own)."""
    per_token = kv_bytes_per_token_per_gpu(model, dep)
    ranks = dep.attention_ranks
    return tuple(
        Tier(t.name, int(t.capacity_gb_per_gpu.value * 1e9 // per_token) * ranks,
             per_token / (t.bandwidth_gbps_per_gpu.value * 1e9), t.latency_us.value * 1e-6, links=ranks)
        for t in hw.system.kv_tiers if t.name in dep.kv_offload and per_token > 0)


def cost_model(hw: Hardware, model: ModelSpec, dep: Deployment, timing: Timing, source: str) -> StepCostModel:
    """The step cost model of one role: the roofline with the software profile's constants, or measured
    kernel tables (`timing: table`, needs the calibration extra and a system the tables cover)."""
    if timing == "roofline":
        return StepCostModel(hw, model, dep)
    tables = kernel_tables(hw.id, dep.software)
    if tables is None:
        raise InputError(source, "timing", f"no measured kernel tables for {hw.id} with {dep.software}; valid: "
                         "roofline, or table with aiconfigurator-core==0.12.0 installed (pip install "
                         "'gpusim[calibration]') on h100-hgx, h200-hgx, b200-hgx, b300-hgx, gb200-nvl72 or gb300-nvl72")
    return table_step_model(hw, model, dep, tables)


def prepare(hardware: str, benchmark: str, systems: int = 1, deployment: str | AnyDeployment | None = None,
            source: str = "command line", oversubscription: float = 1.0, model: str | None = None,
            timing: Timing = "roofline", scenario: str | None = None, software: str | None = None) -> Setup:
    """Load profiles by name and build the setup with the deployment `gpusim.deploy.decide` makes of
    `deployment` (the default for `scenario`, a file completed from it, or an object as it is; `software`
    replaces its software profile). `model` replaces the benchmark's model (the benchmark still gives the dataset
    and latency limits)."""
    hw = load_hardware(hardware, systems, oversubscription)
    bench = load_benchmark(benchmark)
    model = load_workload_model(bench, model)
    dep, dep_source = decide(hw, bench, model, scenario, deployment, source, software)
    return make_setup(hw, bench, model, dep, dep_source, timing)
