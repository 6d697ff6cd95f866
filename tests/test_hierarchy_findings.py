"""Issue 23's findings on the real hierarchy, each a deterministic control (C10, I11).

Each test reproduces one probe of the issue against real processes and asserts the harm is gone:
a double grant after a coordinator crash during a deferral; quota granted in the name of a fenced,
exited or never-spawned identity; a worker able to derive another worker's key; peers unpickled
before they authenticate; integers past every bound; a coordinator dying on a vanished peer; a
refused hello surfacing as `AssertionError`. Every wait is bounded; no process outlives a test.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import signal
import time
from multiprocessing.connection import Client
from typing import Any

import pytest

from refimpl.hierarchy import protocol as P
from refimpl.hierarchy import transport as T
from refimpl.hierarchy.coordinator import proc_state
from refimpl.hierarchy.driver import Hierarchy, _until
from spec.errors import CapacityDenied, InvalidArgument, InvalidBytes, InvalidTransition, UnknownWorker, WorkerNotLive

Q = 20  # the units of the `hier` fixture's hierarchy (tests/conftest.py)
HIER_OPTIONS = {"terminate_on_fence": False}


def _combined(h: Hierarchy) -> int:
    """Grantable plus, per worker, max(charged, usable): the units the hierarchy could hand out or use now."""
    s = h.snapshot()
    total = s["free"]
    for wid, w in s["workers"].items():
        usable = 0
        if w["state"] != "exited" and w["proc"] == "running":
            mine = h.wop(wid, "snapshot")
            usable = max(mine["slice"], mine["committed"] + mine["reserved"])
        total += max(w["quota"], usable)
    return total


# --- a coordinator crash between journaling a deferral and its reply ---------------------------------------


def test_no_double_grant_after_a_crash_between_journal_and_reply_to_a_deferral(hier: Hierarchy) -> None:
    """The issue's 11-of-30 double grant: the deferral (uncommitted quota taken back) is journaled, the
    coordinator dies before replying, the worker reconnects. Before: it resynchronised its slice but kept its
    open reservation, the coordinator granted those units to a third worker, and the reservation was then
    committed without a budget check (23 units under 20)."""
    a, b, c = hier.spawn(), hier.spawn(), hier.spawn()
    assert hier.wop(a, "request", 10) == ["granted", 10]
    hier.wop(a, "reserve", 3)  # open, not committed
    assert hier.wop(b, "request", 10) == ["granted", 10]
    hier.op("arm", "crash-before-reply")
    assert hier.wop(a, "request", 5) is None  # deferred and journaled; the reply never came
    assert hier.crashed() is not None  # it died by its own SIGKILL, between journal and reply
    hier.start()
    hier.await_reconnects()
    s = hier.snapshot()
    assert (s["free"], s["workers"][a]["quota"], len(s["intents"])) == (10, 0, 1)  # the deferral was journaled
    mine = hier.wop(a, "snapshot")
    assert (mine["slice"], mine["reserved"], mine["committed"], mine["synced"]) == (0, 0, 0, True)
    assert mine["waiting"] == next(iter(s["intents"]))
    assert hier.wop(c, "request", 10) == ["granted", 10]  # the freed units go to another worker ...
    with pytest.raises(InvalidTransition, match="no open reservation"):
        hier.wop(a, "commit")  # ... and the deferred worker's old reservation is gone, not committed
    assert _combined(hier) <= Q


@pytest.mark.parametrize("hier", [{"manual_redial": True}], indirect=True)
def test_a_worker_whose_reply_is_lost_holds_nothing_the_coordinator_gave_away(hier: Hierarchy) -> None:
    """The same deferral, its reply lost without a crash, the worker held out of sync (manual redial) while the
    coordinator grants the units it took back: in every process's view combined, no unit is usable twice."""
    a, b, c = hier.spawn(), hier.spawn(), hier.spawn()
    hier.wop(a, "request", 10)
    hier.wop(a, "reserve", 3)
    hier.wop(b, "request", 10)
    hier.op("arm", "drop-reply")
    assert hier.wop(a, "request", 5) is None
    mine = hier.wop(a, "snapshot")
    assert (mine["slice"], mine["reserved"], mine["synced"]) == (0, 0, False)  # it assumed the worst
    with pytest.raises(InvalidTransition, match="out of sync"):
        hier.wop(a, "reserve", 1)  # and acts on nothing until it says hello again
    assert hier.wop(c, "request", 10) == ["granted", 10]
    assert _combined(hier) <= Q
    hier.wop(a, "reconnect")
    assert hier.wop(a, "snapshot")["synced"] is True and _combined(hier) <= Q


# --- quota in the name of a fenced, exited or never-spawned identity -----------------------------------------


