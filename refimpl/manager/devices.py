"""Device contexts of `ProcessMemoryManager`: one loss mechanism for every part (C3, I6); registrations' lifetime.

`lose_device(a)`: the ledger marks the context lost and every charge on it
DEVICE_LOST (nothing is refunded: the device may still be using the bytes);
then every part lets go of `a`: pending and granted tickets on it are dropped
(a granted ticket's reservation stays charged, DEVICE_LOST, like any lease),
its open pressures and its limit change are dropped, and every open
transaction that needs `a` or binds a model view on it is aborted (with no
retry intent, as `spec.manager`'s LoseDevice: only `abort_tx` leaves one):
its reservations elsewhere are cancelled and credited,
its reservation on `a` stays charged; a committed lease set's bytes on `a`
stay charged too (stranded), and the model views on `a` become invalid.
`confirm_termination(a)` refunds every DEVICE_LOST charge on `a` exactly
once (idempotent). `remove_authority(a)` deregisters a provider, refused
(ProviderPinned) while anything still references it (C3);
`unregister_holder(h)` likewise (HolderInUse) while anything names the holder
(I4a), and drops its retry intents. The focused
transactions have no verbs of their own for these: they use the same ones.
"""

from __future__ import annotations

from invariants.contracts import SWITCH as _SWITCH
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.tickets import PressureState
from spec.errors import HolderInUse, InvalidTransition, ProviderPinned
from spec.types import AllocState, ContextState
from refimpl.manager.ledger import _Auth

__all__ = ["Devices"]

_LOST = AllocState.DEVICE_LOST
_LOSABLE = (AllocState.PROVISIONAL, AllocState.LIVE, AllocState.QUARANTINED)  # charges a lost context keeps


