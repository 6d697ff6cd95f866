"""Borrowed weight bytes in buckets, answering pressure tickets with its own victims (newest first; C5, I6).

Each bucket is a lease of the cache's holder on its authority of the
`ProcessMemoryManager`; `bytes` is what the ledger charges that holder there.
Reclaim is a pressure ticket on the holder (`press`), whose callback picks
its own buckets and answers with their allocation ids; the requester is
credited exactly what the answer released.
"""

from __future__ import annotations

from refimpl.manager import ProcessMemoryManager
from spec.types import Role, Tier

__all__ = ["WeightCache"]


class WeightCache:
    """Borrowed weight bytes in buckets, answering pressure tickets with its own victims (newest first)."""

    def __init__(self, bucket: int, capacity: int, pmm: ProcessMemoryManager | None = None,
                 auth: int | None = None) -> None:
        self.bucket = bucket
        #: The environment's choice for the next answer (C5): give back at most this much (None: all asked).
        self.answer_cap: int | None = None
        self.pmm = pmm if pmm is not None else ProcessMemoryManager()
        self.auth = auth if auth is not None else self.pmm.register_authority("elastic", Tier.HOST, max(1, capacity))
        self.ledger_id = self.pmm.snapshot(self.auth).authority
        self.tier: Tier = self.pmm.snapshot(self.auth).tier
        self.id = self.pmm.register_holder("weight-cache")
        self.buckets: list[tuple[int, int]] = []  # (bytes, allocation id), newest last
        self._released: dict[int, int] = {}  # pressure id -> bytes its answer released
        self.pmm.register_callback(self.id, self._on_pressure)

    @property
    def bytes(self) -> int:
        return self.charged()

    def charged(self, role: Role | None = Role.WEIGHTS) -> int:
        """What the ledger charges this cache's holder on its authority (for `role`; None: every role)."""
        return sum(a.charge for a in self.pmm.leases(self.id)
                   if a.authority == self.ledger_id and (role is None or a.role is role))

    def _lease(self, nbytes: int) -> int:
        aid = self.pmm.reserve(self.id, self.auth, self.tier, nbytes, Role.WEIGHTS)
        self.pmm.commit(self.id, aid, nbytes)
        return aid

    def fill(self, nbytes: int) -> None:
        while nbytes > 0:
            b = min(self.bucket, nbytes)
            self.buckets.append((b, self._lease(b)))
            nbytes -= b

    def reclaim(self, target: int) -> int:
        """Through a pressure ticket on this cache; returns the credited bytes (zero if unanswered)."""
        if target <= 0:
            return 0
        pid = self.pmm.press(self.id, self.auth, target)
        if pid not in self._released:  # not answered: credit nothing, force nothing
            self.pmm.cancel_pressure(pid)
            return 0
        return self._released.pop(pid)

    def _on_pressure(self, pmm: ProcessMemoryManager, pid: int, target: int) -> None:
        victims = self._pick(target)
        self._released[pid] = pmm.answer(self.id, pid, victims)  # zero victims is a legal answer
        self._freed(victims)

    def _pick(self, target: int) -> tuple[int, ...]:
        if self.answer_cap is not None:
            target, self.answer_cap = min(target, self.answer_cap), None
        if target == 0:
            return ()
        picked, got = [], 0
        while got < target and len(picked) < len(self.buckets):
            b, tid = self.buckets[-1 - len(picked)]
            picked.append(tid)
            got += b
        if got > target:  # a partial bucket is split, not over-released
            i = len(self.buckets) - len(picked)
            b, tid = self.buckets[i]
            cut = b - (got - target)
            self.pmm.release(self.id, tid)
            self.buckets[i:i + 1] = [(b - cut, self._lease(b - cut)), (cut, self._lease(cut))]
            picked[-1] = self.buckets[i + 1][1]
        return tuple(picked)

    def _freed(self, victims: tuple[int, ...]) -> None:
        gone = set(victims)
        self.buckets = [(b, t) for b, t in self.buckets if t not in gone]
