"""Replay of the focused transaction front end's events against its own spec, never refimpl's code.

A trace of `ProcessMemoryManager` driven through its focused transactions
(`ortmem-tx/1`) is replayed with `spec.transactions.step` (format:
`invariants.focused_trace`). `invariants.manager_replay` reads the events
before the first focused one (registration) against `spec.manager` and hands
its state over here, which seeds `spec.transactions`' state with the
manager's authorities (canonical, active, nothing charged: no alias,
allocation or allowance) and its state bundles, the id counters the composed
events left.

From then on every event must be of that revision (a later `register_holder`
is allowed: it adds a holder; in a transaction trace so are the composed
events of `TX_COMPOSED`, registering an authority, device loss and bundles,
replayed as the focused model's action); any other event fails the trace as
"mixed-protocols": no one spec describes a ledger driven through two front
ends. Per event, as for composed traces: exact envelope and fields, the
sequence, the outcome (accepted with the same result, or rejected with the
same error class), the observed figures (`used` of every canonical
authority, exactly the spec's authorities), the focused step predicates on every accepted
event and the state predicates amortised (O(1) per event) and at the end.
An event whose refusal rests on a manager argument the focused spec has no
field for (a `tx_plan` holder that is not registered, an ill-typed tier)
must be a caller error and is not stepped. At the end, a transaction
neither committed nor retired fails the trace ("leftover")
unless its last event is a boundary.
"""

from __future__ import annotations

from typing import Any

import attrs
import immutables

from invariants._violation import InvariantViolation
from invariants.focused_trace import FOCUSED, TX_COMPOSED, TX_REVISION, decode_args, id_and_payload_names
from invariants.replay import _Bad, check_outcome
from invariants.trace_format import Opaque
from spec import errors as E
from spec import transactions_actions as T
from spec.transactions_lifecycle import BundleState, TxPhase
from spec.transactions_state import Bundle, TxAuthority, TxState
from spec.types import ContextState, Tier

__all__ = ["Focused", "start_focused", "decode_focused"]

_OUTCOME = ("outcome", "error", "result", "observed")
_ERRORS = {name: getattr(E, name) for name in E.__all__}


