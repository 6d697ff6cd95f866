"""`ortmem replay TRACE`: the one replay engine, against `spec.manager`, never refimpl's code.

Every manager trace replays here, in the one revision `ortmem-manager/2` (a ledger-only
recording too: every event a ledger operation). Per line, in this
order (the first failure ends the replay and names the smallest bad prefix,
the 1-based line number):

  0. the manager's constants: the `configure` event (`invariants.manager_trace`)
     sets the aging bound the spec state is built with; a composed event
     with none before it fails the trace ("unconfigured");
  1. size and JSON (`invariants.replay`);
  2. envelope: exact keys, the revision `ortmem-manager/2` (any other: "unknown-revision"),
     a known kind, ids and payload keys exactly those of the kind, values
     well formed;
  3. sequence: per source 1, 2, 3, ... (a jump is a lost or reordered event,
     a repeat a duplicate); topology epoch (`invariants.replay_epochs`): the event carries the
     number of the spec's current topology version;
  4. ids are mapped to the spec's per kind (`invariants.replay_ids`: a
     governor may issue any fresh id); the action must be enabled exactly as
     the trace says (accepted with the same result, or rejected with an
     error whose precondition holds, `spec.manager.refusals`: the design
     orders no checks); an accepted event naming an id the spec never
     issued means the event that issued it was lost; other disagreements
     name the ID whose guard the spec applied, or "refinement";
  5. the governor's observed figures must equal the spec's: `used` for every
     authority the event lists, `charges` for every allocation, and the event
     must list every figure it touches (`invariants.manager_trace.touched`:
     every authority, allocation charge and bundle it names or changes, and
     every allocation it creates, refused or not); its
     observed `bundles` (part versions and poisoned flag) for every state
     bundle the event lists or the spec opens, poisons or advances (I5, I10).
     While every action is a ledger one, a wrong figure is first judged by the clause it
     breaks: the observed figures replace the spec's in the next state, and
     G4 (a refused event changes nothing), the observed-step predicates
     (`invariants.replay_predicates`), the ledger's step and state predicates
     must hold; if none fails, the figure fails as a refinement;
  5b. grants (`ortmem-manager/2`): rounds age without granting; each `grant`
     event steps `spec.grants.GrantTicket`; an event that takes the room of
     an owed grant fails, naming I13 (`invariants.replay_grants`);
  6. the cross-cutting step predicates (`invariants.manager.check_step`) on
     every accepted event (those the event can make fail:
     `invariants.step_frames`), and the state predicates (`check_all`)
     whenever at least as many events passed as the state holds records, and
     at the end.

The state is kept whole, with no bound on live records: its allocation and
allowance maps are `invariants.changed.Tracked`, so the step predicates find
the records an event changed in time proportional to that change, not to
everything live, and the replay is linear in the trace (issues #14, #21;
`benchmarks/bench_replay.py`). At the end, a granted ticket, a transaction
holding reservations, an open pressure, a pending limit change, a
provisional allocation, reserved allowance growth or an owed grant fails the
trace unless its last event is a `boundary`. Messages name ids in the trace's
numbering. Traces are untrusted: nothing is evaluated, only parsed and bounded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Any

import attrs

from invariants._violation import InvariantViolation
from invariants import ledger as LP
from invariants.changed import track
from invariants.manager import check_all, check_step
from invariants.manager_trace import (
    CONFIGURE,
    MANAGER_ID_FIELDS,
    MANAGER_KINDS,
    GRANT,
    LEDGER_ACTIONS,
    MANAGER_REVISION,
    REQUIRED_FIELDS,
    TUPLE_FIELDS,
    Configure,
    decode_bundles,
    decode_configure,
    decode_field,
    decode_result,
    topology_changed,
    touched,
)
from invariants.replay import (ReplayResult, _Bad, bind_result, bounded_lines, check_outcome, figures,
                               next_in_sequence, other_refusal, read_event, spec_action, spec_figures)
from invariants.replay_epochs import Epochs
from invariants.replay_grants import at_rest, never_granted, owed_after, unwritten_grants
from invariants.replay_ids import IdMap
from invariants.replay_predicates import check_observed_step
from invariants.trace_format import BOUNDARY, ENUMS, MAX_TEXT, OPTIONAL_FIELDS, Opaque
from spec import errors as E
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.grants import GrantTicket
from spec.manager import alternatives, refusals, step
from spec.manager_actions import LimitOutcome, Manager, initial
from spec.records import evolve
from spec.types import AllocState

__all__ = ["replay", "replay_manager_lines"]

_ENVELOPE = ("contract_revision", "topology_epoch", "source", "source_sequence", "kind", "ids", "payload")
_OUTCOME = ("outcome", "error", "result", "used", "charges", "bundles")
_UNKNOWN = (E.UnknownAuthority, E.UnknownHolder, E.UnknownAllocation, E.UnknownAllowance, E.UnknownTicket,
            E.UnknownTransaction)
_ERRORS = {name: getattr(E, name) for name in E.__all__ if name not in E.CATEGORIES}  # the refusals a trace names
_ENVELOPE_KEYS = frozenset(_ENVELOPE)


def _shape(cls: type) -> tuple[type, tuple[tuple[str, bool], ...], frozenset, frozenset, frozenset]:
    """A kind's action class, its fields (name, whether a plain scalar: neither a tuple nor an enum), exact id
    keys, and payload keys (all; without the optional ones)."""
    fields = tuple(f.name for f in attrs.fields(cls))
    payload = frozenset(f for f in fields if f not in MANAGER_ID_FIELDS) | frozenset(_OUTCOME)
    return (cls, tuple((f, f not in TUPLE_FIELDS and f not in ENUMS) for f in fields),
            frozenset(f for f in fields if f in MANAGER_ID_FIELDS), payload,
            payload - (OPTIONAL_FIELDS - REQUIRED_FIELDS))


_SHAPES = {kind: _shape(cls) for kind, cls in MANAGER_KINDS.items()}


def _unknown_revision(revision: Any) -> None:
    raise _Bad("unknown-revision", f"replay reads {MANAGER_REVISION!r} only, got {str(revision)[:MAX_TEXT]!r}")


def _decode(ev: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The action the event records (None for a boundary), and its outcome part."""
    if ev.keys() != _ENVELOPE_KEYS:
        if "contract_revision" in ev and ev["contract_revision"] != MANAGER_REVISION:  # another revision's envelope
            _unknown_revision(ev["contract_revision"])
        raise _Bad("malformed", f"envelope keys must be exactly {list(_ENVELOPE)}, got {sorted(ev)}")
    if ev["contract_revision"] != MANAGER_REVISION:
        _unknown_revision(ev["contract_revision"])
    epoch = ev["topology_epoch"]
    if type(epoch) is not int or epoch < 0:
        raise _Bad("malformed", f"topology_epoch must be an integer >= 0, got {str(epoch)[:MAX_TEXT]!r}")
    kind, ids, payload = ev["kind"], ev["ids"], ev["payload"]
    if type(kind) is not str or (kind not in MANAGER_KINDS and kind not in (BOUNDARY, CONFIGURE)):
        raise _Bad("malformed", f"unknown event kind {str(kind)[:MAX_TEXT]!r}")
    if type(ids) is not dict or type(payload) is not dict:
        raise _Bad("malformed", "ids and payload must be objects")
    if kind == BOUNDARY:
        if ids or payload:
            raise _Bad("malformed", "a boundary event carries no ids and no payload")
        return None, {}
    if kind == CONFIGURE:
        try:
            return decode_configure(ids, payload), {}
        except ValueError as e:
            raise _Bad("malformed", str(e)) from None
    cls, fields, want_ids, want_payload, want_required = _SHAPES[kind]
    if ids.keys() != want_ids:
        raise _Bad("malformed", f"{kind} ids must be exactly {sorted(want_ids)}, got {sorted(ids)}")
    if payload.keys() != want_payload and payload.keys() != want_required:
        raise _Bad("malformed", f"{kind} payload keys must be exactly {sorted(want_payload)}, got {sorted(payload)}"
                   + ("; a registration names its physical device (C1)" if "device" in want_payload - payload.keys()
                      else ""))
    if payload["outcome"] == "accepted" and any(payload[f] is None for f in REQUIRED_FIELDS & want_payload):
        raise _Bad("malformed", f"accepted {kind}: payload.device must name the physical device the authority's "
                                "bytes are on (C1: two books over one device are caught whatever their pools are called)")
    try:
        args = {}
        for f, scalar in fields:
            v = ids[f] if f in want_ids else payload.get(f)
            args[f] = v if scalar and (type(v) is int or v is None) else decode_field(f, v)  # decodes to itself
        result, bundles = payload["result"], payload["bundles"]
        result = result if result is None or type(result) is int else decode_result(result)
        bundles = {} if type(bundles) is dict and not bundles else decode_bundles(bundles)
    except ValueError as e:
        raise _Bad("malformed", str(e)) from None
    outcome = {"outcome": payload["outcome"], "error": payload["error"]}
    if outcome["outcome"] not in ("accepted", "rejected"):
        raise _Bad("malformed", f"payload.outcome must be 'accepted' or 'rejected', got {outcome['outcome']!r}")
    accepted = outcome["outcome"] == "accepted"
    if accepted and outcome["error"] is not None:
        raise _Bad("malformed", "an accepted event carries no error")
    if not accepted and (type(outcome["error"]) is not str or outcome["error"] not in _ERRORS):
        raise _Bad("malformed", f"a rejected event must name a spec error class, got {outcome['error']!r}")
    if not accepted and result is not None:
        raise _Bad("malformed", "a rejected event carries no result")
    if kind == GRANT and not accepted:
        raise _Bad("malformed", "a grant event records a grant the governor made: accepted")
    outcome["used"] = figures(payload["used"], "payload.used")
    outcome["charges"] = figures(payload["charges"], "payload.charges")
    outcome["result"], outcome["bundles"] = result, bundles
    return cls(**args), outcome


