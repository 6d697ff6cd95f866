# The refinement mapping of `GovernedRuntime` (issue #11 item 2): every
# charge in `spec.sessions.SessionState` is read from the manager's
# allocations by holder and role, never from the runtime's own formulas; and
# C8's report, the runtime's own reading of the same ledger. Every runtime
# has an env arena: a model's transient peak is read from the ArenaHolder's
# allowance that lends it within the arena's one lease (mapped bytes, no
# charge), and the ARENA role's charge is that lease.
#
# Owns: reading the ledger. Must not touch: any lease (read-only).
# A mixin of `GovernedRuntime`.

from __future__ import annotations

from typing import Any

import immutables

from spec import sessions as S
from spec.types import Role, Tier
from refimpl.verify.manager_hooks import abstract_ledger

__all__ = ["LedgerAbstraction"]


class LedgerAbstraction:
    """`abstract()` and `report()` read from the manager's allocations; a mixin of `GovernedRuntime`."""

    def _holders(self) -> tuple[int, ...]:
        return self.weights.id, self.env_arena.id, self.kv.id

    def _allocations(self) -> dict[int, Any]:
        """This runtime's holders' leases, by allocation id (`ProcessMemoryManager.leases`)."""
        return {r.id: r for h in self._holders() for r in self.pmm.leases(h)}

    def _allowances(self) -> dict[int, Any]:
        return {w.id: w for h in self._holders() for w in self.pmm.allowances(h)}

    def _charge(self, lease: int | None, allocs: Any) -> int:
        return 0 if lease is None else allocs[lease].charge

    def _ledger_view(self) -> tuple[Any, dict[str, int]]:
        """This runtime's holders' allocations, and their charge on its pool summed per role."""
        allocs = self._allocations()
        by_role = {Role.WEIGHTS.value: 0, Role.ARENA.value: 0, Role.KV.value: 0}
        for rec in allocs.values():
            if rec.authority == self.auth and rec.charge:
                by_role[rec.role.value] = by_role.get(rec.role.value, 0) + rec.charge
        return allocs, by_role

    def _lent(self, loan: int | None, allows: Any) -> int:
        """A model's transient peak as the ArenaHolder's allowance on this pool maps it (0 if none)."""
        if loan is None:
            return 0
        rec = allows.get(loan)
        env = self.env_arena
        ok = rec is not None and rec.holder == env.id and rec.authority == self.auth
        return rec.mapped if ok else 0

    def _model_charges(self) -> dict[str, int]:
        """Each model's admitted bytes from the manager: its weight lease, plus its peak (the env arena's loan)."""
        allocs, allows = self._allocations(), self._allowances()
        return {name: self._charge(r.weights_lease, allocs) + self._lent(r.arena_loan, allows)
                for name, r in self.models.items()}

    def _held(self) -> int:
        """What the pool charges apart from KV and the weight cache: weights and the arena, from the ledger."""
        allocs, by_role = self._ledger_view()
        return by_role[Role.WEIGHTS.value] - self._cache_charge(allocs) + by_role[Role.ARENA.value]

    def _kv_tokens(self, rid: int, allocs: Any) -> int:
        """A request's KV capacity as its holder's lease on the ledger charges it (issue #11 item 2)."""
        model = self.models[self.requests[rid][0]].measured.facts
        rec = allocs.get(self.kv.bundles[rid].lease)
        charge = rec.charge if rec is not None and rec.holder == self.kv.id and rec.role is Role.KV else 0
        return charge // model.bytes_per_token

    def _cache_charge(self, allocs: Any) -> int:
        """The weight cache as the ledger charges the weight holder's cache leases."""
        total = 0
        for aid, _ in self.weights.cache:
            rec = allocs.get(aid)
            if rec is not None and rec.holder == self.weights.id and rec.role is Role.WEIGHTS:
                total += rec.charge
        return total

    def abstract(self) -> S.SessionState:
        """The refinement mapping: every charge read from the manager's allocations by holder and role."""
        allocs, by_role = self._ledger_view()
        charges = self._model_charges()
        models = {}
        for name, r in self.models.items():
            models[name] = S.LoadedModel(r.measured.facts, r.mode, charges[name], r.unattributed,
                                         r.mode is not S.Mode.COMPAT, r.declared, r.host_mapped)
        reqs = {rid: S.Request(m, self.kv.bundles[rid].tokens, self._kv_tokens(rid, allocs))
                for rid, (m, _) in self.requests.items()}
        return S.SessionState(self.topology, self.limit, immutables.Map(models), immutables.Map(reqs),
                              self._cache_charge(allocs), frozenset(self.declined), frozenset(self.not_enforced),
                              immutables.Map(self.residency), self.next_request, immutables.Map(by_role),
                              self._host_authorities())

    def _host_authorities(self) -> int:
        """Canonical ledgers of the host tier in the manager (aliases own no ledger), C1."""
        auths = abstract_ledger(self.pmm).authorities.values()
        return sum(1 for a in auths if a.tier is Tier.HOST and a.alias_of is None)

    def report(self) -> S.GovernanceReport:
        """C8's figures read from the manager's ledger (this runtime's own computation, not the spec's)."""
        allocs, _ = self._ledger_view()
        charges = self._model_charges()
        weights = sum(charges.values())
        kv = sum(self._kv_tokens(rid, allocs) * self.models[m].measured.facts.bytes_per_token
                 for rid, (m, _) in self.requests.items())
        cache = self._cache_charge(allocs)
        env = self.env_arena
        # The env arena's lease is charged once: what it has not lent to a model's peak is still used.
        allows = self._allowances()
        unlent = self._charge(env.lease, allocs) - sum(
            self._lent(r.arena_loan, allows) for r in self.models.values())
        used = weights + kv + cache + unlent
        return S.GovernanceReport(
            unit="charge (bytes)", limit=self.limit, used=used, available=max(0, self.limit - used),
            oversubscribed=max(0, used - self.limit), reclaimable=cache,
            unattributed=sum(r.unattributed for r in self.models.values()),
            by_role=((Role.WEIGHTS.value, weights), (Role.KV.value, kv), ("weight cache", cache)),
            not_enforced=frozenset(self.not_enforced),
            residency=tuple((k, v.nbytes, v.source) for k, v in sorted(self.residency.items())))
