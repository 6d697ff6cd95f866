"""The normative model: the catalog of IDs and the abstract governor (pure; no I/O, no clock)."""

from spec.catalog import CATALOG, IDS, Entry, Status, entry
from spec.guards import ALL_ON, GUARDS, Guard, GuardSet, Layer
from spec.ledger import apply, step
from spec.ledger_state import EMPTY, State, snapshot

__all__ = [
    "ALL_ON", "CATALOG", "EMPTY", "GUARDS", "IDS", "Entry", "Guard", "GuardSet", "Layer", "State", "Status",
    "apply", "entry", "snapshot", "step",
]