def _opaque_refusal(act: Any, err: BaseException, traced: str) -> bool:
    """True iff a field the trace could not carry (`Opaque`) makes the refusal's class unknowable: both are caller errors.

    A tuple field (`needs`, `victims`) holding something other than int pairs / ints is written opaque; the
    governor refused the exact value by what is inside it (UnknownAuthority, InvalidBytes, UnknownAllocation),
    which the opaque marker no longer says (issue #14: replay must not reject a correct trace)."""
    return (isinstance(err, E.CallerError) and issubclass(_ERRORS[traced], E.CallerError)
            and any(isinstance(getattr(act, f.name), Opaque) for f in attrs.fields(type(act))))


def _live(m: Manager) -> int:
    """Records `check_all` reads: it runs once per that many events, so its cost is O(1) amortised per event."""
    led = m.ledger
    return (len(led.allocations) + len(led.allowances) + len(led.authorities) + len(led.holders) + len(m.tickets)
            + len(m.pressures) + len(m.txs) + len(m.bundles))


#: Actions whose result is a new id, and its kind.
_ISSUES = {GrantTicket: "allocation", M.Submit: "ticket", M.Claim: "allocation", M.TryReserve: "allocation", M.Press: "pressure", M.PlanTx: "tx", M.ReserveTx: "allocation",
           M.OpenBundle: "bundle", M.PublishView: "view", A.RegisterAuthority: "authority", A.RegisterAlias: "authority",
           A.RegisterHolder: "holder", A.Reserve: "allocation", A.RecordCommitted: "allocation",
           A.OpenAllowance: "allowance"}


