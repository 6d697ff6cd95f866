"""`ProcessMemoryManager`: one governor per process over one set of authorities (C1).

The governor an ORT engineer would port, one file per part, every part
working on the same records under the same `OwnedLock`:

    ledger.py        authorities, holders, reservations -> leases (the one ledger)
    allowances.py    non-owning allowances on a ledger
    arbitration.py   requester tickets: grant = a ledger reservation, claim = its commit
    pressure.py      holder pressure tickets and callbacks (called with no lock held)
    transactions.py  try-only capacity transactions in authority id order, retry intents
    bundles.py       state bundles, model views (allocation id, generation), poisoning (I5)
    limits.py        topology and limits: prepare -> pressure -> commit, or keep the old limit
    devices.py       device loss, one mechanism for every part
    views.py         refinement mappings, contract hooks, public tracing hooks
    tx_view.py       the `spec.transactions` mapping and the focused operations' contracts
    lock.py          the ledger lock that knows its owner (I7)

A requester ticket's grant, a transaction's reservation and a lease are all
entries of the same authority's allocation table: no part has its own
`used`, `free` or capacity, and there is no second ledger (the focused
transaction model, `spec.transactions`, is a view of these same records:
`abstract_tx`). Nothing here imports the spec's transition code
(`spec.machine`, `spec.manager`); it shares the spec's vocabulary only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refimpl.manager.allowances import Allowances
from refimpl.manager.arbitration import Arbitration
from refimpl.manager.bundles import Bundles
from refimpl.manager.devices import Devices
from refimpl.manager.ledger import Ledger
from refimpl.manager.limits import Limits
from refimpl.manager.lock import OwnedLock
from refimpl.manager.pressure import Callback, Pressures
from refimpl.manager.transactions import Transactions
from refimpl.manager.tx_view import TxView
from refimpl.manager.views import Views
from spec.errors import InvalidArgument
from spec.guards import ALL_ON, GuardSet

__all__ = ["ProcessMemoryManager", "OwnedLock", "Callback"]


class ProcessMemoryManager(Ledger, Allowances, Arbitration, Pressures, Transactions, Bundles, Limits, Devices, Views,
                           TxView):
    """One per process: the authority for every governed pool (C1), and every part that works on it."""

    def __init__(self, guards: GuardSet = ALL_ON, trace: Callable[[dict[str, Any]], None] | None = None,
                 aging_bound: int = 4) -> None:
        """`trace`: a sink receiving one JSONL-ready event per operation (issue #6, `refimpl.tracing`).

        `aging_bound`: rounds after which a pending ticket is matured (I13)."""
        if type(aging_bound) is not int or aging_bound < 1:
            raise InvalidArgument(f"aging_bound must be an int >= 1, got {aging_bound!r}")
        self._init_ledger(guards)
        self._init_arbitration(aging_bound)
        self._init_pressure()
        self._init_transactions()
        self._init_bundles()
        self._init_views()
        if trace is not None:
            from refimpl.tracing import attach

            attach(self, trace)
