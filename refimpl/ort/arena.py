# ArenaHolder: the process's ORT environment arena, sized from a grant
# (ORT-NOTES 2.2-2.3). The holder leases `grant` bytes from the
# ProcessMemoryManager (reserve + commit, before any session allocates: I2),
# then registers ONE env allocator `OrtArenaCfg({"max_mem": grant,
# "arena_extend_strategy": 1})`; sessions it makes opt in with
# `session.use_env_allocators=1` [ort:env-arena-cap]. ORT enforces `max_mem`
# on the Runs of every opted-in session, so lease == grant == cap: a Run that
# needs more than the arena can still hand out under the cap fails with ORT's
# own error, per run and recoverably [ort:env-arena-cap].
#
# ONE env arena per process, by design. The Python binding cannot unregister
# an env arena [ort:py-no-unregister], and registering again raises nothing
# but replaces the env arena only for sessions created afterwards: earlier
# sessions keep the one they took, at its old cap [ort:env-arena-reregister].
# A second registration would so leave two arenas under one lease. So a
# holder's grant must be the cap actually in force: the
# first ArenaHolder of the process registers the arena at its grant; a later
# one (another runtime's manager in the same process) shares it only at that
# same cap, and a holder granted any other amount is refused with a typed
# error naming both (InvalidTransition), leasing nothing. A second holder on
# the same manager is refused too (it would charge the one arena twice). The
# lease is never released while the process lives (the cap outlives the
# holder; ORT does not say when the last session using it is gone
# [ort:no-last-user]). Tests isolate the first registration in a subprocess.
#
# Pressure (C5) arrives as a pressure ticket of the one manager on this
# holder's leases (`pmm.press`, issue #10) and is answered only at a Run
# boundary: the callback records it; the next
# Run that starts afterwards carries `memory.enable_memory_arena_shrinkage`,
# which returns the arena's free regions when that Run ends [ort:arena-shrink],
# and only then does the holder answer. Its lease is the cap ORT enforces on
# the sessions that took the arena, which no call lowers for them
# [ort:env-arena-reregister], so the charge credited is zero (legal; the
# requester fails or defers); what shrinkage returns to the OS is reported
# separately as residency with its source (I8b).
#
# The lease is pinned for the process's life: that is this holder's own
# business; it never names the lease in an answer, and its `answer` refuses
# to (PinnedVictim) before the manager is asked.
#
# Lending (issue #11, C1/I8): a governed runtime leases the arena ONCE, in
# its host pool (the authority every other holder uses), and each managed
# model's measured transient peak is lent within that lease as an allowance
# of this holder (`lend`: open, reserve growth, map; no charge moves, I4b),
# never charged a second time. The peaks lent sum to at most the grant: a
# peak that does not fit the remaining room is refused (AllowanceExceeded)
# before anything is opened.
#
# Owns: the arena lease, pending pressure ids, the answers it gave. Must not
# touch: other holders' leases, admission policy.

from __future__ import annotations

import os
import weakref
from typing import Any

import attrs
import onnxruntime as ort

from refimpl.manager import ProcessMemoryManager
from refimpl.ort.residency import process_rss
from refimpl.ort.session import ModelSource, make_session
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import AllowanceExceeded, InvalidBytes, InvalidTransition, PinnedVictim
from spec.tickets import PressureState
from spec.types import Role, Tier

__all__ = ["ArenaHolder", "ArenaAnswer", "SHRINK_KEY", "env_arena", "env_arena_cap"]

SHRINK_KEY = "memory.enable_memory_arena_shrinkage"
_ENV: dict[str, Any] = {}  # the one env arena of this process: {"grant": bytes, "pid": os.getpid()}
_CHARGED: "weakref.WeakSet[ProcessMemoryManager]" = weakref.WeakSet()  # managers an ArenaHolder charged the cap on


@attrs.frozen
class ArenaAnswer:
    """One pressure ticket answered at a Run boundary: charge credited, residency observed (with its source)."""

    pressure: int
    released: int  # charge credited to the requester: 0, the cap cannot shrink
    rss_before: int | None  # None: /proc/self/status could not be read
    rss_after: int | None
    source: str = "VmRSS from /proc/self/status, process-wide, around the shrinking Run"


def _rss() -> int | None:
    fig = process_rss()
    return None if fig is None else fig.nbytes  # unreadable is None, never 0 under VmRSS's name (I8b)


def env_arena_cap() -> int | None:
    """The cap of this process's env arena, or None if none is registered yet."""
    return _ENV["grant"] if _ENV.get("pid") == os.getpid() else None


def env_arena(cap: int) -> None:
    """Register this process's one env arena with `max_mem = cap` [ort:env-arena-cap], once; another cap is refused.

    Registering again would replace the env arena only for sessions created
    afterwards, the earlier ones keeping the old arena and cap
    [ort:env-arena-reregister], and the binding cannot unregister one
    [ort:py-no-unregister]; so a second runtime in the same process may share
    the arena only at the cap it was registered with.
    """
    if type(cap) is not int or cap <= 0:
        raise InvalidBytes(f"cap must be a positive int, got {cap!r}")
    if _ENV.get("pid") == os.getpid():
        if _ENV["grant"] != cap:
            raise InvalidTransition(f"this process's env arena is capped at {_ENV['grant']} B; registering it "
                                    f"again at {cap} B would cap only sessions created afterwards")
        return
    mi = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(mi, ort.OrtArenaCfg({"max_mem": cap, "arena_extend_strategy": 1}))
    _ENV.update(grant=cap, pid=os.getpid())