def manager_ids(cur: dict[str, Manager]) -> IdMap:
    """The id map of a composed replay over the manager `cur["m"]` (the latest state)."""
    def live(kind: str, i: int) -> bool:
        m = cur["m"]
        table = {"authority": m.ledger.authorities, "holder": m.ledger.holders, "allocation": m.ledger.allocations,
                 "allowance": m.ledger.allowances, "ticket": m.tickets, "pressure": m.pressures, "tx": m.txs,
                 "bundle": m.bundles, "view": m.views}[kind]
        return i in table
    return IdMap(live)


def _result(ids: IdMap, act: Any, observed: Any, result: Any, nxt: Manager) -> None:
    """The observed result names the spec's: a new id is bound, ids already issued must be the same objects."""
    kind = _ISSUES.get(type(act))
    if kind is not None and type(result) is int:
        alias_of = nxt.ledger.authorities[result].alias_of if isinstance(act, A.RegisterAlias) else None
        bind_result(ids, kind, observed, result, alias_of)
        return
    if isinstance(act, M.PrepareLimit) and type(observed) is tuple and type(result) is tuple:
        if len(observed) != len(result):  # the spec's new pressures have no trace ids yet: counted, not shown
            raise _Bad("refinement", f"{act!r} returned {len(observed)} pressure id(s), the spec opens "
                                     f"{len(result)} (one per holder it presses)")
        for o, r in zip(observed, result):
            bind_result(ids, "pressure", o, r)
        return
    # In the trace's numbering, for the message.
    shown, expected = observed, result
    if isinstance(act, M.CommitTx) and type(observed) is tuple:
        observed = tuple(ids.spec_id("allocation", x, False) for x in observed)
        if type(result) is tuple:
            expected = tuple(ids.observed_id("allocation", r) for r in result)
    elif isinstance(act, M.CommitLimit) and isinstance(observed, LimitOutcome):
        a = nxt.ledger.authorities.get(ids.spec_id("authority", act.authority, False))
        if observed.committed and a is not None and observed.limit < a.used:
            # C8: a successful lowering ends with used <= the new limit (D4: a limit stored below use).
            raise _Bad("violation", f"{act!r}: the governor committed limit {observed.limit} B with {a.used} B "
                                    "used: a lowered limit below use, with the old limit gone (C8)", "C8")
        observed = attrs.evolve(observed, completed=tuple((ids.spec_id("pressure", p, False), n)
                                                          for p, n in observed.completed))
        if isinstance(result, LimitOutcome):
            expected = attrs.evolve(result, completed=tuple((ids.observed_id("pressure", p), n)
                                                            for p, n in result.completed))
    if observed != result:
        raise _Bad("refinement", f"{act!r} returned {shown!r}, the spec returns {expected!r}")


