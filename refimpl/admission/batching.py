"""Continuous batching over one KV pool (I12): advance only if the request's remaining need fits.

The pool is an authority of the `ProcessMemoryManager`: each advance is a
KV lease of the batcher's holder, a finish releases the request's leases,
and "fits" reads the authority's snapshot. The batcher keeps each request's
peak, lifecycle state and lease ids; what a request holds is read from the
ledger.
"""

from __future__ import annotations

from typing import Any

import immutables

from refimpl.admission.seat import LedgerSeat, resolve_authority
from refimpl.manager import ProcessMemoryManager
from spec import admission as S
from spec.errors import CapacityDenied, InfeasibleRequest, InvalidArgument, InvalidBytes, InvalidTransition, UnknownAllocation
from spec.guards import ALL_ON, GuardSet
from spec.ledger_state import Allocation
from spec.types import Role, Tier

__all__ = ["KvBatcher"]


class KvBatcher:
    """Continuous batching over one KV authority: advance only if the remaining need fits (I12)."""

    def __init__(self, capacity: int | None = None, guards: GuardSet = ALL_ON, *,
                 pmm: ProcessMemoryManager | None = None, auth: int | None = None) -> None:
        pmm, auth, _ = resolve_authority(pmm, auth, capacity, "kv-batch", Tier.DEVICE)
        self.seat, self.guards = LedgerSeat(pmm, auth, "kv-batcher"), guards
        self._peak: dict[int, int] = {}
        self._leases: dict[int, list[int]] = {}  # request -> its KV lease ids (their bytes are the ledger's)
        self._state: dict[int, S.ReqState] = {}
        self._next = 1

    @property
    def capacity(self) -> int:
        return self.seat.limit()

    def execute(self, a: Any) -> Any:
        if isinstance(a, S.Submit):
            return self.submit(a.peak)
        if isinstance(a, S.Advance):
            return self.advance(a.rid, a.n)
        if isinstance(a, S.Finish):
            return self.finish(a.rid)
        raise InvalidArgument(f"not a batching action: {a!r}")

    def submit(self, peak: int) -> int:
        if type(peak) is not int or peak <= 0:
            raise InvalidBytes(f"peak must be a positive int, got {peak!r}")
        if peak > self.capacity:
            raise CapacityDenied(f"peak {peak} > pool {self.capacity}")
        rid, self._next = self._next, self._next + 1
        self._peak[rid], self._leases[rid], self._state[rid] = peak, [], S.ReqState.WAITING
        return rid

    def _known(self, rid: object) -> int:
        if type(rid) is not int or rid not in self._peak:
            raise UnknownAllocation(f"request {rid!r} was never submitted")
        return rid

    def _held(self, rid: int, ledger: tuple[Allocation, ...]) -> int:
        charges = self.seat.charges(ledger, Role.KV)
        return sum(charges.get(aid, 0) for aid in self._leases[rid])

    def advance(self, rid: int, n: int) -> None:
        if type(n) is not int or n <= 0:
            raise InvalidBytes(f"n must be a positive int, got {n!r}")
        rid = self._known(rid)
        if self._state[rid] is S.ReqState.FINISHED:
            raise InvalidTransition(f"request {rid} is finished")
        held = self._held(rid, self.seat.ledger())
        need = self._peak[rid] - held
        if n > need:
            raise InvalidBytes(f"request {rid}: {n} entries exceeds its remaining {need}")
        free = self.seat.free()
        if n > free:
            raise CapacityDenied(f"{n} entries asked, {free} free")
        if need > free and self.guards.on("kv_admission_fits"):  # I12
            raise InfeasibleRequest(f"request {rid} needs {need} more, only {free} free")
        self._leases[rid].append(self.seat.lease(n, Role.KV))
        self._state[rid] = S.ReqState.RESIDENT

    def finish(self, rid: int) -> None:
        rid = self._known(rid)
        if self._state[rid] is not S.ReqState.RESIDENT or self._held(rid, self.seat.ledger()) != self._peak[rid]:
            raise InvalidTransition(f"request {rid} cannot finish yet")
        for aid in self._leases[rid]:
            self.seat.release(aid)
        self._leases[rid], self._state[rid] = [], S.ReqState.FINISHED

    def abstract(self) -> S.BatchState:
        return self._abstract(self.seat.ledger())

    def _abstract(self, ledger: tuple[Allocation, ...]) -> S.BatchState:
        charges = self.seat.charges(ledger, Role.KV)
        reqs = {r: S.BatchRequest(self._peak[r], sum(charges.get(aid, 0) for aid in self._leases[r]), self._state[r])
                for r in self._peak}
        return S.BatchState(self.seat.limit(), immutables.Map(reqs), self._next)

    def reading(self) -> tuple[S.BatchState, int]:
        """The abstraction and what the ledger charges this batcher's holder, from one reading of the ledger."""
        ledger = self.seat.ledger()
        return self._abstract(ledger), self.seat.charged(ledger)