class ArenaHolder:
    """The process's one env arena, capped by ORT at the grant this holder leased (== the cap in force)."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int, grant: int,
                 on_pressure: Any = None) -> None:
        if type(grant) is not int or grant <= 0:
            raise InvalidBytes(f"grant must be a positive int, got {grant!r}")
        registered = _ENV.get("pid") == os.getpid()
        if registered and _ENV["grant"] != grant:  # the ledger's grant must be the cap in force [ort:env-arena-cap]
            raise InvalidTransition(f"this process's env arena is capped at {_ENV['grant']} B; a holder granted "
                                    f"{grant} B would charge a cap not in force for the sessions that took it")
        if registered and pmm in _CHARGED:
            raise InvalidTransition(f"this process already has its env arena ({_ENV['grant']} B), charged on this "
                                    f"manager; a second registration would be a second arena under one lease")
        self.pmm, self.auth, self.grant = pmm, auth, grant
        self.id = pmm.register_holder("env-arena")
        self.lease = pmm.reserve(self.id, auth, Tier.HOST, grant, Role.ARENA)  # charge before allocate (I2)
        pmm.commit(self.id, self.lease, grant)
        if not registered:
            env_arena(grant)
        _CHARGED.add(pmm)
        self.pending: list[int] = []  # pressure ids waiting for the next Run boundary
        # `on_pressure`: the owner's own answering rule (a governed runtime answers at its decode Runs).
        pmm.register_callback(self.id, on_pressure or (lambda _pmm, pid, _target: self.pending.append(pid)))
        self.loans: dict[int, int] = {}  # allowance id -> bytes of the lease lent (a model's transient peak)
        self.answers: list[ArenaAnswer] = []
        self._released: dict[int, int] = {}  # pressure id -> bytes its answer released
        self.opened = self.answered = 0
        self.runs = self.shrinking_runs = 0
        self.in_flight = False

    @property
    def lent(self) -> int:
        """Bytes of the one lease lent to transient peaks (<= grant)."""
        return sum(self.loans.values())

    def lend(self, nbytes: int, enforce: bool = True) -> int:
        """Lend `nbytes` of the arena's lease (an allowance, mapped at once); refused past the lease's room.

        `enforce=False` is only the negative control of the guard `arena_room`.
        """
        if type(nbytes) is not int or nbytes <= 0:
            raise InvalidBytes(f"nbytes must be a positive int, got {nbytes!r}")
        if enforce and self.lent + nbytes > self.grant:  # I8: the peaks lie within the one lease
            raise AllowanceExceeded(f"the env arena lends {self.lent} B of its {self.grant} B; {nbytes} B more "
                                    f"do not fit")
        wid = self.pmm.open_allowance(self.id, self.auth, nbytes)
        try:
            self.pmm.reserve_growth(self.id, wid, nbytes)
            self.pmm.map_allowance(self.id, wid, nbytes)
        except BaseException:  # nothing of a failed loan stays open
            mapped = self._mapped(wid)
            if mapped:
                self.pmm.unmap_allowance(self.id, wid, mapped)
            self.pmm.close_allowance(self.id, wid)
            raise
        self.loans[wid] = nbytes
        return wid

    def _mapped(self, wid: int) -> int:
        return next((w.mapped for w in self.pmm.allowances(self.id) if w.id == wid), 0)

    def repay(self, wid: int) -> None:
        """Give a loan back: unmap it and close the allowance (the lease stays, charged once)."""
        nbytes = self.loans.pop(wid)
        self.pmm.unmap_allowance(self.id, wid, nbytes)
        self.pmm.close_allowance(self.id, wid)

    def session(self, model: ModelSource) -> ort.InferenceSession:
        """A CPU session that allocates from this env arena (`session.use_env_allocators=1`) [ort:env-arena-cap]."""
        return make_session(model, use_env_allocators=True)

    def press(self, target: int) -> int:
        """A requester opens a pressure ticket on the arena; it is answered at the next Run boundary."""
        pid = self.pmm.press(self.id, self.auth, target)  # the callback only records it (deferred answer)
        self.opened += 1
        return pid

    def answer(self, pid: int, victims: tuple[int, ...]) -> int:
        """The holder's answer to pressure `pid`; its lease is the arena's cap [ort:env-arena-cap], never a victim."""
        if type(victims) is tuple and self.lease in victims:  # the holder's own rule (I6), checked first
            raise PinnedVictim(f"allocation {self.lease} is the env arena's cap, pinned for the process's life")
        released = self.pmm.answer(self.id, pid, victims)
        self._released[pid] = released
        self.answered += 1
        return released

    def state(self, pid: int) -> tuple[PressureState, int]:
        """A pressure ticket's state as this holder saw it: open in the manager, answered by it, or neither."""
        if pid in abstract_manager(self.pmm).pressures:
            return PressureState.OPEN, 0
        if pid in self._released:
            return PressureState.ANSWERED, self._released[pid]
        return PressureState.CANCELLED, 0

    def run(self, session: ort.InferenceSession, feeds: dict[str, Any], outputs: list[str] | None = None) -> Any:
        """One Run; if pressure is pending, this Run shrinks the arena and the pressure is answered after it."""
        due = self.pending[:]
        del self.pending[:]  # the callback holds this list: presses during the Run wait for the next one
        ro = ort.RunOptions()
        if due:
            ro.add_run_config_entry(SHRINK_KEY, "cpu:0")
            self.shrinking_runs += 1
        before = _rss() if due else 0
        self.in_flight = True  # for the Run
        try:
            self.runs += 1
            return session.run(outputs, feeds, ro)  # ORT's own error on a run over the cap: per run, recoverable
        finally:
            self.in_flight = False
            if due:
                after = _rss()
                for pid in due:  # the Run boundary: answer now; the cap cannot shrink, so nothing is credited
                    released = self.answer(pid, ())
                    self.answers.append(ArenaAnswer(pid, released, before, after))