def test_no_quota_for_a_fenced_exited_or_never_spawned_identity(hier: Hierarchy) -> None:
    """The issue granted 3 units to a fenced worker's key with its current epoch, and 5 after its exit (never
    returned, still charged after a restart)."""
    a, b = hier.spawn(), hier.spawn()
    hier.wop(a, "request", 4)
    hier.op("expire", a)  # fenced: epoch 2, quota still charged until its exit
    fenced = hier.snapshot()["workers"][a]
    msg = P.seal(P.worker_key(hier.cfg.master, a), kind="request", worker=a, epoch=fenced["epoch"],
                 seq=fenced["seq"] + 1, nbytes=3, priority=0, keep=0)
    before = hier.snapshot()
    with pytest.raises(WorkerNotLive, match="fenced"):
        hier.op("inject", msg)
    assert hier.snapshot() == before
    hier.kill(a)
    gone = hier.snapshot()["workers"][a]
    msg = P.seal(P.worker_key(hier.cfg.master, a), kind="request", worker=a, epoch=gone["epoch"],
                 seq=gone["seq"] + 1, nbytes=5, priority=0, keep=0)
    before = hier.snapshot()
    with pytest.raises(WorkerNotLive, match="exited"):
        hier.op("inject", msg)
    never = P.seal(P.worker_key(hier.cfg.master, 77), kind="request", worker=77, epoch=1, seq=1, nbytes=5,
                   priority=0, keep=0)
    with pytest.raises(UnknownWorker):
        hier.op("inject", never)
    assert hier.snapshot() == before
    hier.restart()
    s = hier.snapshot()
    assert (s["free"], s["workers"][a]["quota"], s["workers"][b]["quota"]) == (Q, 0, 0)


# --- per-worker keys -----------------------------------------------------------------------------------------


def _memory(pid: int) -> bytes:
    """Every writable mapping of process `pid` (heap, stacks, anonymous memory: where a key object lives)."""
    out = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw") or "[vvar]" in line or "[vsyscall]" in line:
                continue
            lo, hi = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(lo)
                out.append(mem.read(hi - lo))
            except (OSError, OverflowError, ValueError):
                continue
    return b"".join(out)