def _apply(m: Manager, ids: IdMap, act: Any, outcome: dict[str, Any], ledger_only: bool) -> Manager:
    """Rounds age but grant nobody: every grant is its own event (`invariants.replay_grants`). So an event alone
    moved every charge its step moved, and must observe each. `ledger_only`: every action so far is a ledger one."""
    accepted = outcome["outcome"] == "accepted"
    sact = spec_action(ids, act, accepted)
    try:
        nxt, result = step(m, sact, eager=False)
        err = None
    except E.GovernorError as e:
        nxt, result, err = m, None, e
        if accepted:  # an outcome the design allows where the reference refuses (D8)
            for nxt, result in alternatives(m, sact):
                err = None
                break
    excused = err is not None and not accepted and (_opaque_refusal(sact, err, outcome["error"])
                                                    or other_refusal(refusals, m, sact, err, outcome))
    if err is not None or not accepted:  # (accepted and allowed by the spec: nothing to compare)
        check_outcome(ids, act, err, outcome, _UNKNOWN, excused=excused, legal=lambda: refusals(m, sact))
    if accepted:
        _result(ids, act, outcome["result"], result, nxt)
    used = spec_figures(ids, "authority", outcome["used"]) if outcome["used"] else {}
    charges = spec_figures(ids, "allocation", outcome["charges"]) if outcome["charges"] else {}
    bundles = spec_figures(ids, "bundle", outcome["bundles"]) if outcome["bundles"] else {}
    auths, before, allocs = nxt.ledger.authorities, m.ledger.authorities, nxt.ledger.allocations
    wrong = False
    for aid, u in used.items():
        if aid not in auths:
            raise _Bad("unknown-id", f"observed used of authority {ids.observed_id('authority', aid)}, "
                                     "which does not exist")
        wrong = wrong or auths[aid].used != u
    if wrong or any(rid not in allocs or allocs[rid].charge != c for rid, c in charges.items()):
        _observed_wrong(m, ids, act, sact, nxt, used, charges, err is not None, ledger_only)
    touches = touched(m, sact, nxt)
    _used_observed(ids, act, m, nxt, touches[0], used)
    _charges_observed(ids, act, m, nxt, touches[1], charges)
    if bundles or nxt.bundles is not m.bundles:
        _check_bundles(ids, act, sact, m, nxt, bundles)
    _bundles_named(ids, act, touches[2], bundles)
    if accepted:
        try:
            check_step(m, sact, nxt, result)
        except InvariantViolation as e:
            raise _Bad("violation", ids.observed_text(str(e), act, sact), e.id) from None
    return nxt


