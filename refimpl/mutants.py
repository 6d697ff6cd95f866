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
_GOV = "refimpl.governor"

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
)

MUTANTS: dict[str, Mutant] = {m.name: m for m in _ALL}
if len(MUTANTS) != len(_ALL):
    raise ValueError("two mutants share a name")
