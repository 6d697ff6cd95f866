"""Mutants of the replay checker and of tracing (a part of `refimpl.verify.mutants`).

Each has `submodel="replay"`: its checker runs the replay control (`refimpl.verify.replay_control`), which
re-records a fixed corpus from refimpl under the mutant and finds the mutant only when a verdict flips (a good
trace rejected, or a bad one accepted or rejected for another reason). `ids`: the IDs whose harm the corpus's bad
trace for that bug shows. `model` names the corpus: "ledger" (ledger-only traces) or "manager" (composed ones);
both are replayed by the one engine, `invariants.manager_replay`.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import MREP, R, REP

__all__ = ["REPLAY_MUTANTS"]


def _m(name: str, ids: tuple[str, ...], model: str, module: str, old: str, new: str, description: str) -> Mutant:
    return Mutant(name, ids, model, R, module, old, new, description, submodel="replay")


REPLAY_MUTANTS: tuple[Mutant, ...] = (
    # --- the replay, judged on the ledger-only corpus ---------------------------------------------------
    _m("replay_excuses_any_refusal", ("C2",), "ledger", REP,
       "{type(e).__name__ for e in refusals(state, act)}", "set(E.__all__)",
       "a rejected event naming any spec error class passes when the spec refuses too, even a class whose "
       "precondition does not hold (a tier mismatch reported for an over-limit request)"),
    # The sequence check is one (invariants.replay.next_in_sequence) for both corpora: judged on this one only.
    _m("replay_duplicate_as_retransmission", ("I4a",), "ledger", REP,
       'raise _Bad("duplicate-sequence"',
       'return  # a retransmission: already applied\n        raise _Bad("duplicate-sequence"',
       "a repeated sequence number is taken for a harmless retransmission, but the caller still applies the "
       "event: a release delivered twice is judged a second release of a retired lease (I4a), not a duplicate"),
    _m("replay_forgives_one_lost_event", ("I1",), "ledger", REP, "if seq > expected:", "if seq > expected + 1:",
       "a jump of one in the sequence is forgiven (an off-by-one): a lost cancel goes unnoticed"),
    _m("replay_boundary_forgives_later_leftovers", ("I1",), "ledger", MREP,
       "at_boundary = act is None", "at_boundary = at_boundary or act is None",
       "once a boundary was declared, work left open at the end of the trace is forgiven, even work begun after the "
       "boundary"),
    _m("replay_leftover_forgets_growth", ("I4b",), "ledger", MREP,
       "    out += [f\"allowance {o('allowance', w.id)} still reserves {w.reserved} B of growth\"\n"
       "            for w in m.ledger.allowances.values() if w.reserved]\n", "",
       "the end-of-trace leftover check looks at provisional leases only: allowance growth reserved and never mapped "
       "is forgiven"),
    _m("replay_g4_compares_leases_only", ("I1",), "ledger", MREP,
       "if rejected:", "if rejected and allocs is not led.allocations:",
       "a rejected event is held to G4 only when it changed a lease: a refusal that moved its ledger's used is judged "
       "as an accepted step would be (I1)"),
    _m("replay_view_drops_untouched_ledgers", ("I1",), "ledger", MREP,
       "auths[aid].used != u:", 'auths[aid].used != u and aid == getattr(sact, "authority", None):',
       "the observed state judged by the clauses holds the figures of the ledger the action names only: a figure the "
       "governor moved on another ledger is reported as a plain refinement, not as the conservation breach it is"),
    _m("replay_allows_retired_allocation_id", ("I4a",), "ledger", "invariants.replay_ids",
       '(kind == "allocation" or self.live(kind, old))', "self.live(kind, old)",
       "an allocation id may be issued again once its lease retired (as authority and holder ids may not be "
       "while live): a reused lease id passes"),
    _m("replay_charges_of_named_allocations_only", ("I1",), "manager", "invariants.manager_trace",
       "        allocs.update(r for r in changed(held, now)", "        allocs.update(r for r in ()",
       "an event need observe only the charge of the allocation an argument names: a grant's new reservation (or a "
       "reserve_tx's, a try_reserve's) left out replays clean (issue #21 item 4)"),
    # --- tracing (refimpl.tracing, the manager's observed figures) ------------------------------------
    _m("trace_omits_recorded_charge", ("I1",), "ledger", "refimpl.manager.views",
       "(A.Reserve, A.RecordCommitted)) and type(result", "A.Reserve) and type(result",
       "record_committed's new charge (and its ledger's used, through a view) is left out of the event's "
       "observed figures"),
    _m("trace_reads_touched_after_operation", ("I1",), "ledger", "refimpl.tracing",
       ("            auths, allocs = rec.pmm._touched(act)\n", "error, result = e, None"),
       ("", "error, result = e, None\n            auths, allocs = rec.pmm._touched(act)"),
       "what an operation touches is read after it ran: a released lease is gone, so its ledger's used and its "
       "charge are not observed"),
    _m("trace_omits_grant_charge", ("I1",), "manager", "refimpl.tracing",
       "None, {} if r is None else {r: c}))", "None, {}))",
       "a grant event leaves out the charge of the allocation it reserved"),
    _m("trace_stamps_epoch_after_operation", ("C3",), "manager", "refimpl.tracing",
       "event = event_for(self.sequence + 1, epoch)", "event = event_for(self.sequence + 1, self.pmm._topology_epoch)",
       "an event carries the topology epoch as its operation left it, not the one it was decided in: a registration "
       "and the events after it carry one epoch, so the change shows no new one"),
    _m("trace_omits_created_charges", ("I1",), "manager", "refimpl.manager.views",
       "(*allocs, *range(first, self._next_alloc))", "tuple(allocs)",
       "a composed operation's event leaves out the allocations it created (a reserve_tx's, a try_reserve's)"),
    # --- the replay, judged on the composed corpus ------------------------------------------------------
    _m("replay_ignores_topology_epoch", ("C3",), "manager", MREP,
       '            epochs.check(ev["topology_epoch"], line)\n', "",
       "the topology epoch an event carries is never compared: an event decided against the topology before a "
       "device loss (or any other topology change) replays clean"),
    _m("manager_replay_forgets_open_work", ("C4",), "manager", MREP,
       "left = never_granted(owed, ids) + _leftover(m, ids)", "left = never_granted(owed, ids)",
       "only owed grants are checked at the end of a composed trace: a transaction still holding its reservation (and "
       "its provisional allocation) is forgotten"),
    _m("grant_replay_lets_newcomer_overtake", ("I13",), "manager", "invariants.replay_grants",
       "newcomer = first is not None and first >= before.next_ticket", "newcomer = False",
       "a grant owed to a fitting waiter may be given to a ticket submitted after the room was made: the "
       "newcomer's grant overtakes the waiter's (ortmem-manager/2, I13)"),
)
