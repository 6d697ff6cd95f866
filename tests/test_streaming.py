"""spec.streaming and spec.placement: the sweep policies and the decline rule on small exact cases."""

from __future__ import annotations

from fractions import Fraction

import pytest

from spec.arith import max_batch, streaming_floor
from spec.errors import InvalidArgument, InvalidBytes
from spec.placement import Mover, choose_mover, per_token_bytes, step_seconds, tokens_per_second
from spec.streaming import Policy, sweep, weight_units


def test_weight_units_cut_layers_into_granules() -> None:
    assert weight_units(2, 5, 3, 2) == (2, 2, 1, 2, 2, 1, 2, 1)
    assert sum(weight_units(48, 165_429_632, 389_283_840, 1 << 21)) == 8_329_906_176


@pytest.mark.parametrize("capacity, lru, pinned", [
    (10, 0, 0),  # everything fits: nothing streams under either policy
    (9, 10, 4),  # one byte short: LRU misses all; pinned keeps 3 units beside a 2-byte slot, streams 2
    (4, 10, 8),  # pinned keeps one unit beside the slot
    (1, 10, 10),  # no unit fits at all
])
def test_sweep_lru_streams_everything_on_a_cycle_pinned_keeps_a_prefix(capacity: int, lru: int, pinned: int) -> None:
    units = (2, 2, 2, 2, 2)
    assert sweep(units, capacity, Policy.LRU).streamed == lru
    r = sweep(units, capacity, Policy.PINNED)
    assert r.streamed == pinned
    assert r.hits + r.page_ins == len(units)
    assert streaming_floor(10, capacity) <= r.streamed


def test_lru_hits_when_the_model_fits() -> None:
    r = sweep((3, 3, 3), 9, Policy.LRU)
    assert (r.streamed, r.page_ins, r.hits, r.evictions) == (0, 0, 3, 0)


@pytest.mark.parametrize("units, capacity, policy, error", [
    ((), 4, Policy.LRU, InvalidBytes),
    ((1, 0), 4, Policy.LRU, InvalidBytes),
    ((1, 2), -1, Policy.PINNED, InvalidBytes),
    ((1, 2), 4, "lru", InvalidArgument),
])
def test_invalid_sweep_is_rejected(units, capacity, policy, error) -> None:
    with pytest.raises(error, match="units|capacity|policy"):
        sweep(units, capacity, policy)


@pytest.mark.parametrize("reread, ws, cap, required, mover", [
    (False, 10, 5, False, Mover.PLATFORM),  # read once, over capacity: decline
    (True, 10, 5, False, Mover.RUNTIME),  # re-read before eviction
    (False, 10, 5, True, Mover.RUNTIME),  # correctness needs the bytes where the ledger says
    (False, 5, 10, False, Mover.RUNTIME),  # capacity ample: prefer runtime
])
def test_decline_rule(reread: bool, ws: int, cap: int, required: bool, mover: Mover) -> None:
    assert choose_mover(reread, ws, cap, required) is mover


def test_invalid_decline_rule_input_is_rejected() -> None:
    with pytest.raises(InvalidBytes, match="working_set"):
        choose_mover(False, -1, 5, False)
    with pytest.raises(InvalidArgument, match="bools"):
        choose_mover(1, 1, 5, False)  # type: ignore[arg-type]


def test_bandwidth_model_is_exact() -> None:
    s = step_seconds(10, 5, 20, 10)
    assert s == Fraction(4) and tokens_per_second(s, 2) == Fraction(1, 2)
    assert per_token_bytes(10, 4, 1) == Fraction(7, 2)
    with pytest.raises(InvalidBytes, match="link_bandwidth"):
        step_seconds(1, 0, 1, 1)


def test_max_batch() -> None:
    assert max_batch(7_726_753_178, 2_048, 196_608) == 19
    assert max_batch(10, 2, 5) == 1 and max_batch(9, 2, 5) == 0