def _used_observed(ids: IdMap, act: Any, m: Manager, nxt: Manager, auths: set[int], used: dict[int, int]) -> None:
    """The event observes `used` of every authority it touches (`invariants.manager_trace.touched`; issue #21), named
    or moved, accepted or refused."""
    before, after = m.ledger.authorities, nxt.ledger.authorities
    missing = sorted((before[a].used == after[a].used, a) for a in auths if a not in used)
    if missing and not missing[0][0]:
        raise _Bad("refinement", f"{act!r} changed used of authority {ids.observed_id('authority', missing[0][1])} "
                                 "but the event does not say so")
    if missing:
        raise _Bad("refinement", f"{act!r} names authority {ids.observed_id('authority', missing[0][1])} but the "
                                 "event does not observe its used")


def _charges_observed(ids: IdMap, act: Any, m: Manager, nxt: Manager, allocs: set[int],
                      charges: dict[int, int]) -> None:
    """The event observes the charge of every allocation it touches (`invariants.manager_trace.touched`; issue #21):
    the one it names, moved or not, and every one it created or charged; a new one by the id its result bound."""
    before, after = m.ledger.allocations, nxt.ledger.allocations
    missing = sorted((r in before and before[r].charge == after[r].charge, r) for r in allocs if r not in charges)
    if missing and not missing[0][0]:
        raise _Bad("refinement", f"{act!r} charged allocation {ids.observed_id('allocation', missing[0][1])} but the "
                                 "event does not say so")
    if missing:
        raise _Bad("refinement", f"{act!r} names allocation {ids.observed_id('allocation', missing[0][1])} but the "
                                 "event does not observe its charge")


def _bundles_named(ids: IdMap, act: Any, named: set[int], bundles: dict[int, Any]) -> None:
    """The event observes the bundles it names (`touched`), moved or not; a moved one left out failed already
    (`_check_bundles`), with its own message."""
    missing = sorted(b for b in named if b not in bundles)
    if missing:
        raise _Bad("refinement", f"{act!r} names bundle {ids.observed_id('bundle', missing[0])} but the event "
                                 "does not observe it")


