# Reclaim and limits of `GovernedRuntime`: making room for a charge (the
# elastic path, I8c), prefetching the weight cache, pressure (the weight
# holder's ticket, the arena's ticket answered at the next Run boundary) and
# limit lowering (C8) through the manager's limits part.
#
# Owns: the policy of when to ask holders for bytes. Must not touch: the
# holders' victim choice (they answer their own tickets, C5), the request
# path. A mixin of `GovernedRuntime`.

from __future__ import annotations

from spec import sessions as S
from spec.errors import BudgetBelowFloor, CapacityDenied, InvalidBytes

__all__ = ["ReclaimAndLimits"]


class ReclaimAndLimits:
    """Room, prefetch, pressure and limit lowering; a mixin of `GovernedRuntime`."""

    def _make_room(self, nbytes: int) -> int:
        """Ask the weight holder to yield the cache bytes that `nbytes` more need (elastic path, I8c)."""
        over = self.used() + nbytes + self.topology.headroom - self.limit
        if over <= 0:
            return 0
        credited = self._reclaim_weights(over)  # a pressure ticket on the weight holder (C5)
        if credited < over:  # zero is legal for the holder; the requester fails, nothing is forced
            raise CapacityDenied(f"the weight holder's answer credited {credited} of {over} B")
        return credited

    def _reclaim_weights(self, target: int) -> int:
        """A pressure ticket on the weight holder; replicas in buckets it may take are dropped first."""
        before = set(self.replicas.by_model)
        self.replicas.before_reclaim(target)  # ORT stops reading bytes before they stop being leased
        try:
            return self.weights.reclaim(target)
        finally:
            self.replicas.stale()
            for model in before - set(self.replicas.by_model):
                self._rebind(model)

    def _rebind(self, model: str) -> None:
        """Re-bind every open request of `model` to the session now serving it (replica or primary)."""
        session = self.replicas.session_of(model, self.models[model].session)
        for rid, (m, _) in self.requests.items():
            if m == model:
                b = self.kv.bundles[rid]
                b.session = session
                b.bind()

    def _prefetch(self, a: S.Prefetch) -> int:
        room = self.limit - self.used() - self.topology.headroom
        if room > 0:
            self.weights.fill(room)
            for model in self.replicas.place(self.models):  # borrowed bytes ORT will read
                self._rebind(model)
        return max(0, room)

    def _pressure(self, a: S.Pressure) -> int:
        if type(a.target) is not int or a.target <= 0:
            raise InvalidBytes(f"target must be a positive int, got {a.target!r}")
        released = self._reclaim_weights(a.target)
        if self.requests:  # the arena's share: a ticket of the manager, answered at the next Run boundary
            self._arena_pressures.append(self.pmm.open_pressure(self.arena, self.auth, a.target))
            self.arena_pending = len(self._arena_pressures)
        return released

    def _lower(self, a: S.LowerLimit) -> S.LoweringReport:
        new = a.new
        if type(new) is not int or new < 0 or new > self.topology.capacity:
            raise InvalidBytes(f"limit must be an int in [0, {self.topology.capacity}], got {new!r}")
        if new < self.topology.headroom:
            raise BudgetBelowFloor(f"limit {new} is below the headroom {self.topology.headroom}")
        old = self.limit
        over = self.used() + self.topology.headroom - new  # what the new limit needs back, headroom kept
        before = set(self.replicas.by_model)
        if over > 0:
            self.replicas.before_reclaim(over)  # ORT stops reading bytes before they stop being leased
        try:
            # C8 in the manager's limits part: lower_limit prepares (one pressure ticket per holder with a live
            # lease, target: what the ledger must give back); each holder's callback answers its own ticket
            # (the weight holder with idle cache buckets; the KV and arena holders with zero, legal: their
            # leases are in use); the commit sets the new limit only if used then fits, else keeps the old.
            out = self.pmm.lower_limit(self.auth, self._ledger_limit(new))
        finally:
            if over > 0:
                self.replicas.stale()
                for model in before - set(self.replicas.by_model):
                    self._rebind(model)
        released = sum(self.weights.settled(pid) for pid, _ in out.completed)
        done = (("reclaim weight cache", released),) if released else ()
        return S.LoweringReport(out.committed and self.used() + self.topology.headroom <= new, old, new, done)