class Devices:
    """Device loss across the parts; needs every part's tables."""

    def lose_device(self, authority: int) -> None:
        """Mark the device lost: admission stops; every charge stays until termination."""
        if _SWITCH.on or self._mailbox:
            self._checked(A.LoseDevice(authority), self._scope_auth_all, authority, self._lose_all, authority)
            return
        with self._lock:
            self._lose_all(authority)
            wake = self._wake
            if wake:
                self._wake = []
        if wake:
            self._wake_up(wake)

    def _lose_all(self, authority: int) -> None:
        a = self._canonical(authority)  # UnknownAuthority before anything moves
        if a.context is ContextState.ACTIVE and not self._guards.on("loss_keeps_charge"):
            # C3, I6 (negative control): the transactions' reservations on the device are refunded at once.
            for t in self._txs.values():
                for rec in t.held:
                    if rec.auth is a and rec.id in self._allocs:
                        self._retire(rec)
        on_lost = self._bound_on(a.id)
        self._lose(authority)
        for t in [t for t in self._tickets.values() if t.auth is a]:
            del self._tickets[t.id]
            a.pending.pop(t.id, None)
            if t.alloc is not None:
                t.alloc.part = None  # DEVICE_LOST now: settled by confirm_termination, like any lease
            if t.event is not None:
                self._wake.append(t.event)
        for r in [p for p in self._pressures.values() if p.auth is a]:
            self._shut_pressure(r, PressureState.CANCELLED)
        a.change = None
        for t in [t for t in self._txs.values() if a.id in t.need or on_lost.intersection(t.bound)]:
            self._unwind(t, a)  # open work touching the device aborts (no retry intent)
        self._invalidate_views(a.id)
        self._rounds()

    def confirm_termination(self, authority: int) -> None:
        """The lost context is gone: refund its charges, exactly once (idempotent)."""
        if _SWITCH.on or self._mailbox:
            self._checked(A.ConfirmTermination(authority), self._scope_auth_all, authority, self._terminate, authority)
            return
        with self._lock:
            self._terminate(authority)

    def remove_authority(self, authority: int) -> None:
        """Deregister a provider; refused while a charge, allowance, alias or part record references it (C3)."""
        return self._run(M.RemoveAuthority, self._ms_remove, self._remove_authority, authority)

    def _remove_authority(self, authority: object) -> None:
        a = self._auth(authority)
        refs = self._pins(a)
        if refs and self._guards.on("provider_pinned"):  # C3
            raise ProviderPinned(f"authority {a.id} is pinned by {', '.join(refs[:4])}")
        del self._auths[a.id]
        if self._pools.get(a.pool) is a:
            del self._pools[a.pool]
        if a.alias_of is not None:
            del self._views[(a.alias_of, a.view)]
        self._topology_epoch += 1

    def _ms_remove(self, authority: object) -> tuple[frozenset[int], tuple[int, ...]]:
        """The composed scope of a removal: the ledger (and its canonical one) and every allocation on them."""
        a = self._auths.get(authority) if type(authority) is int else None
        if a is None:
            return frozenset(), ()
        auths = frozenset({a.id, a.alias_of if a.alias_of is not None else a.id})
        return auths, tuple(i for x in auths for i in self._auths[x].allocs)

    def _pins(self, a: _Auth) -> list[str]:
        """Everything that still references ledger `a`: the parts' records, aliases, charges, allowances."""
        refs, covered = self._tx_pins(a)
        refs += [f"alias {x.id}" for x in self._auths.values() if x.alias_of == a.id]
        refs += [f"allocation {r.id}" for r in a.allocs.values() if r.id not in covered and r.state is not _LOST]
        stranded = sum(r.charge for r in a.allocs.values() if r.state is _LOST)
        if stranded:
            refs.append(f"{stranded} B stranded charge")
        refs += [f"allowance {w.id}" for w in a.allowances.values()]
        refs += [f"ticket {k}" for k in a.pending]
        refs += [f"pressure {p.id}" for p in self._pressures.values() if p.auth is a]
        return refs + ([f"limit change to {a.change.target} B"] if a.change is not None else [])

    def unregister_holder(self, holder: int) -> None:
        """Deregister a holder; refused while an allocation, allowance, ticket, pressure or transaction names it (I4a)."""
        return self._run(M.UnregisterHolder, self._ms_holder, self._unregister_holder, holder)

    def _unregister_holder(self, holder: object) -> None:
        self._holder(holder)
        refs = self._holder_refs(holder)
        if refs and self._guards.on("holder_in_use"):  # I4a
            raise HolderInUse(f"holder {holder} is named by {', '.join(refs[:4])}")
        for i in [i for i, place in self._places.items() if place[0] == holder]:
            del self._places[i]  # its retry intents: zero bytes, a place only its own retry can take
        del self._holders[holder]
        self._holder_recs.pop(holder, None)

    def _holder_refs(self, hid: object) -> list[str]:
        refs = [f"allocation {r.id}" for r in self._allocs.values() if r.holder == hid]
        refs += [f"allowance {w.id}" for w in self._allows.values() if w.holder == hid]
        refs += [f"ticket {t.id}" for t in self._tickets.values() if t.holder == hid]
        refs += [f"pressure {p.id}" for p in self._pressures.values() if p.holder == hid]
        return refs + [f"transaction {t.id}" for t in self._txs.values() if t.holder == hid]

    def _ms_holder(self, holder: object) -> tuple[frozenset[int], tuple[int, ...]]:
        """The composed scope of an unregistration: every ledger the holder has a record on, and its allocations."""
        if type(holder) is not int or holder not in self._holders:
            return frozenset(), ()
        allocs = tuple(r.id for r in self._allocs.values() if r.holder == holder)
        auths = {self._allocs[i].auth.id for i in allocs} | {w.auth.id for w in self._allows.values() if w.holder == holder}
        auths |= {t.auth.id for t in self._tickets.values() if t.holder == holder}
        auths |= {p.auth.id for p in self._pressures.values() if p.holder == holder}
        auths |= {aid for t in self._txs.values() if t.holder == holder for aid, _ in t.needs}
        return frozenset(auths), allocs

    # --- the ledger's records of a lost context (C3) --------------------------------------------------

    def _lose(self, authority: int) -> None:
        a = self._canonical(authority)
        if a.context is ContextState.ACTIVE:
            a.context = ContextState.LOST
            self._topology_epoch += 1
        if a.context is ContextState.LOST:
            for rec in a.allocs.values():
                if rec.state in _LOSABLE:
                    rec.state = AllocState.DEVICE_LOST

    def _terminate(self, authority: int) -> None:
        a = self._canonical(authority)
        if a.context is ContextState.ACTIVE:
            raise InvalidTransition(f"authority {a.id}: no transition for event 'confirm-termination' in state 'active' "
                                    "(the context was never lost)")
        if a.context is ContextState.LOST:
            a.context = ContextState.TERMINATED
            self._topology_epoch += 1
        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:
            self._retire(rec)
        self._rounds()  # the freed charge is quota room for the tier's waiters (I13)
