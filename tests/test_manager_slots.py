"""The composed manager keeps every part's state in slots (the hot paths' attribute reads, bench_manager)."""

from __future__ import annotations

from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import attach
from spec.types import Role, Tier


def _busy() -> ProcessMemoryManager:
    """A manager that has run the hot paths: a reservation, tickets granted, pending, dropped and drained."""
    pmm = ProcessMemoryManager()
    a = pmm.register_authority("gpu0", Tier.DEVICE, 1 << 20)
    h = pmm.register_holder("kv")
    pmm.cancel(h, pmm.reserve(h, a, Tier.DEVICE, 64, Role.KV))
    lease = pmm.claim(h, pmm.submit(h, a, 4096))
    pmm.submit(h, a, 1 << 20)  # pending
    pmm.drop(h, pmm.submit(h, a, 1 << 20))
    pmm.drain()
    pmm.release(h, lease)  # a round grants the pending ticket
    return pmm


def test_every_instance_attribute_is_a_slot() -> None:
    # An attribute a part sets in its _init_ that ProcessMemoryManager.__slots__ does not list lands in the
    # instance __dict__: it works, but every access is a hashed lookup. List it in __slots__.
    assert vars(ProcessMemoryManager()) == {}
    assert vars(_busy()) == {}


def test_slots_are_unique_and_the_instance_keeps_a_dict_for_tracing() -> None:
    slots = ProcessMemoryManager.__slots__
    assert len(slots) == len(set(slots))
    pmm = ProcessMemoryManager()
    attach(pmm, lambda event: None)  # binds its wrappers on the instance
    assert "reserve" in vars(pmm)