def _observed_wrong(m: Manager, ids: IdMap, act: Any, sact: Any, nxt: Manager, used: dict[int, int],
                    charges: dict[int, int], rejected: bool, ledger_only: bool) -> None:
    """An observed figure (`used`, `charges`: spec ids) differs from the spec's: fail as a refinement naming the
    figure, or first, in a ledger-only trace, naming the clause the observed state breaks (`_judge_observed`)."""
    led = nxt.ledger
    if ledger_only:
        _judge_observed(m, ids, act, sact, led, used, charges, rejected)
    for aid, u in used.items():
        if led.authorities[aid].used != u:
            raise _Bad("refinement", f"{act!r}: the governor observed {u} B used on authority "
                                     f"{ids.observed_id('authority', aid)}, the spec has {led.authorities[aid].used} B"
                                     + unwritten_grants(nxt, aid, u, ids))
    for rid, charge in charges.items():
        if rid not in led.allocations or led.allocations[rid].charge != charge:
            raise _Bad("refinement", f"{act!r}: the governor observed a charge of {charge} B on allocation "
                                     f"{ids.observed_id('allocation', rid)}, the spec has "
                                     f"{led.allocations[rid].charge if rid in led.allocations else 'no such allocation'}")


def _judge_observed(m: Manager, ids: IdMap, act: Any, sact: Any, led: Any, used: dict[int, int],
                    charges: dict[int, int], rejected: bool) -> None:
    """The spec's next ledger `led` with the observed figures in place of its own must satisfy G4 (a refused event
    changes nothing), the observed-step predicates, the ledger's step predicates and its state predicates: the
    ledger-only governor's figures are judged by the clause they break (every figure a step moves is observed:
    `touched`); composed traces are judged by comparison alone. Cold path: the replay ends here (O(n) once)."""
    auths, allocs = led.authorities, led.allocations
    for aid, u in used.items():
        if auths[aid].used != u:
            auths = auths.set(aid, evolve(auths[aid], used=u))
    for rid, c in charges.items():
        if rid in allocs and allocs[rid].charge != c:
            allocs = allocs.set(rid, evolve(allocs[rid], charge=c))
    seen = evolve(led, authorities=auths, allocations=allocs)
    if rejected:
        raise _Bad("violation", f"G4: {act!r} was rejected but the governor observed a change", "G4")
    try:
        check_observed_step(m.ledger, sact, seen)
        LP.check_step(m.ledger, sact, seen)
        for p in (*LP.LOCAL_STATE_PREDICATES, LP.state_I1, LP.state_I2):
            p(seen)
    except InvariantViolation as e:
        raise _Bad("violation", ids.observed_text(str(e), act, sact), e.id) from None


def _check_bundles(ids: IdMap, act: Any, sact: Any, m: Manager, nxt: Manager, observed: dict[int, Any]) -> None:
    """The governor's bundle records the event lists (`observed`, in spec ids) equal the spec's, and it lists every
    bundle the spec changed. `sact`: `act` in spec ids."""
    for bid, (versions, poisoned) in observed.items():
        b = nxt.bundles[bid]  # bound to a bundle the spec opened (`IdMap.figures`), and the spec deletes none
        if (b.versions, b.poisoned) != (versions, poisoned):
            raise _Bad("refinement", f"{act!r}: the governor observed bundle {ids.observed_id('bundle', bid)} at "
                                     f"versions {list(versions)}{' (poisoned)' if poisoned else ''}, the spec has "
                                     f"{list(b.versions)}{' (poisoned)' if b.poisoned else ''}")
    if nxt.bundles is not m.bundles:
        # What an action can change: the bundle it names, its transaction's, the ones it opens (O(1) per event).
        tx = m.txs.get(getattr(sact, "tx", None))
        maybe = {getattr(sact, "bundle", None), tx.bundle if tx is not None else None,
                 *range(m.next_bundle, nxt.next_bundle)}
        for bid in sorted(b for b in maybe if type(b) is int):
            if m.bundles.get(bid) != nxt.bundles.get(bid) and bid not in observed:
                raise _Bad("refinement", f"{act!r} changed bundle {ids.observed_id('bundle', bid)} but the event "
                                         "does not say so")


def _check_whole(m: Manager, ids: IdMap) -> None:
    try:
        check_all(m)
    except InvariantViolation as e:
        raise _Bad("violation", ids.observed_text(str(e)), e.id) from None


