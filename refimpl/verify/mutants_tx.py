"""Mutants of the composed capacity transactions (a part of `refimpl.verify.mutants`), run by the transactions
checker on its composed restriction (`submodel="composed"`): retry intents (C4), device loss and termination (C3),
views (C6, I9), bundles and poisoning (I5, I10).
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import GOV, MBUN, MDEV, MTX, R, S, SMAN, STX, SVIEW

__all__ = ["TX_MUTANTS"]

_C = "composed"

TX_MUTANTS: tuple[Mutant, ...] = (
    Mutant("retry_takes_a_fresh_place", ("C4",), "transactions", R, MTX,
           "t.seq, t.priority, t.age = place[1:]", "t.priority = place[2]",
           "a retry keeps its priority but queues as a newcomer: every later arrival is ahead of it", _C),
    Mutant("abort_forgets_the_place", ("C4",), "transactions", R, MTX,
           "        self._places[t.id] = (t.holder, t.seq, t.priority, min(t.age + 1, self._bound))  # its place, 0 B (C4)\n",
           "", "an abort leaves no intent: the retry has no place to take back", _C),
    Mutant("fresh_tx_reuses_a_sequence", ("C4",), "transactions", R, MTX,
           "id, priority, 0  # submit sequence: its own id, never reused", "1, priority, 0",
           "every fresh transaction takes submit sequence 1: two requests share one place", _C),
    Mutant("spec_retry_leaves_the_intent", ("C4",), "transactions", S, STX,
           "intents = m.intents if intent is None else m.intents.delete(intent.id)", "intents = m.intents",
           "the spec's retry does not spend its intent: one request holds two places", _C),
    Mutant("poisoned_still_reserves", ("I5",), "transactions", R, MTX,
           "def _reserve(self, tx: int) -> int:\n        self._grants()", "def _reserve(self, tx: int) -> int:",
           "a poisoned governor still reserves for a transaction from the corrupt ledger", _C),
    Mutant("poisoned_ledger_still_reserves", ("I5",), "transactions", R, GOV,
           "        if self._poisoned:\n            self._grants()  # I5: a poisoned manager charges nothing new\n", "",
           "a poisoned governor's ledger still reserves and records new charge", _C),
    Mutant("spec_poisoned_still_grants", ("I5",), "transactions", S, SMAN,
           "    if isinstance(action, CHARGING):\n        refuse_poisoned(m, guards)\n", "",
           "the spec lets a poisoned manager grant: every charging action runs on the corrupt ledger", _C),
    Mutant("retry_keeps_intent", ("C4",), "transactions", R, MTX, "            del self._places[retry]\n", "",
           "a retry takes its intent's place but leaves the intent in place: one request holds two places", _C),
    Mutant("reserve_charges_first_need", ("I1",), "transactions", R, MTX,
           "aid, n = t.needs[len(t.held)]", "aid, n = t.needs[len(t.held)][0], t.decl[0][1]",
           "a reservation charges the first declared need's bytes, whichever authority it takes: the transaction "
           "holds bytes that are not its needs'", _C),
    # --- device loss and termination (C3) ---------------------------------------------------------------------
    Mutant("plan_on_lost_context", ("C3",), "transactions", R, MTX,
           "    self._require_active(a)\n        place = None if retry", "place = None if retry",
           "planning does not check that the authorities' contexts are still active: a lost context gets new work", _C),
    Mutant("loss_refunds_committed", ("C3",), "transactions", R, MDEV,
           "rec.state = AllocState.DEVICE_LOST",
           "rec.state = AllocState.DEVICE_LOST\n                    a.used -= rec.charge",
           "device loss strands a lease's charge and refunds it at once too", _C),
    Mutant("termination_keeps_stranded", ("C3",), "transactions", R, MDEV,
           "self._retire(rec)\n        self._rounds()  # the freed",
           "rec.auth.used -= rec.charge\n        self._rounds()  # the freed",
           "confirmed termination refunds the stranded charge but leaves it recorded as stranded", _C),
    Mutant("termination_forgets_refund", ("C3",), "transactions", R, MDEV,
           "self._retire(rec)\n        self._rounds()  # the freed",
           "rec.charge = 0\n            self._retire(rec)\n        self._rounds()  # the freed",
           "confirmed termination clears the stranded record without refunding the charge", _C),
    # --- views (C6, I9) ---------------------------------------------------------------------------------------
    Mutant("commit_keeps_users", ("C6",), "transactions", S, SVIEW,
           "if not m.views:", "if not m.views or not drop_own:  # only an abort's execution ends",
           "commit ends the transaction but not its execution: it stays listed as a user of the views it bound", _C),
    Mutant("view_id_not_advanced", ("C6",), "transactions", R, MBUN,
           "        self._next_mview += 1\n", "", "publish reads the next view id but never advances it", _C),
    Mutant("one_bit_generation", ("I9",), "transactions", R, MBUN,
           "v.generation += 1", "v.generation = v.generation % 2 + 1",
           "the mapping generation is kept in one bit, so a second remap brings an old generation back", _C),
    # --- bundles and failure scope (I5, I10) ------------------------------------------------------------------
    Mutant("abort_keeps_partial_step", ("I10",), "transactions", R, MTX,
           "credited = self._unwind(t, None)",
           "if t.bundle is not None:  # the step it was writing\n"
           "            self._bundles[t.bundle].versions = [x + 1 for x in self._bundles[t.bundle].versions]\n"
           "        credited = self._unwind(t, None)",
           "an abort of a bundle's transaction keeps the step it was writing: the bundle's parts advance with no "
           "lease taken", _C),
    Mutant("mismatch_poisons_all", ("I5",), "transactions", R, MBUN,
           "b.poisoned = True", "for b in self._bundles.values():\n            b.poisoned = True",
           "a post-commit mismatch poisons every bundle, not only the one that disagreed", _C),
)
