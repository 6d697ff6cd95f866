"""`ProcessMemoryManager`: one governor per process over one set of authorities (C1).

The governor an ORT engineer would port, one file per part, every part
working on the same records under the same ledger lock (`LedgerLock`):

    ledger.py        authorities, holders, reservations -> leases (the one ledger)
    allowances.py    non-owning allowances on a ledger
    arbitration.py   requester tickets: grant = a ledger reservation, claim = its commit; the try-only
                     path; reconfigure (generations)
    mailbox.py       posted cancels of dropped tickets (drop / drain, applied as CancelTicket); wait
    pressure.py      holder pressure tickets (priority, deadline, generation) and callbacks (called with no
                     lock held); use flags of leases
    transactions.py  try-only capacity transactions in authority id order, retry intents
    bundles.py       state bundles, model views (allocation id, generation), poisoning (I5)
    limits.py        topology and limits: prepare -> pressure -> commit, or keep the old limit
    devices.py       device loss, one mechanism for every part
    views.py         refinement mappings, contract hooks, public tracing hooks
    local_contract.py  the debug-build contract of the hot operations, on the records they touch
    contract_books.py  that contract's own books of each ledger (O(touched) conservation) and `checkpoint`
    runner.py        the one contract runner: a view before, G4 on a refusal, step and state
    lock.py          the ledger lock that knows its owner (I7)

A requester ticket's grant, a transaction's reservation and a lease are all
entries of the same authority's allocation table: no part has its own
`used`, `free` or capacity, and there is no second ledger. Nothing here imports the spec's transition code
(`spec.ledger`, `spec.manager`); it shares the spec's vocabulary only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from refimpl.manager.allowances import Allowances
from refimpl.manager.arbitration import Arbitration
from refimpl.manager.bundles import Bundles
from refimpl.manager.contract_books import checkpoint
from refimpl.manager.devices import Devices
from refimpl.manager.ledger import Ledger
from refimpl.manager.limits import Limits
from refimpl.manager.mailbox import Mailbox
from refimpl.manager.pressure import Callback, Pressures
from refimpl.manager.transactions import Transactions
from refimpl.manager.views import Views
from spec.errors import InvalidArgument
from spec.guards import ALL_ON, GuardSet
from spec.types import MAX_BYTES

__all__ = ["ProcessMemoryManager", "Callback", "checkpoint"]


class ProcessMemoryManager(Ledger, Allowances, Arbitration, Mailbox, Pressures, Transactions, Bundles, Limits, Devices,
                           Views):
    """One per process: the authority for every governed pool (C1), and every part that works on it."""

    # Every part's state as a slot: the hot paths read and write a dozen of these per operation, and an
    # instance dict of 40 keys (past CPython's shared-key limit) makes each access a hashed lookup (about 9%
    # of a ticket round trip, benchmarks/bench_manager.py). The parts (mixins) keep no slots of their own, so
    # instances still have a `__dict__`: tracing binds its wrappers there, and an attribute missing here
    # still works, only slower (tests/test_manager_slots.py names any such attribute).
    __slots__ = (
        # ledger
        "_guards", "_lock", "_auths", "_pools", "_views", "_holders", "_allocs", "_allows", "_next_auth",
        "_next_holder", "_next_alloc", "_next_allow", "_wake", "_leases", "_fresh", "_quotas", "_credited",
        "_topology_epoch",
        # arbitration
        "_bound", "_slots", "_charge_at_grant", "_aging", "_tickets", "_granted", "_next_ticket",
        # pressure
        "_callbacks", "_pressures", "_pressure_log", "_next_pressure",
        # mailbox
        "_mailbox",
        # transactions
        "_txs", "_places", "_next_tx",
        # bundles
        "_bundles", "_mviews", "_next_bundle", "_next_mview", "_poisoned",
        # views
        "_holder_recs", "_recorder", "_mchecks", "_books",
    )

    def __init__(self, guards: GuardSet = ALL_ON, trace: Callable[[dict[str, Any]], None] | None = None,
                 aging_bound: int = 4, mailbox: int = 1 << 16) -> None:
        """`trace`: a sink receiving one JSONL-ready event per operation (issue #6, `refimpl.tracing`).

        `aging_bound`: rounds after which a pending ticket is matured (I13). `mailbox`: live (pending or
        granted) tickets at most; a submit beyond that is refused with MailboxFull (back-pressure)."""
        if type(aging_bound) is not int or not 1 <= aging_bound <= MAX_BYTES:
            raise InvalidArgument(f"aging_bound must be an int in [1, 2**63-1], got {aging_bound!r}")
        if type(mailbox) is not int or not 1 <= mailbox <= MAX_BYTES:
            raise InvalidArgument(f"mailbox must be an int in [1, 2**63-1], got {mailbox!r}")
        if not isinstance(guards, GuardSet):
            raise InvalidArgument(f"guards must be a GuardSet, got {guards!r}")
        self._init_ledger(guards)
        self._init_arbitration(aging_bound, mailbox)
        self._init_pressure()
        self._init_mailbox()
        self._init_transactions()
        self._init_bundles()
        self._init_views()
        if trace is not None:
            from refimpl.tracing import attach

            attach(self, trace)
