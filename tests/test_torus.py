"""Torus domains (TPU ICI): what a chip moves in a ring collective and in an all-to-all, against hand-worked
cases, the step's collectives and a KV transfer on a toy torus, and clean errors for incomplete torus profiles.

Every expected value is worked out by hand in its comment from the link rate and the torus' shape, not read
back from the code under test.
"""

from __future__ import annotations

import pytest
from test_amd import S, comm, finish_times

from gpusim.perf.collectives import allreduce_time, alltoall_time
from gpusim.sim.topology import Placement, Topology
from gpusim.specs.deployment import Deployment
from gpusim.specs.hardware import FabricSpec, GpuSpec, Hardware, SystemSpec
from gpusim.specs.torus import alltoall_links, extents, ring_links


# ---- the shape arithmetic -------------------------------------------------------------------------------
def test_a_group_fills_the_first_axis_first():
    assert extents([4, 4, 4], 2) == [2, 1, 1]
    assert extents([4, 4, 4], 8) == [4, 2, 1]
    assert extents([4, 4, 4], 16) == [4, 4, 1]
    assert extents([4, 4, 4], 64) == [4, 4, 4]


def test_ring_collectives_drive_two_links_per_wrapped_axis_and_one_per_line():
    """2 chips: a line of 2 (no wraparound), 1 link. 4: a whole axis, its ring closes: 2. 8: a ring and a line
    of 2: 3. 16: two rings: 4. 64, the whole cube: 6, every link."""
    assert [ring_links([4, 4, 4], n) for n in (2, 4, 8, 16, 64)] == [1, 2, 3, 4, 6]


def test_an_all_to_all_is_held_to_the_bisection():
    """Per byte D a chip scatters, in units of 1 / W (W: one link's rate):
    - 2 chips: sends D/2 over its 1 link (D/2); the cut between them carries D/2 over 1 link (1·1/(2·1) = D/2):
      (1/2) / (1/2) = 1 link.
    - a wrapped ring of 4: injection 3/4 over 2 links = 3/8; the cut through the ring carries 2·2/4 = 1 over the
      2 links each way (the ring is cut twice): 1/2. The cut decides: (3/4) / (1/2) = 1.5 links.
    - the whole 4x4x4 cube: injection 63/64 over 6 links; each axis' cut 2·2/(4·2) = 1/2: (63/64) / (1/2) =
      1.96875 links, a third of the 6 a ring collective drives.
    - a line of 3 (an axis of 8 filled to 3): injection 2/3 over 1 link; the cut 1·2/3: (2/3) / (2/3) = 1."""
    assert alltoall_links([4, 4, 4], 2) == pytest.approx(1.0)
    assert alltoall_links([4, 4, 4], 4) == pytest.approx(1.5)
    assert alltoall_links([4, 4, 4], 64) == pytest.approx(1.96875)
    assert alltoall_links([8], 3) == pytest.approx(1.0)


# ---- a toy torus ----------------------------------------------------------------------------------------
def toy_torus() -> Hardware:
    """16 chips in a 4x4 torus: 4 links of 100 GB/s each way (400 GB/s per chip), 1 us a hop."""
    gpu = GpuSpec(id="toy", name="Toy", architecture="toy", dense_tflops={"bf16": S(100), "fp8": S(200)},
                  hbm_capacity_gib=S(80), hbm_bandwidth_tbps=S(1.0), nvlink="ici", scaleout_nic="dcn", tdp_w=S(100))
    ici = FabricSpec(id="ici", name="ICI", kind="ici", bandwidth_gbps_per_dir=S(400), latency_us=S(1),
                     topology="torus", torus_dims=[4, 4])
    dcn = FabricSpec(id="dcn", name="DCN", kind="ethernet", bandwidth_gbps_per_dir=S(10), latency_us=S(5))
    system = SystemSpec(id="toy16", name="Toy 16", gpu="toy", gpus=16, nvlink_domain_gpus=16, nvlink="ici",
                        scaleout="dcn", power_kw=S(1), form_factor="rack")
    return Hardware(system=system, gpu=gpu, nvlink=ici, scaleout=dcn)