def decode_focused(ev: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(the focused spec action, its extra manager arguments, the outcome part) of a focused event."""
    revision, kind, ids, payload = ev["contract_revision"], ev["kind"], ev["ids"], ev["payload"]
    if type(kind) is not str or kind not in FOCUSED[revision]:
        raise _Bad("malformed", f"unknown {revision} event kind {str(kind)[:80]!r}")
    if type(ids) is not dict or type(payload) is not dict:
        raise _Bad("malformed", "ids and payload must be objects")
    id_names, payload_names = id_and_payload_names(revision, kind)
    if set(ids) != set(id_names):
        raise _Bad("malformed", f"{kind} ids must be exactly {sorted(id_names)}, got {sorted(ids)}")
    if set(payload) != {*payload_names, *_OUTCOME}:
        raise _Bad("malformed", f"{kind} payload keys must be exactly {sorted({*payload_names, *_OUTCOME})}, "
                                f"got {sorted(payload)}")
    try:
        act, extra = decode_args(revision, kind, ids, payload)
    except (ValueError, TypeError) as e:
        raise _Bad("malformed", str(e)) from None
    out = {k: payload[k] for k in _OUTCOME}
    if out["outcome"] not in ("accepted", "rejected"):
        raise _Bad("malformed", f"payload.outcome must be 'accepted' or 'rejected', got {out['outcome']!r}")
    accepted = out["outcome"] == "accepted"
    if accepted and out["error"] is not None:
        raise _Bad("malformed", "an accepted event carries no error")
    if not accepted and (type(out["error"]) is not str or out["error"] not in _ERRORS):
        raise _Bad("malformed", f"a rejected event must name a spec error class, got {out['error']!r}")
    if out["result"] is not None and (type(out["result"]) is not int or not accepted):
        raise _Bad("malformed", "payload.result must be an integer or null (null when rejected)")
    return act, extra, out


def _caller_refusal(act: Any, out: dict[str, Any], why: str) -> None:
    """An event the focused spec cannot judge (`why`): it must be a refusal by a caller error."""
    if out["outcome"] != "rejected" or not issubclass(_ERRORS[out["error"]], E.CallerError):
        raise _Bad("refinement", f"{act!r}: {why}, so the governor must refuse it as a caller error; the trace "
                                 f"says {out['outcome']}{' ' + out['error'] if out['error'] else ''}")


class Focused:
    """The focused state of one trace and how each further event is replayed against it."""

    def __init__(self, revision: str, state: Any, holders: set[int], authority: int | None) -> None:
        self.revision, self.state, self.holders, self.authority = revision, state, holders, authority
        self.since_whole = 0

    # --- one event -------------------------------------------------------------------

    def apply(self, decoded: tuple[Any, dict[str, Any], dict[str, Any]]) -> None:
        """Replay one event, decoded by `decode_focused` (its sequence number already checked)."""
        act, extra, out = decoded
        self._apply_tx(act, extra, out)
        self.since_whole += 1
        if self.since_whole >= max(1, self.live()):
            self.check_whole()
            self.since_whole = 0

    def add_holder(self, hid: Any) -> None:
        """A `register_holder` after the focused events began: one more holder."""
        if type(hid) is not int or hid in self.holders:
            raise _Bad("malformed", f"register_holder issued holder {hid!r} twice or not as an id")
        self.holders.add(hid)

    def apply_composed(self, kind: str, act: Any, out: dict[str, Any]) -> None:
        """A composed event in a transaction trace (`TX_COMPOSED`), replayed as the focused model's action.

        Checked as a focused event: the outcome and result, the observed `used` of every authority the event
        lists (and it lists every one whose `used` the spec changed), its observed bundles, the step
        predicates."""
        from invariants.transactions import check_step
        from spec import transactions as ST

        if kind == "register_authority":
            if not isinstance(act.tier, Tier) or act.device is not None:
                _caller_refusal(act, out, "the transaction model registers plain pools (a Tier, no device)")
                return
            tx_act: Any = T.AddAuthority(act.pool, act.capacity)
        else:
            tx_act = TX_COMPOSED[kind](*attrs.astuple(act, recurse=False))
        before = self.state
        nxt, err = self._step(ST, tx_act, out, (E.UnknownView, E.UnknownBundle, E.UnknownAuthority))
        auths = nxt.authorities
        for aid, u in out["used"].items():
            if aid not in auths or auths[aid].used != u:
                raise _Bad("refinement", f"{act!r}: the governor observed {u} B used on authority {aid}, the spec "
                                         f"has {auths[aid].used if aid in auths else 'no such authority'}")
        changed = [a for a in auths if a in before.authorities and auths[a].used != before.authorities[a].used]
        if any(a not in out["used"] for a in changed):
            raise _Bad("refinement", f"{act!r} changed used of authority {changed[0]} but the event does not say so")
        for bid, (versions, poisoned) in out["bundles"].items():
            b = nxt.bundles.get(bid)
            if b is None or (b.versions, b.state is BundleState.POISONED) != (versions, poisoned):
                raise _Bad("refinement", f"{act!r}: the governor observed bundle {bid} at {list(versions)}"
                                         f"{' (poisoned)' if poisoned else ''}, the spec has {b!r}")
        if err is None:
            try:
                check_step(before, tx_act, nxt)
            except InvariantViolation as e:
                raise _Bad("violation", str(e), e.id) from None
        self.state = nxt

    def _step(self, mod: Any, act: Any, out: dict[str, Any], unknown: tuple[type, ...]) -> tuple[Any, Any]:
        try:
            nxt, result = mod.step(self.state, act)
            err = None
        except E.GovernorError as e:
            nxt, result, err = self.state, None, e
        check_outcome(act, err, out, unknown)
        if out["outcome"] == "accepted" and out["result"] != result:
            raise _Bad("refinement", f"{act!r} returned {out['result']!r}, the spec returns {result!r}")
        return nxt, err

    def _apply_tx(self, act: Any, extra: dict[str, Any], out: dict[str, Any]) -> None:
        from invariants.transactions import check_step
        from spec import transactions as ST

        if "holder" in extra and extra["holder"] not in self.holders:
            _caller_refusal(act, out, f"its holder {extra['holder']!r} is not registered")
            return
        if "tier" in extra and (isinstance(extra["tier"], Opaque) or not isinstance(extra["tier"], Tier)):
            _caller_refusal(act, out, f"its tier {extra['tier']!r} is not a Tier")
            return
        nxt, err = self._step(ST, act, out, (E.UnknownTransaction, E.UnknownView, E.UnknownBundle,
                                             E.UnknownIntent, E.UnknownAuthority))
        obs = out["observed"]
        used = obs.get("used") if type(obs) is dict and set(obs) == {"used"} else None
        if type(used) is not dict:
            raise _Bad("malformed", "a transaction event observes exactly {used}")
        try:
            seen = {int(k): v for k, v in used.items()}
        except ValueError:
            raise _Bad("malformed", "observed.used keys must be integer authority ids") from None
        want = {a.id: a.used for a in nxt.authorities.values()}
        if seen != want:
            diff = sorted(set(seen.items()) ^ set(want.items()))[:3]
            raise _Bad("refinement", f"{act!r}: the governor observed used {seen}, the spec has {want} "
                                     f"(first differences {diff})")
        if err is None:
            try:
                check_step(self.state, act, nxt)
            except InvariantViolation as e:
                raise _Bad("violation", str(e), e.id) from None
        self.state = nxt

    # --- the whole state, and the end ------------------------------------------------

    def live(self) -> int:
        s = self.state
        if s is None:
            return 0
        return len(s.txs) + len(s.views) + len(s.intents)

    def check_whole(self) -> None:
        if self.state is None:
            return
        from invariants.transactions import check_all
        try:
            check_all(self.state)
        except InvariantViolation as e:
            raise _Bad("violation", str(e), e.id) from None

    def leftover(self) -> list[str]:
        s = self.state
        if s is None:
            return []
        return [f"transaction {t.id} still {t.phase.value}" for t in s.txs.values() if t.phase is not TxPhase.COMMITTED]


def start_focused(revision: str, ev: dict[str, Any], m: Any) -> Focused:
    """The focused state seeded from the composed state `m` the events so far built (see the module docstring)."""
    if revision not in FOCUSED:
        raise _Bad("unknown-revision", f"not a focused revision: {revision!r}")
    holders = set(m.ledger.holders)
    if m.tickets or m.pressures or m.txs or m.changes or (m.bundles and revision != TX_REVISION):
        raise _Bad("mixed-protocols", f"the first {revision} event comes after composed tickets, pressure, "
                                      "transactions, bundles or limit changes: no one spec describes both")
    return Focused(revision, _tx_start(m), holders, None)


def _tx_start(m: Any) -> TxState:
    """`spec.transactions`' state of the authorities and bundles the composed events before it left."""
    auths = {}
    for a in m.ledger.authorities.values():
        if (a.alias_of is not None or a.used or a.limit != a.capacity or a.context is not ContextState.ACTIVE
                or a.device is not None):
            raise _Bad("mixed-protocols", f"authority {a.id} is an alias, charged, limited, lost or placed on a "
                                          "device before the first transaction event: the transaction model "
                                          "starts from plain, empty pools")
        auths[a.id] = TxAuthority(a.id, a.pool, a.capacity, 0, 0, ContextState.ACTIVE)
    if m.ledger.allocations or m.ledger.allowances:
        raise _Bad("mixed-protocols", "allocations or allowances before the first transaction event")
    bundles = {b.id: Bundle(b.id, b.versions, BundleState.POISONED if b.poisoned else BundleState.ACTIVE)
               for b in m.bundles.values()}
    return TxState(authorities=immutables.Map(auths), bundles=immutables.Map(bundles),
                   next_authority=m.ledger.next_authority, next_bundle=m.next_bundle)
