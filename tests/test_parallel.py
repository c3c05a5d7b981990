"""`gpusim.parallel.in_forked_copy`: work done in a forked copy of the process comes back, and only its result."""

from __future__ import annotations

import pytest

from gpusim import parallel

pytestmark = pytest.mark.skipif(not parallel.CAN_FORK, reason="forks only on Linux")


def test_work_in_a_forked_copy_comes_back_and_leaves_this_process_as_it_was():
    state = {"n": 1}

    def work() -> tuple[int, int]:
        state["n"] += 41
        return state["n"], 7

    assert parallel.in_forked_copy(work) == (42, 7)
    assert state == {"n": 1}


def test_a_copy_that_fails_says_so_with_none():
    def work() -> int:
        raise RuntimeError("no")

    assert parallel.in_forked_copy(work) is None
