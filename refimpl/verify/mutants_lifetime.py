"""Mutants of records' lifetime: unregistering a holder, shrinking and growing a lease, an allowance across a
device loss (the manager checker; a part of `refimpl.verify.mutants`).
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import MDEV, MPRE, R, S, SMAN, SPARTS

__all__ = ["LIFETIME_MUTANTS"]

LIFETIME_MUTANTS: tuple[Mutant, ...] = (
    Mutant("unregister_ignores_tickets", ("I4a",), "manager", R, MDEV,
           "        refs += [f\"ticket {t.id}\" for t in self._tickets.values() if t.holder == hid]\n", "",
           "a holder whose only record is a pending or granted ticket may be unregistered: the grant goes to nobody"),
    Mutant("spec_unregister_keeps_intents", ("I4a",), "manager", S, SPARTS,
           "for i in [i.id for i in intents.values() if i.holder == h.id]:", "for i in []:",
           "an unregistered holder's retry intents stay: a place in arbitration that belongs to nobody"),
    Mutant("shrink_keeps_lease_size", ("I1",), "manager", R, MPRE, "        rec.nbytes -= nbytes\n", "",
           "a shrink credits the authority but the lease keeps its size: bytes still leased are granted again"),
    Mutant("spec_shrink_to_nothing", ("I1",), "manager", S, SPARTS,
           "if nbytes >= rec.nbytes:", "if nbytes > rec.nbytes:",
           "a shrink of all of a lease is accepted: a live lease of zero bytes, a release that retires nothing"),
    Mutant("grow_skips_headroom", ("I2", "I1"), "manager", R, MPRE,
           "(a.pending or nbytes > self._room(a))", "a.pending",
           "a grow is granted past the room: the authority is charged beyond its limit (I2) or its tier beyond the "
           "process quota (I1)"),
    Mutant("grow_overtakes_waiter", ("I13",), "manager", R, MPRE,
           "(a.pending or nbytes > self._room(a))", "nbytes > self._room(a)",
           "a grow takes headroom while a ticket waits on the authority: the waiter is overtaken by every grow"),
    Mutant("spec_grow_charges_nothing", ("I1",), "manager", S, SPARTS, "rec.charge + nbytes", "rec.charge",
           "the spec's grow leases the bytes but charges none: bytes leased and not charged are granted twice"),
    Mutant("spec_loss_drops_allowances", ("I6",), "manager", S, SMAN,
           "ledger = machine.step(m.ledger, act, guards)[0]  # the ledger's validation and loss (no refund)",
           "ledger = machine.step(m.ledger, act, guards)[0]\n"
           "    for w in [w for w in ledger.allowances.values() if w.authority == act.authority]:\n"
           "        ledger = evolve(ledger, allowances=ledger.allowances.delete(w.id))",
           "the spec's device loss drops the allowances on the lost authority: their holders' limits, growth and "
           "mapped bytes vanish without their close"),
)
