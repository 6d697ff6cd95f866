"""The mutant registry: named, realistic bugs, each expected to make a clause of its IDs fail.

Like the guard registry, but with every guard on: each mutant is a small
source patch (`invariants.mutation.Mutant`) the verify harness applies to a
copy of one module for one control run. The governor's own code carries no
bug switch. A mutant whose snippet no longer occurs exactly once in its
module is stale and fails `ortmem verify` (it would otherwise test nothing).

Each entry reads as a bug report: what a plausible implementation mistake
looks like, and which ID's clauses must notice it.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from spec.guards import Layer

__all__ = ["MUTANTS"]

_R, _S = Layer.REFIMPL, Layer.SPEC
_GOV, _ADM, _SES = "refimpl.governor", "refimpl.admission", "spec.sessions"

_ALL: tuple[Mutant, ...] = (
    # --- ledger (refimpl.governor) --------------------------------------------
    Mutant("commit_keeps_reserved_charge", ("I1",), "ledger", _R, _GOV,
           "        rec.auth.used += nbytes - rec.charge\n", "",
           "commit publishes fewer bytes than reserved but never refunds the excess to the ledger"),
    Mutant("release_without_refund", ("I1",), "ledger", _R, _GOV,
           "    def _retire(self, rec: _Alloc) -> None:\n        rec.auth.used -= rec.charge\n",
           "    def _retire(self, rec: _Alloc) -> None:\n",
           "releasing a lease drops the record but leaves its bytes charged"),
    Mutant("quarantine_refunds_everything", ("I1",), "ledger", _R, _GOV,
           "        rec.auth.used -= released\n", "        rec.auth.used -= rec.charge\n",
           "a partial settlement refunds the whole charge while the residual stays on the record"),
    Mutant("limit_check_off_by_request", ("I2",), "ledger", _R, _GOV,
           "a.used + nbytes > a.limit and self._guards.on(\"limit_check\")",
           "a.used > a.limit and self._guards.on(\"limit_check\")",
           "the limit check compares what is used, not what the grant would make used"),
    Mutant("alias_keeps_own_ledger", ("I1",), "ledger", _R, _GOV,
           "        self._require_active(a)\n        if tier is not a.tier and self._guards.on(\"tier_match\")",
           "        self._require_active(a)\n        a = self._auth(authority)\n"
           "        if tier is not a.tier and self._guards.on(\"tier_match\")",
           "a reservation through an alias is charged to the alias instead of the canonical ledger"),
    Mutant("commit_grows_lease", ("C2",), "ledger", _R, _GOV,
           "        rec.nbytes = rec.charge = nbytes\n",
           "        rec.nbytes = rec.charge = nbytes\n        rec.reserved = min(rec.reserved, nbytes) - 1 or 1\n",
           "commit shrinks the recorded reservation below the published lease"),
    Mutant("commit_keeps_reserved_size", ("C2",), "ledger", _R, _GOV,
           "        rec.nbytes = rec.charge = nbytes\n", "        rec.charge = nbytes\n",
           "commit charges the published bytes but keeps the lease recorded at the reserved size"),
    Mutant("reissue_ids_after_release", ("I4a",), "ledger", _R, _GOV,
           "        aid = self._next_alloc\n        self._next_alloc += 1\n",
           "        aid = self._next_alloc\n        self._next_alloc += 1\n"
           "        if aid > 1 and aid - 1 not in self._allocs:\n            aid, self._next_alloc = aid - 1, aid\n",
           "after a release the id counter hands out the retired id again"),
    Mutant("device_loss_refunds_at_once", ("I6",), "ledger", _R, _GOV,
           "                if rec.state in _LOSABLE:\n                    rec.state = AllocState.DEVICE_LOST\n",
           "                if rec.state in _LOSABLE:\n                    rec.state = AllocState.DEVICE_LOST\n"
           "                    rec.auth.used -= rec.charge\n                    rec.charge = 0\n",
           "device loss refunds the holders' charge at once instead of at confirmed termination"),
    Mutant("transfer_backwards", ("I6",), "ledger", _R, _GOV,
           "        src.limit -= nbytes\n        dst.limit += nbytes\n",
           "        src.limit += nbytes\n        dst.limit -= nbytes\n",
           "a transfer moves limit the wrong way: the caller takes it from another holder's allowance"),
    Mutant("map_keeps_reservation", ("I4b",), "ledger", _R, _GOV,
           "        w.reserved = max(0, w.reserved - nbytes)\n", "",
           "mapping allowance bytes leaves them counted as reserved too"),
    Mutant("close_forgets_promise", ("I4b",), "ledger", _R, _GOV,
           "        w.auth.promised -= w.limit\n", "        w.auth.promised -= 2 * w.limit\n",
           "closing an allowance returns twice its limit to the pool's promise budget"),
    Mutant("transfer_mints_limit", ("I4b",), "ledger", _R, _GOV,
           "        src.limit -= nbytes\n        dst.limit += nbytes\n",
           "        dst.limit += nbytes\n",
           "a transfer adds limit to the target without taking it from the source"),
    Mutant("identity_check_ignores_capacity", ("C1",), "ledger", _R, _GOV,
           "(existing.tier is not tier or existing.capacity != capacity)", "(existing.tier is not tier)",
           "re-registering a pool with another capacity binds it to the existing ledger silently"),
    Mutant("available_ignores_growth", ("C8",), "ledger", _R, "spec.arith",
           "    return max(0, limit - used - growth_reserved)\n", "    return max(0, limit - used)\n",
           "`available` forgets bytes reserved for growth, in the shared arithmetic (so in both layers at once; "
           "CrossHair's postcondition 0 <= available <= limit still holds)"),
    Mutant("oversubscription_off_by_one", ("I2",), "ledger", _R, _GOV,
           "oversubscribed(a.used, a.limit), a.promised)", "oversubscribed(a.used, a.limit + 1), a.promised)",
           "the snapshot reports oversubscription only from one byte past the limit (> for >=)"),
    # --- admission models (refimpl.admission) ---------------------------------
    Mutant("finish_keeps_kv", ("I12",), "admission", _R, _ADM,
           "        self._held[rid], self._state[rid] = 0, S.ReqState.FINISHED\n",
           "        self._state[rid] = S.ReqState.FINISHED\n",
           "a finished request is marked finished but its KV entries are never given back", "kv_admission_fits"),
    Mutant("feasibility_against_capacity", ("I12",), "admission", _R, _ADM,
           "        if need > free and self.guards.on(\"kv_admission_fits\"):",
           "        if need > self.capacity and self.guards.on(\"kv_admission_fits\"):",
           "admission asks whether the request could ever fit, not whether it can finish from here",
           "kv_admission_fits"),
    Mutant("load_against_capacity", ("I12",), "admission", _R, _ADM,
           "            if size > self.capacity - self._used:\n", "            if size > self.capacity:\n",
           "loading a model checks the pool's capacity instead of the free room", "retire_before_evict"),
    Mutant("serve_without_residency", ("I12",), "admission", _R, _ADM,
           "            if not resident or not work:\n                raise InvalidTransition(f\"{a.model}: serve",
           "            if not work:\n                raise InvalidTransition(f\"{a.model}: serve",
           "a request is served by a model that was evicted", "retire_before_evict"),
    Mutant("evict_without_need", ("I12",), "admission", _R, _ADM,
           "if not any(not r[2] and r[4] and r[0] > free for r in self._rows.values()):",
           "if not any(not r[2] and r[4] for r in self._rows.values()):",
           "a model is evicted whenever anything is pending, even when the pending model fits already",
           "retire_before_evict"),
    Mutant("evict_before_serving", ("I12",), "admission", _R, _ADM,
           "                if not served:\n", "                if False:\n",
           "a freshly loaded model is evicted before it served anyone", "retire_before_evict"),
    Mutant("evict_pinned", ("I12",), "admission", _R, _ADM,
           "            if not resident or pinned:\n", "            if not resident:\n",
           "a pinned model can be evicted", "retire_before_evict"),
    Mutant("prefetch_ignores_headroom", ("I8c",), "admission", _R, _ADM,
           "kv_bytes(self.kv_tokens, self.bpt) - self.headroom - before", "kv_bytes(self.kv_tokens, self.bpt) - before",
           "the weight cache prefetches into the headroom", "elastic_guaranteed_path"),
    Mutant("prefetch_as_static_split", ("I8c",), "admission", _R, _ADM,
           "kv_bytes(self.kv_tokens, self.bpt) - self.headroom - before",
           "kv_bytes(self.max_context + self.bucket, self.bpt) - self.headroom - before",
           "the weight cache leaves room for KV beyond max context, as a conservative static split would",
           "elastic_guaranteed_path"),
    Mutant("growth_forgets_copy_peak", ("I8c",), "admission", _R, _ADM,
           "            over = self.pinned + self.cache.bytes + peak + self.headroom - self.budget\n",
           "            over = self.pinned + self.cache.bytes + kv_bytes(new, self.bpt) + self.headroom - self.budget\n",
           "KV growth reclaims for the new buffer only, forgetting the old one stays live while copying",
           "elastic_guaranteed_path"),
    Mutant("grow_after_short_reclaim", ("I8c",), "admission", _R, _ADM,
           "                if released < over:  # a short answer", "                if False:  # a short answer",
           "KV grows after the weight holder answered short (the bug issue #9 found in ElasticSplit)",
           "elastic_guaranteed_path"),
    Mutant("reclaim_ignores_answer", ("C5",), "admission", _R, _ADM,
           "            target, self.answer_cap = min(target, self.answer_cap), None\n",
           "            self.answer_cap = None\n",
           "the weight cache gives back all it is asked for whatever its holder answered",
           "elastic_guaranteed_path"),
    # --- real-session model (spec.sessions, spec layer: the invariants judge the spec's own states) ------
    Mutant("lowering_ignores_headroom", ("C8",), "ort", _S, _SES,
           "        ok = after.used + t.headroom <= new\n", "        ok = after.used <= new\n",
           "a limit lowering commits when used fits, forgetting the transient headroom"),
    Mutant("report_available_ignores_cache", ("C8",), "ort", _S, _SES,
           "available=available(s.limit, s.used, 0),", "available=available(s.limit, s.pinned, 0),",
           "the report counts the reclaimable cache as available"),
    Mutant("decline_not_reported", ("I3",), "ort", _S, _SES,
           "        ne = s.not_enforced | {a.role.value} if guards.on(\"honest_decline\") else s.not_enforced  # I3\n"
           "        return attrs.evolve(s, declined=",
           "        ne = s.not_enforced\n        return attrs.evolve(s, declined=",
           "declining a class of bytes records it but never reports it as not enforced"),
    Mutant("compat_labelled_weights", ("I3",), "ort", _S, _SES,
           "            label = f\"model:{a.name}\" if mode is Mode.COMPAT else Role.WEIGHTS.value\n",
           "            label = Role.WEIGHTS.value\n",
           "a compatibility-mode model is reported under the weights label, so it reads as enforced"),
    Mutant("compat_reuses_prefix", ("C9",), "ort", _S, _SES,
           "LoadedModel(f, mode, 0, inferred, mode is not Mode.COMPAT, a.declared, a.host_mapped)",
           "LoadedModel(f, mode, 0, inferred, True, a.declared, a.host_mapped)",
           "a model without a state declaration still gets prefix reuse"),
    Mutant("residency_without_source", ("I8b",), "ort", _S, _SES,
           "residency=s.residency.set(a.model, Residency(a.nbytes, a.source))",
           "residency=s.residency.set(a.model, Residency(a.nbytes, \"\"))",
           "a residency figure is stored without the source it was read from"),
    Mutant("admission_drops_transient_peak", ("I8",), "ort", _S, _SES,
           "        admitted = admitted_bytes(counted, t.granule, f.transient_peak)\n",
           "        admitted = admitted_bytes(counted, t.granule, 0)\n",
           "weights are admitted without the session's transient peak"),
    Mutant("prefetch_into_headroom", ("I8c",), "ort", _S, _SES,
           "        cache = max(s.cache, s.limit - s.pinned - t.headroom)\n",
           "        cache = max(s.cache, s.limit - s.pinned)\n",
           "the weight cache prefetches into the transient headroom"),
    Mutant("limit_above_capacity", ("C7",), "ort", _S, _SES,
           "        if new > t.capacity:\n", "        if new > 2 * t.capacity:\n",
           "a limit above the pool's capacity is accepted"),
)

MUTANTS: dict[str, Mutant] = {m.name: m for m in _ALL}
if len(MUTANTS) != len(_ALL):
    raise ValueError("two mutants share a name")
