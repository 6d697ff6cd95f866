"""The topology epochs of a composed trace (`ortmem-manager/2`, issue #21 item 4) against the spec's topology
versions (`invariants.manager_trace.topology_changed`): the governor numbers its epochs as it likes, one to one and
increasing; the replay (`invariants.manager_replay`) checks each event's against the version it was decided in.

Reads no spec state: the replay tells it which events changed the topology."""

from __future__ import annotations

from invariants.replay import _Bad

__all__ = ["Epochs"]


class Epochs:
    """The trace's topology epochs against the spec's topology versions (`invariants.manager_trace.topology_changed`):
    the governor numbers them as it likes, one to one and increasing. The first event's epoch is version 0's; each
    event carries the current version's; after an accepted event that changed the topology, the next carries a new
    epoch, greater than every earlier one. O(1) per event."""

    __slots__ = ("epoch", "since", "change", "due")

    def __init__(self) -> None:
        self.epoch: int | None = None  # the current version's epoch (the greatest so far); `since`, `due`: set with it
        self.change: tuple[str, int] | None = None  # (kind, line) of the last event that changed the topology

    def check(self, epoch: int, line: int) -> None:
        if self.epoch is None or (self.due and epoch > self.epoch):
            self.epoch, self.since, self.due = epoch, line, False  # `due`: a change not yet followed by a new epoch
            return
        if epoch == self.epoch and not self.due:
            return
        if epoch > self.epoch:
            raise _Bad("refinement", f"topology epoch {epoch} advanced without a topology change "
                                     f"(epoch {self.epoch} since line {self.since})")
        if self.change is None:  # an earlier epoch, and the topology never changed: no version it could be
            raise _Bad("refinement", f"topology epoch {epoch} went back: epoch {self.epoch} since line {self.since}, "
                                     "and no topology change since the trace began")
        kind, at = self.change  # an earlier epoch, or the current one when a new one is due: a change ended it
        since = "a new epoch due" if self.due else f"epoch {self.epoch} since"
        raise _Bad("refinement", f"topology epoch {epoch} is stale: {kind} at line {at} changed the topology ({since})")

    def changed(self, kind: str, line: int) -> None:
        self.change, self.due = (kind, line), True
