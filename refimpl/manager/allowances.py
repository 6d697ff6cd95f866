"""The allowance part of `ProcessMemoryManager`: non-owning permissions to map charged capacity (I4b).

An allowance owns no bytes: opening, growing, mapping, unmapping and
transferring move only allowance figures, never a ledger's `used`. Records
live beside the ledger's (`_Allow` in `refimpl.manager.ledger`).
"""

from __future__ import annotations

from invariants.contracts import SWITCH as _SWITCH
from spec import ledger_actions as A
from spec.errors import AllowanceExceeded, ForeignHolder, InvalidArgument, InvalidBytes, InvalidTransition, UnknownAllowance
from refimpl.manager.ledger import _Allow, _nbytes

__all__ = ["Allowances"]


class Allowances:
    """Allowances on ledger authorities; needs the ledger part's tables and lookups."""

    # --- allowances (I4b) ---------------------------------------------------

    def open_allowance(self, holder: int, authority: int, limit: int) -> int:
        """A non-owning permission to map up to `limit` bytes of already-charged capacity."""
        if _SWITCH.on or self._mailbox:
            return self._checked(A.OpenAllowance(holder, authority, limit), self._scope_auth, authority, self._open_allowance, holder, authority, limit)
        with self._lock:
            return self._open_allowance(holder, authority, limit)

    def _open_allowance(self, holder: int, authority: int, limit: int) -> int:
        _nbytes(limit, "limit")
        self._holder(holder)
        a = self._ledger(authority)
        self._require_active(a)
        if a.promised + limit > a.capacity and self._guards.on("allowance_capacity"):  # I4b
            raise AllowanceExceeded(f"authority {a.id}: {a.promised} B of {a.capacity} B already promised")
        w = _Allow(self._next_allow, a, holder, limit)
        self._next_allow += 1
        self._allows[w.id] = a.allowances[w.id] = w
        a.promised += limit
        return w.id

    def reserve_growth(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on or self._mailbox:
            self._checked(A.ReserveGrowth(holder, allowance, nbytes), self._scope_allow, allowance, self._grow, holder, allowance, nbytes)
            return
        with self._lock:
            self._grow(holder, allowance, nbytes)

    def _grow(self, holder: int, allowance: int, nbytes: int) -> None:
        self._grants()  # I5: a poisoned manager reserves no growth either
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        self._require_active(w.auth)
        if nbytes > w.limit - w.reserved - w.mapped and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {w.id}: {nbytes} B asked, {w.limit - w.reserved - w.mapped} B free")
        w.reserved += nbytes

    def map_allowance(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on or self._mailbox:
            self._checked(A.MapAllowance(holder, allowance, nbytes), self._scope_allow, allowance, self._map, holder, allowance, nbytes)
            return
        with self._lock:
            self._map(holder, allowance, nbytes)

    def _map(self, holder: int, allowance: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        self._require_active(w.auth)
        if nbytes > w.reserved and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {w.id}: {nbytes} B to map, {w.reserved} B reserved")
        w.reserved = max(0, w.reserved - nbytes)
        w.mapped += nbytes

    def unmap_allowance(self, holder: int, allowance: int, nbytes: int) -> None:
        if _SWITCH.on or self._mailbox:
            self._checked(A.UnmapAllowance(holder, allowance, nbytes), self._scope_allow, allowance, self._unmap, holder, allowance, nbytes)
            return
        with self._lock:
            self._unmap(holder, allowance, nbytes)

    def _unmap(self, holder: int, allowance: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        w = self._owned_allow(holder, allowance)
        if nbytes > w.mapped:
            raise InvalidBytes(f"allowance {w.id}: {nbytes} B to unmap, {w.mapped} B mapped")
        w.mapped -= nbytes

    def transfer_allowance(self, holder: int, source: int, target: int, nbytes: int) -> None:
        """Move `nbytes` of limit between allowances of one authority; no charge moves (I4b)."""
        if _SWITCH.on or self._mailbox:
            self._checked(A.TransferAllowance(holder, source, target, nbytes), self._scope_allow, source, self._transfer, holder, source, target, nbytes)
            return
        with self._lock:
            self._transfer(holder, source, target, nbytes)

    def _transfer(self, holder: int, source: int, target: int, nbytes: int) -> None:
        _nbytes(nbytes, "nbytes")
        src = self._owned_allow(holder, source)
        dst = self._allow(target)
        if dst is src or dst.auth is not src.auth:
            raise InvalidArgument(f"allowance {src.id} cannot transfer to {dst.id}: same allowance or another authority")
        free = src.limit - src.reserved - src.mapped
        if nbytes > free and self._guards.on("allowance_bounds"):  # I4b
            raise AllowanceExceeded(f"allowance {src.id}: {nbytes} B to transfer, {free} B free")
        src.limit -= nbytes
        dst.limit += nbytes

    def close_allowance(self, holder: int, allowance: int) -> None:
        if _SWITCH.on or self._mailbox:
            self._checked(A.CloseAllowance(holder, allowance), self._scope_allow, allowance, self._close, holder, allowance)
            return
        with self._lock:
            self._close(holder, allowance)

    def _close(self, holder: int, allowance: int) -> None:
        w = self._owned_allow(holder, allowance)
        if w.mapped:
            raise InvalidTransition(f"allowance {w.id} maps {w.mapped} B; unmap it first")
        w.auth.promised -= w.limit
        del self._allows[w.id]
        del w.auth.allowances[w.id]

    def _allow(self, wid: object) -> _Allow:
        w = self._allows.get(wid) if type(wid) is int else None
        if w is None:
            if type(wid) is int and 0 < wid < self._next_allow:
                raise InvalidTransition(f"allowance {wid} was already closed")
            raise UnknownAllowance(f"allowance {wid!r} was never opened")
        return w

    def _owned_allow(self, holder: int, wid: object) -> _Allow:
        self._holder(holder)
        w = self._allow(wid)
        if w.holder != holder and self._guards.on("owner_only"):  # I6
            raise ForeignHolder(f"allowance {w.id} is held by holder {w.holder}, not {holder}")
        return w
