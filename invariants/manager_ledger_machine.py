"""The ledger campaign: the composed machine restricted to the ledger (C1 C2 I1 I2 I4a I4b I6).

A focused campaign is a restriction of the one composed model, never a second model (issue #21): the
`LedgerMachine` is `invariants.manager_machine.ManagerMachine` with only its ledger rules (`LEDGER_RULES`:
reservations and their settlement, leases given back or grown, aliases, recorded commits, quarantine, allowances,
device loss, holders leaving), the same `spec.manager.step`, refinement and predicates (`invariants.manager`, and
the observed grant's charge of `invariants.replay_predicates`, as replay judges a trace), plus five steered rules
for ledger situations the whole machine does not draw: `observe` (an authority's figures, `snapshot`, equal the
spec's reading and an independent one: C8, I2), `register` (a pool registered again with its own or another tier
or capacity, a new pool, an alias of any authority: C1), `handoff` (a reservation committed by a holder other
than the one that reserved it: I4a, I6), `settle` (a reservation or recorded commit of any tier,
committed past, at or below its size, by its holder or another, or any allocation ever issued settled again,
retired or not: C2, I1, I4a, I6) and `allowance_any` (allowances left open, any one ever opened used past its room
or by another holder: I4b, I6).

Reads spec values only; never imports refimpl.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from invariants._violation import RefinementViolation
from invariants.clauses import recording
from invariants.ledger import observe_snapshot
from invariants.manager_machine import AUTHORITIES, ManagerMachine, restrict
from spec import ledger_actions as A
from spec.ledger_state import snapshot
from spec.types import Role, Tier

__all__ = ["LEDGER_RULES", "LedgerMachine"]

#: The composed machine's rules this restriction keeps (with its own steered `observe`, `register`, `handoff`,
#: `settle`, `allowance_any`).
LEDGER_RULES = ("direct_reserve", "release_lease", "grow_lease", "alias_record_quarantine", "allowance",
                "environment", "unregister", "observe", "register", "handoff", "settle", "allowance_any")


class LedgerMachine(ManagerMachine):
    """The composed machine on its ledger rules. Subclass and set `adapter_factory` (see `ManagerMachine`)."""

    @rule(data=st.data())
    def observe(self, data: st.DataObject) -> None:
        """An authority's figures (an oversubscribed one, when there is one, every other time; with none, now and
        then bytes recorded past a limit first) must equal the spec's reading and an independent one (C8, I2)."""
        over = sorted(a.id for a in self.abs.ledger.authorities.values() if a.used > a.limit)
        live, holders = self._active(), self._holders()
        if not over and live and holders and data.draw(st.integers(0, 3)) == 0:  # none: record bytes past a limit
            a = self.abs.ledger.authorities[data.draw(st.sampled_from(live))]
            self._do(A.RecordCommitted(data.draw(st.sampled_from(holders)), a.id, a.tier, a.limit - a.used + 1,
                                       Role.KV))
            over = sorted(a.id for a in self.abs.ledger.authorities.values() if a.used > a.limit)
        aid = data.draw(st.sampled_from(over)) if over and data.draw(st.booleans()) else self._authority(data)
        if not hasattr(self.gov, "snapshot") or aid not in self.abs.ledger.authorities:
            return
        got = self.gov.snapshot(aid)
        if self.check_refinement and got != (want := snapshot(self.abs.ledger, aid)):
            raise RefinementViolation(f"snapshot({aid}): {got!r} vs spec {want!r}")
        self._count("observations")
        with recording(self.coverage):
            observe_snapshot(self.abs.ledger, aid, got)

    @rule(data=st.data())
    def register(self, data: st.DataObject) -> None:
        """A pool registered again (its own authority back, or refused with another tier or capacity), a new pool,
        or an alias of any authority, an alias included (it must resolve to the canonical ledger)."""
        if len(self.abs.ledger.authorities) >= 8:
            return
        if data.draw(st.integers(0, 3)) == 0:  # of any authority registered, or mostly an active one
            known = sorted(self.abs.ledger.authorities)
            of = data.draw(st.sampled_from(known)) if known and data.draw(st.booleans()) else self._authority(data)
            self._do(A.RegisterAlias(of, data.draw(st.sampled_from(("uma", "mapped", "")))))
            return
        pool, tier, capacity = data.draw(st.sampled_from(AUTHORITIES + (("gpu2", Tier.DEVICE, 8),)))
        if data.draw(st.integers(0, 2)) == 0:
            tier = data.draw(st.sampled_from(tuple(Tier)))
        if data.draw(st.integers(0, 2)) == 0:
            capacity = data.draw(st.sampled_from((capacity + 4, capacity - 4, 0, True)))
        self._do(A.RegisterAuthority(pool, tier, capacity))

    @rule(data=st.data())
    def handoff(self, data: st.DataObject) -> None:
        """A producer reserves and another holder commits the reservation (a consumer taking over a buffer): the
        commit is refused and the lease stays the producer's (I4a, I6). `settle` commits as another holder too,
        but rarely on a reservation still open."""
        holders, live = self._holders(), self._active()
        if len(holders) < 2 or not live:
            return
        producer, consumer = data.draw(st.lists(st.sampled_from(holders), min_size=2, max_size=2, unique=True))
        aid, rid = data.draw(st.sampled_from(live)), self.abs.ledger.next_allocation
        self._do(A.Reserve(producer, aid, self.abs.ledger.authorities[aid].tier, 1, Role.KV))
        if rid in self.abs.ledger.allocations:
            self._do(A.Commit(consumer, rid, 1))

    @rule(data=st.data())
    def settle(self, data: st.DataObject) -> None:
        """A reservation or recorded commit (now and then of a tier its authority does not have), then that or any
        allocation ever issued settled by its holder or another: committed past, at or below its reservation,
        cancelled, released."""
        led = self.abs.ledger
        if data.draw(st.booleans()):
            # Any authority registered (a lost one, an alias), or mostly an active one (none left: removed, C3).
            any_one = led.authorities and data.draw(st.booleans())
            aid = data.draw(st.sampled_from(sorted(led.authorities))) if any_one else self._authority(data)
            a = led.authorities.get(aid)
            tier = a.tier if a is not None and data.draw(st.integers(0, 3)) else data.draw(st.sampled_from(tuple(Tier)))
            grant = data.draw(st.sampled_from((A.Reserve, A.Reserve, A.RecordCommitted)))  # recorded: past the limit
            self._do(grant(self._holder(data), aid, tier, self._nbytes(data, 10), data.draw(st.sampled_from(Role))))
        nid = self.abs.ledger.next_allocation
        rid = data.draw(st.just(nid - 1) if data.draw(st.booleans()) else st.integers(0, nid))  # the newest, or any
        r = self.abs.ledger.allocations.get(rid)
        holder = self._owner(data, r.holder) if r is not None else self._holder(data)
        op = data.draw(st.sampled_from(("commit", "commit", "cancel", "release")))
        if op == "commit":
            size = r.reserved if r is not None else 1
            self._do(A.Commit(holder, rid, data.draw(st.sampled_from((size, size - 1, size + 1)))))
        else:
            self._do((A.Cancel if op == "cancel" else A.Release)(holder, rid))
    settle_weight_2 = settle  # a second name: drawn twice as often (Hypothesis picks among rules uniformly)

    @rule(data=st.data(), op=st.sampled_from(("open", "grow", "grow", "map", "unmap", "transfer", "close")))
    def allowance_any(self, data: st.DataObject, op: str) -> None:
        """Allowances left open (their limits summing up to the pool's capacity and past it), and any allowance
        ever opened, used by its holder or another: growth, map, unmap within its room or past it, a transfer of
        its limit to another, a close."""
        led = self.abs.ledger
        if op == "open":
            self._do(A.OpenAllowance(self._holder(data), self._authority(data), self._nbytes(data, 12)))
            return
        wid = self._pick(data, led.allowances.keys(), led.next_allowance)
        w = led.allowances.get(wid)
        holder = w.holder if w is not None and data.draw(st.integers(0, 3)) else self._holder(data)  # or any holder
        if op == "close":
            self._do(A.CloseAllowance(holder, wid))
        elif op == "transfer":
            to = self._pick(data, led.allowances.keys(), led.next_allowance)
            free = w.limit - w.reserved - w.mapped if w is not None else 1
            self._do(A.TransferAllowance(holder, wid, to, max(1, free - data.draw(st.integers(0, 1)))))
        else:
            room = 1 if w is None else {"grow": w.limit - w.reserved - w.mapped, "map": w.reserved,
                                        "unmap": w.mapped}[op]
            nbytes = max(1, room + data.draw(st.sampled_from((0, 0, 0, 1))))
            self._do({"grow": A.ReserveGrowth, "map": A.MapAllowance, "unmap": A.UnmapAllowance}[op](holder, wid,
                                                                                                    nbytes))


restrict(LedgerMachine, LEDGER_RULES)  # every composed rule outside `LEDGER_RULES` is switched off
