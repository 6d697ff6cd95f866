"""Mutants of the composed retry intents (C4) and poisoning (I5) (a part of the registry in `refimpl.verify.mutants`).

The transactions checker runs these on the composed restriction (`submodel="composed"`,
`invariants.manager_tx_machine.TxMachine`): bugs in refimpl (`refimpl.manager.transactions`,
`refimpl.manager.ledger`) and in the composed spec (`spec.manager_tx`), each caught by a harm clause of its
ID in `invariants.manager_tx`.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from spec.guards import Layer

__all__ = ["TX_MUTANTS"]

_R, _S = Layer.REFIMPL, Layer.SPEC
_MTX, _MLED, _STX = "refimpl.manager.transactions", "refimpl.manager.ledger", "spec.manager_tx"
_C = "composed"

TX_MUTANTS: tuple[Mutant, ...] = (
    Mutant("retry_takes_a_fresh_place", ("C4",), "transactions", _R, _MTX,
           "                t.seq, t.priority, t.age = place[1:]\n", "                t.priority = place[2]\n",
           "a retry keeps its priority but queues as a newcomer: every later arrival is ahead of it", _C),
    Mutant("abort_forgets_the_place", ("C4",), "transactions", _R, _MTX,
           "        self._places[t.id] = (t.holder, t.seq, t.priority, min(t.age + 1, self._bound))  # its place, 0 B (C4)\n",
           "", "an abort leaves no intent: the retry has no place to take back", _C),
    Mutant("fresh_tx_reuses_a_sequence", ("C4",), "transactions", _R, _MTX,
           "        t.seq = t.id  # a fresh transaction's submit sequence is its own (never reused) id\n",
           "        t.seq = 1\n", "every fresh transaction takes submit sequence 1: two requests share one place", _C),
    Mutant("spec_retry_leaves_the_intent", ("C4",), "transactions", _S, _STX,
           "    intents = m.intents if intent is None else m.intents.delete(intent.id)\n", "    intents = m.intents\n",
           "the spec's retry does not spend its intent: one request holds two places", _C),
    Mutant("poisoned_still_reserves", ("I5",), "transactions", _R, _MTX,
           "    def _reserve(self, tx: int) -> int:\n        self._grants()\n", "    def _reserve(self, tx: int) -> int:\n",
           "a poisoned governor still reserves for a transaction from the corrupt ledger", _C),
    Mutant("poisoned_ledger_still_reserves", ("I5",), "transactions", _R, _MLED,
           "        if self._poisoned:\n            self._grants()  # I5: a poisoned manager charges nothing new\n", "",
           "a poisoned governor's ledger still reserves and records new charge", _C),
    Mutant("spec_poisoned_still_grants", ("I5",), "transactions", _S, "spec.manager",
           "    if isinstance(action, CHARGING):\n        refuse_poisoned(m, guards)\n", "",
           "the spec lets a poisoned manager grant: every charging action runs on the corrupt ledger", _C),
)