def _leftover(m: Manager, ids: IdMap) -> list[str]:
    """The items still active at the end of a trace, named in the trace's numbering."""
    o = ids.observed_id
    out = [f"ticket {o('ticket', t.id)} granted and never claimed or cancelled" for t in m.tickets.values()
           if t.allocation is not None]
    out += [f"transaction {o('tx', t.id)} still holds {len(t.held)} reservation(s)" for t in m.txs.values() if t.held]
    out += [f"pressure {o('pressure', p.id)} still open" for p in m.pressures.values()]
    out += [f"limit change on authority {o('authority', a)} still pending" for a in m.changes]
    out += [f"allocation {o('allocation', r.id)} still provisional" for r in m.ledger.allocations.values()
            if r.state is AllocState.PROVISIONAL]
    out += [f"allowance {o('allowance', w.id)} still reserves {w.reserved} B of growth"
            for w in m.ledger.allowances.values() if w.reserved]
    return out


def _tracked(m: Manager) -> Manager:
    """`m` with its allocation, allowance and bundle maps tracked: a step's changed records are found in O(change)."""
    return evolve(m, bundles=track(m.bundles), ledger=evolve(m.ledger, allocations=track(m.ledger.allocations),
                                                             allowances=track(m.ledger.allowances)))


def replay_manager_lines(lines: Iterable[bytes]) -> ReplayResult:
    """Replay raw lines of a composed trace; see the module docstring."""
    m, last, events, line, at_boundary, since_whole = _tracked(initial()), {}, 0, 0, False, 0
    cur = {"m": m}
    ids = manager_ids(cur)
    configured = False  # the `configure` event seen: `m.aging_bound` is the trace's
    owed = {}  # grants owed (`invariants.replay_grants`)
    ledger_only = True  # every action so far a ledger one
    epochs = Epochs()
    try:
        for raw in lines:
            line += 1
            ev = read_event(raw)
            act, outcome = _decode(ev)
            next_in_sequence(ev, last)
            epochs.check(ev["topology_epoch"], line)
            at_boundary = act is None
            if type(act) is Configure:
                if configured:
                    raise _Bad("malformed", "a second configure event: a composed trace names its constants once")
                # Before it only ledger events passed (a composed one fails below): no ticket has aged yet.
                m, configured = evolve(m, aging_bound=act.aging_bound), True
                cur["m"] = m
                events += 1
                continue
            if act is not None:
                if type(act) not in LEDGER_ACTIONS and not configured:
                    raise _Bad("unconfigured", f"{act!r} comes before any configure event: the trace does not say "
                                               "the manager's aging bound, so the spec cannot arbitrate it")
                ledger_only = ledger_only and type(act) in LEDGER_ACTIONS
                was, m = m, _apply(m, ids, act, outcome, ledger_only)
                cur["m"] = m
                if m is not was:
                    owed = owed_after(act, was, owed, m, ids)
                    if topology_changed(was, m):
                        epochs.changed(ev["kind"], line)
            since_whole += 1
            # Amortised: O(1) per event (the allocations alone bound `_live` from below: most events stop there).
            if since_whole >= len(m.ledger.allocations) and since_whole >= max(1, _live(m)):
                _check_whole(at_rest(m, owed) if owed else m, ids)
                since_whole = 0
            events += 1
        line = 0
        _check_whole(at_rest(m, owed) if owed else m, ids)
        left = never_granted(owed, ids) + _leftover(m, ids)
        if not at_boundary and left:
            raise _Bad("leftover", "trace ended with active items and no declared boundary: " + "; ".join(left[:5]))
    except _Bad as bad:
        return ReplayResult(False, events, line or None, bad.failure, bad.id, str(bad))
    return ReplayResult(True, events, None, None, None, "no violation")


def replay(stream: IO[bytes]) -> ReplayResult:
    """Replay a binary stream of JSONL events, reading at most one bounded line at a time."""
    return replay_manager_lines(bounded_lines(stream))