def test_a_worker_holds_its_own_keys_and_no_other(hier: Hierarchy) -> None:
    """Before, every worker was forked from the coordinator with the master key in its memory."""
    a, b = hier.spawn(), hier.spawn()
    hier.wop(a, "request", 2)
    memory = _memory(hier.pid(a))
    master = hier.cfg.master
    assert P.worker_key(master, a) in memory  # the scan sees keys (a positive control for the checks below)
    assert master not in memory
    assert P.worker_key(master, b) not in memory and P.worker_control_key(master, b) not in memory
    assert P.control_key(master) not in memory and P.journal_key(master) not in memory
    pid = os.fork()  # negative control: a process forked from a key holder, as the old workers were
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    try:
        assert master in _memory(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


# --- nothing decoded before it authenticates --------------------------------------------------------------


class _Touch:
    """A pickle that creates `path` when unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.path}",))


def _sealed_raw(ch: T.Channel, body: bytes) -> None:
    """A frame with a valid tag whose body is `body` (bytes, not JSON): what an authenticated peer could send."""
    s = ch.session
    tag = hmac.new(s.out_key, s.sent.to_bytes(8, "big") + body, hashlib.sha256).digest()
    s.sent += 1
    ch.conn.send_bytes(tag + body)


@pytest.mark.parametrize("socket_of", ["coordinator", "worker"])
def test_a_pickle_from_a_peer_is_never_unpickled(hier: Hierarchy, where: str, socket_of: str) -> None:
    a = hier.spawn()
    hier.wop(a, "request", 2)
    before, mine = hier.snapshot(), hier.wop(a, "snapshot")
    marker = os.path.join(where, "pwned")
    payload = pickle.dumps(_Touch(marker))
    path = hier.cfg.address if socket_of == "coordinator" else os.path.join(where, f"w{a}.sock")
    conn = Client(path, family="AF_UNIX")  # before any handshake: the old first read was `conn.recv()`
    conn.send_bytes(payload)
    with pytest.raises((EOFError, OSError)):
        assert conn.poll(T.DIAL_TIMEOUT)
        conn.recv_bytes(P.MAX_REPLY)
    conn.close()
    key = P.control_key(hier.cfg.master) if socket_of == "coordinator" else P.worker_control_key(hier.cfg.master, a)
    ch = T.dial(path, "control", 0 if socket_of == "coordinator" else a, key)  # an authenticated operator ...
    assert ch.poll(T.DIAL_TIMEOUT) and ch.recv() == P.READY
    _sealed_raw(ch, payload)  # ... whose frame body is a pickle: tag valid, body not JSON
    assert ch.poll(T.DIAL_TIMEOUT)
    with pytest.raises(InvalidArgument, match="a malformed body"):
        P.raise_refusal(ch.recv())  # a typed refusal, read as JSON, never unpickled
    ch.close()
    time.sleep(0.2)
    assert not os.path.exists(marker)
    assert hier.snapshot() == before and hier.wop(a, "snapshot") == mine  # both still serve; nothing changed


def test_an_oversized_frame_is_refused_before_it_is_read(hier: Hierarchy) -> None:
    conn = Client(hier.cfg.address, family="AF_UNIX")
    conn._send(b"\x7f\xff\xff\xff")  # a length prefix of 2 GiB, and nothing after it
    with pytest.raises((EOFError, OSError)):
        assert conn.poll(T.DIAL_TIMEOUT)
        conn.recv_bytes(P.MAX_REPLY)
    conn.close()
    assert hier.snapshot()["free"] == Q


# --- bounded integers, typed refusals ----------------------------------------------------------------------


@pytest.mark.parametrize("args,err,match", [
    ((2 ** 70,), InvalidBytes, "nbytes must be an int in"),
    ((3, 2 ** 70), InvalidArgument, "priority must be an int in"),
    ((Q + 1,), CapacityDenied, "could never be granted"),
    ((-1,), InvalidBytes, "nbytes"),
])
def test_worker_request_refuses_out_of_range_integers_and_changes_nothing(hier: Hierarchy, args: tuple[int, ...],
                                                                            err: type, match: str) -> None:
    a = hier.spawn()
    hier.wop(a, "request", 2)
    before, mine = hier.snapshot(), hier.wop(a, "snapshot")
    with pytest.raises(err, match=match):
        hier.wop(a, "request", *args)
    assert hier.snapshot() == before and hier.wop(a, "snapshot") == mine
    forged = P.seal(P.worker_key(hier.cfg.master, a), kind="request", worker=a, epoch=1, seq=mine["seq"] + 1,
                    nbytes=args[0], priority=args[1] if len(args) > 1 else 0, keep=0)
    with pytest.raises(err, match=match):  # the same figures on the network: the coordinator's own bound
        hier.op("inject", forged)
    assert hier.snapshot() == before


# --- a vanished peer ------------------------------------------------------------------------------------


def test_kill_9_of_a_worker_with_a_request_in_flight_leaves_the_coordinator_serving(hier: Hierarchy) -> None:
    a, b = hier.spawn(), hier.spawn()
    hier.wop(a, "request", 4)
    pid, ch = hier.pid(a), hier._worker_conn(a)
    os.kill(hier.proc.pid, signal.SIGSTOP)  # the coordinator reads the request only after its sender is dead
    try:
        ch.send({"op": "request", "args": [6]})  # the worker sends it to the coordinator and waits
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        _until(lambda: proc_state(pid) == "dead", 60.0, "the worker's death")
    finally:
        os.kill(hier.proc.pid, signal.SIGCONT)
    hier.workers.pop(a, None)
    hier.await_exit(a)
    s = hier.snapshot()  # served: the reply to the dead worker failed, and the coordinator went on
    assert proc_state(hier.proc.pid) != "dead"
    assert s["workers"][a]["state"] == "exited" and s["free"] + s["workers"][b]["quota"] == Q
    assert hier.wop(b, "request", 3) == ["granted", 3]


def test_clients_closing_before_their_reply_leave_the_coordinator_serving(hier: Hierarchy) -> None:
    a = hier.spawn()
    for _ in range(5):
        ch = T.dial(hier.cfg.address, "control", 0, P.control_key(hier.cfg.master))
        assert ch.poll(T.DIAL_TIMEOUT) and ch.recv() == P.READY
        ch.send({"op": "snapshot", "args": []})
        ch.close()  # gone before the reply
    assert hier.wop(a, "request", 2) == ["granted", 2]
    assert proc_state(hier.proc.pid) != "dead"


def test_a_refused_hello_is_a_typed_error(hier: Hierarchy) -> None:
    """Before, a refused hello surfaced as `AssertionError` inside the stdlib challenge and killed the worker."""
    a = hier.spawn()
    hier.op("expire", a)  # fenced, not terminated
    ch = T.dial(hier.cfg.address, "worker", a, P.worker_key(hier.cfg.master, a))
    ch.send({"committed": 0, "seq": 0})
    assert ch.poll(T.DIAL_TIMEOUT)
    with pytest.raises(WorkerNotLive, match="cannot authenticate again"):
        P.raise_refusal(ch.recv())
    ch.close()
    with pytest.raises(WorkerNotLive):
        hier.wop(a, "reconnect")  # the worker process itself: a typed refusal, and it stays alive
    assert hier.wop(a, "snapshot")["refused"] == "WorkerNotLive"