def test_the_torus_links_are_derived_from_its_axes():
    assert toy_torus().nvlink.links == 4


def test_collective_times_on_the_toy_torus_by_hand():
    """- all-reduce of 300 MB over 4 chips (one wrapped axis, 2 links, 200 GB/s): 2·3/4·300e6 / 200e9 = 2.25 ms;
    - the same over 8 chips (a ring and a line of 2: 3 links, 300 GB/s): 2·7/8·300e6 / 300e9 = 1.75 ms;
    - all-to-all of 1,000 tokens × 1 × 1,000 × 1 B = 1 MB per chip over 4 chips: 3/4 MB sent at 1.5 links
      (150 GB/s) = 5 us; over all 16 (two wrapped axes; injection 15/16 over 4 links, each cut 1/2): 15/16 MB
      at (15/16)/(1/2) = 1.875 links, 187.5 GB/s = 5 us too: the whole torus is no faster per chip."""
    hw = toy_torus()
    assert allreduce_time(300e6, 4, hw.domain_bandwidth(3), 0.0) == pytest.approx(2.25e-3)
    assert allreduce_time(300e6, 8, hw.domain_bandwidth(7), 0.0) == pytest.approx(1.75e-3)
    assert alltoall_time(1000, 1, 1000, 1, 4, hw.domain_bandwidth(3, alltoall=True), 0.0) == pytest.approx(5e-6)
    assert alltoall_time(1000, 1, 1000, 1, 16, hw.domain_bandwidth(15, alltoall=True), 0.0) == pytest.approx(5e-6)


def test_tp_allreduce_in_the_step_uses_the_groups_axes():
    """The step's TP all-reduces (test_amd's tiny model: 100 tokens × 1,024 × 2 B = 204,800 B a call, 4 calls a
    step, bus bandwidth fraction 0.5, 1 us a ring step). TP4: one wrapped axis, 2 links × 100 GB/s × 0.5 =
    100 GB/s; 2·3/4 · 204,800 / 100e9 = 3.072 us + 2·3 · 1 us = 9.072 us a call, 36.288 us a step. TP2: one
    link at 50 GB/s: 4.096 us + 2 us = 6.096 us, 24.384 us a step."""
    assert comm(toy_torus(), Deployment(tp=4), "tp_allreduce") == pytest.approx(36.288e-6)
    assert comm(toy_torus(), Deployment(tp=2), "tp_allreduce") == pytest.approx(24.384e-6)


def test_a_kv_transfer_between_neighbouring_instances_crosses_their_face():
    """Two 4-chip instances (one axis each) meet on 4 links of 100 GB/s: 40 MB takes 40e6 / 400e9 = 100 us
    after the 1 us hop; between two 1-chip instances, one link: 40e6 / 100e9 = 400 us + 1 us."""
    done = finish_times(Topology.from_hardware(toy_torus()),
                        {"fours": (Placement(0, 4, 0, 0), Placement(4, 4, 0, 0)),
                         "ones": (Placement(8, 1, 0, 0), Placement(9, 1, 0, 0))}, 40e6)
    assert done["fours"] == pytest.approx(101e-6) and done["ones"] == pytest.approx(401e-6)


# ---- loading errors -------------------------------------------------------------------------------------
def torus(**kw: object) -> FabricSpec:
    base = dict(id="ici", name="ICI", kind="ici", bandwidth_gbps_per_dir=S(400), latency_us=S(1),
                topology="torus", torus_dims=[4, 4])
    return FabricSpec.model_validate({**base, **kw})


@pytest.mark.parametrize(("change", "field"), [({"torus_dims": None}, "torus_dims"),
                                               ({"torus_dims": [4, 0]}, "torus_dims"),
                                               ({"links": 6}, "links")])
def test_an_incomplete_torus_is_refused_naming_the_field(change, field):
    with pytest.raises(ValueError, match=field):
        torus(**change)


def test_axes_on_a_switched_fabric_are_refused():
    with pytest.raises(ValueError, match="torus_dims"):
        torus(topology="switched", torus_dims=[4, 4], links=None)
