"""The coordinator's journal is never trusted blindly (C10): every damage is a typed refusal and a non-zero exit.

Issue 23 found a lost WAL file giving a silent fresh start (all quota free while workers held 8 units), one
flipped byte silently rolling back a grant, `free = 1000` accepted and then granted, a deleted worker row
and a quota of -50 accepted, an unreadable journal exiting 0 with no message. Here: `Journal.open` on
damaged copies (fast, every byte flipped in turn), then a real coordinator restarted on each damage while
its workers live: it exits 3 naming the problem, and the undamaged journal still starts with every unit
where it was.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from refimpl.hierarchy.coordinator import EXIT_FAILED, EXIT_JOURNAL, proc_state
from refimpl.hierarchy.driver import CoordinatorExited, Hierarchy, leftovers
from refimpl.hierarchy.journal import Journal
from spec.errors import InvalidArgument, JournalInconsistent, JournalMissing, JournalUnreadable

KEY = b"j" * 32
_META = {"serving_quota": 20, "aging_cap": 8, "free": 8, "next_worker": 3, "next_intent": 2, "next_ticket": 2,
         "incarnation": 2}
_WORKERS = [{"id": 1, "pid": 11, "starttime": 5, "state": "active", "epoch": 2, "seq": 3, "quota": 8, "returned": 0},
            {"id": 2, "pid": 12, "starttime": 6, "state": "active", "epoch": 1, "seq": 1, "quota": 4, "returned": 0}]
_INTENTS = [{"seq": 1, "worker": 2, "nbytes": 6, "priority": 1, "age": 1}]
_TICKETS = [(1, 1, 2)]


@pytest.fixture
def journal() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="h23j-")
    path = os.path.join(d, "journal.sqlite")
    j = Journal.create(path, KEY, 20, 8)
    j.commit(_META, _WORKERS, _INTENTS, _TICKETS)
    j.close_cleanly()  # the database file alone holds everything
    yield path
    shutil.rmtree(d, ignore_errors=True)


def _save(path: str, to: str) -> None:
    """The journal of a coordinator that was killed: its database file and its WAL, a consistent pair."""
    shutil.copy(path, to)
    shutil.copy(path + "-wal", to + "-wal")


def _restore(backup: str, path: str) -> None:
    for side in ("-wal", "-shm"):
        if os.path.exists(path + side):
            os.unlink(path + side)
    shutil.copy(backup, path)
    shutil.copy(backup + "-wal", path + "-wal")


def _kill(h: Hierarchy) -> None:
    """SIGKILL the coordinator (its journal as a crash leaves it)."""
    h.ctl.close()  # type: ignore[union-attr]
    h.ctl = None
    os.kill(h.proc.pid, 9)
    h.crashed()


def _edit(path: str, sql: str, *args: Any) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(sql, args)
    db.close()


def test_an_intact_journal_opens_with_every_figure(journal: str) -> None:
    """A fresh journal is sqlite in WAL mode, its serving quota free; the fixture's (committed, closed cleanly)
    reopens with every figure."""
    fresh = Journal.create(journal + ".fresh", KEY, 20, 8)
    assert fresh.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal" and fresh.load()["free"] == 20
    fresh.close_cleanly()
    s = Journal.open(journal, KEY).load()
    assert (s["free"], s["workers"][1]["quota"], s["intents"][1]["nbytes"], s["tickets"]) == \
        (8, 8, 6, {1: {"target": 1, "nbytes": 2}})


def test_init_refuses_an_existing_journal_and_open_refuses_a_missing_one(journal: str) -> None:
    with pytest.raises(InvalidArgument, match="a journal already exists"):
        Journal.create(journal, KEY, 20, 8)
    os.unlink(journal)
    with pytest.raises(JournalMissing, match="refusing to start afresh"):
        Journal.open(journal, KEY)


@pytest.mark.parametrize("damage,err,match", [
    (("UPDATE meta SET value = '1000' WHERE key = 'free'",), JournalInconsistent, "the free balance is 1000"),
    (("DELETE FROM workers WHERE id = 2",), JournalInconsistent, "worker 2 is missing"),
    (("UPDATE workers SET quota = -50 WHERE id = 1",), JournalInconsistent, "worker 1's quota is -50"),
    (("UPDATE workers SET quota = 9 WHERE id = 1",), JournalInconsistent, r"free 8 \+ quotas 13 = 21 != serving"),
    (("UPDATE workers SET state = 'exited' WHERE id = 1",), JournalInconsistent, "exited but charged 8"),
    (("UPDATE workers SET state = 'fenced', epoch = 1 WHERE id = 2",), JournalInconsistent, "past the first"),
    (("UPDATE workers SET state = 'zombie' WHERE id = 2",), JournalInconsistent, "state is 'zombie'"),
    (("UPDATE intents SET worker = 9",), JournalInconsistent, "intent 1 waits for worker 9"),
    (("UPDATE tickets SET target = '\"db\"'",), JournalInconsistent, "targets 'db'"),
    (("DELETE FROM meta WHERE key = 'digest'",), JournalInconsistent, "'digest' is missing"),
    (("UPDATE workers SET epoch = 7 WHERE id = 2",), JournalInconsistent, "digest mismatch"),
    (("UPDATE workers SET seq = 2 WHERE id = 1",), JournalInconsistent, "digest mismatch"),
    (("DROP TABLE intents",), JournalUnreadable, "a table does not read"),
])
def test_damaged_figures_are_refused_by_name(journal: str, damage: tuple[str, ...], err: type, match: str) -> None:
    _edit(journal, *damage)
    with pytest.raises(err, match=match):
        Journal.open(journal, KEY)


def test_a_journal_that_is_not_sqlite_or_not_a_file_is_unreadable(journal: str) -> None:
    with open(journal, "r+b") as f:
        f.write(b"not a database, not at all")
    with pytest.raises(JournalUnreadable, match="not a readable sqlite database"):
        Journal.open(journal, KEY)
    os.unlink(journal)
    os.mkdir(journal)
    with pytest.raises(JournalUnreadable):
        Journal.open(journal, KEY)


def test_every_flipped_byte_is_refused_or_changes_nothing(journal: str) -> None:
    """One byte of the file flipped at a time (every other byte that holds something, and every 257th of the
    zeroed free space): either `open` refuses it, typed, or it loads the same state."""
    j = Journal.open(journal, KEY)
    intact = j.load()
    j.close_cleanly()  # (opening marks it running; a clean close marks it clean again, all in the file)
    data = open(journal, "rb").read()
    copy = journal + ".flip"
    refused = same = 0
    for k in (k for k in range(len(data)) if (data[k] and k % 2 == 0) or k % 257 == 0):
        for side in ("-wal", "-shm"):  # what opening an earlier copy left must not be applied to this one
            if os.path.exists(copy + side):
                os.unlink(copy + side)
        with open(copy, "wb") as f:
            f.write(data[:k] + bytes([data[k] ^ 0x5A]) + data[k + 1:])
        try:
            j = Journal.open(copy, KEY, durable=False)
        except (JournalUnreadable, JournalInconsistent):
            refused += 1
            continue
        assert j.load() == intact, f"byte {k} flipped changed the state silently"
        j.close()
        same += 1
    assert refused > 50 and same > 0, (refused, same)  # both outcomes occur: the loop tests something


# --- a real coordinator on a damaged journal, its workers alive ------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[tuple[Hierarchy, str]]:
    d = tempfile.mkdtemp(prefix="h23l-")
    h = Hierarchy(d, 20).start()
    a, b = h.spawn(), h.spawn()
    h.wop(a, "request", 5)
    h.wop(a, "reserve", 3)
    h.wop(a, "commit")
    h.wop(b, "request", 3)  # the workers hold 8 units
    backup = os.path.join(d, "backup.sqlite")
    _kill(h)
    _save(h.cfg.journal, backup)
    yield h, backup
    _restore(backup, h.cfg.journal)
    h.start()
    h.close()
    shutil.rmtree(d, ignore_errors=True)
    assert leftovers(h.pids, h.starts) == []


def _refused(h: Hierarchy, backup: str, damage: Any) -> CoordinatorExited:
    _restore(backup, h.cfg.journal)
    damage(h.cfg.journal)
    try:
        h.start()
    except CoordinatorExited as e:
        return e
    _kill(h)  # (so that one failure does not leave a coordinator to confuse the tests after it)
    pytest.fail("the coordinator started on a damaged journal")


def _flip_digest(path: str) -> None:
    db = sqlite3.connect(path)
    digest = db.execute("SELECT value FROM meta WHERE key = 'digest'").fetchone()[0]
    db.close()  # the last connection: sqlite checkpoints the WAL into the file, where we flip a byte
    data = bytearray(open(path, "rb").read())
    k = bytes(data).index(digest[1:-1].encode())
    data[k] ^= 0x01
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("damage,match", [
    (lambda p: os.unlink(p), "JournalMissing: .* no journal"),
    (lambda p: os.unlink(p + "-wal"), "JournalMissing: .*-wal: missing, and the last coordinator did not shut down"),
    (_flip_digest, "JournalInconsistent: .* digest mismatch"),
    (lambda p: _edit(p, "UPDATE meta SET value = '1000' WHERE key = 'free'"), "the free balance is 1000"),
    (lambda p: _edit(p, "DELETE FROM workers WHERE id = 2"), "worker 2 is missing"),
    (lambda p: _edit(p, "UPDATE workers SET quota = -50 WHERE id = 1"), "worker 1's quota is -50"),
    (lambda p: open(p, "wb").write(b"not a database " * 300), "JournalUnreadable"),
], ids=["lost", "lost-wal", "flipped", "free-1000", "deleted-row", "quota-minus-50", "unreadable"])
def test_a_coordinator_on_a_damaged_journal_exits_3_naming_it(live: tuple[Hierarchy, str], damage: Any,
                                                             match: str, capfd: pytest.CaptureFixture[str]) -> None:
    h, backup = live
    e = _refused(h, backup, damage)
    assert e.code == EXIT_JOURNAL
    assert re.search(match, e.stderr), e.stderr
    assert "refusing to serve" in capfd.readouterr().err  # said on stderr too
    pids = [w for w in h.pids[1:] if proc_state(w) != "dead"]
    assert len(pids) == 2  # the workers live on, holding their units: nothing was silently freed


def test_after_a_clean_shutdown_lost_side_files_lose_nothing(journal: str) -> None:
    """A clean shutdown checkpoints everything into the database file: no side file holds an answered step."""
    for side in ("-wal", "-shm", "-journal"):
        assert not os.path.exists(journal + side)
    j = Journal.open(journal, KEY)
    assert j.load()["workers"][1]["quota"] == 8
    j.commit({**_META, "free": 9}, [_WORKERS[0], {**_WORKERS[1], "quota": 3}], _INTENTS, _TICKETS)
    j.close_cleanly()
    for side in ("-wal", "-shm"):
        if os.path.exists(journal + side):
            os.unlink(journal + side)
    assert Journal.open(journal, KEY).load()["workers"][2]["quota"] == 3


def test_a_crashed_coordinators_wal_lost_is_refused(journal: str) -> None:
    j = Journal.open(journal, KEY)  # a coordinator runs on it ...
    j.commit({**_META, "free": 9}, [_WORKERS[0], {**_WORKERS[1], "quota": 3}], _INTENTS, _TICKETS)
    crashed = journal + ".crashed"
    _save(journal, crashed)  # ... and dies: its files as it left them, its last step in its WAL
    _save(journal, crashed + "2")
    j.close()
    assert Journal.open(crashed, KEY).load()["workers"][2]["quota"] == 3  # with its WAL: nothing lost
    os.unlink(crashed + "2-wal")
    with pytest.raises(JournalMissing, match="did not shut down cleanly"):
        Journal.open(crashed + "2", KEY)


def test_a_stale_journal_is_caught_at_a_workers_hello() -> None:
    """An older copy of the journal (consistent, digest valid): the first worker that knows a step it lacks
    stops the coordinator before it grants anything from the stale figures."""
    d = tempfile.mkdtemp(prefix="h23s-")
    h = Hierarchy(d, 20).start()
    try:
        b = h.spawn()
        h.wop(b, "request", 3)
        _kill(h)
        backup = os.path.join(d, "backup.sqlite")
        _save(h.cfg.journal, backup)
        h.start()
        h.await_reconnects()
        h.wop(b, "request", 1)  # a step the backup does not have
        _kill(h)
        _restore(backup, h.cfg.journal)  # the journal goes back in time
        try:
            h.start()
        except CoordinatorExited as e:  # the worker's hello may come in before our own
            code, said = e.code, e.stderr
        else:
            code = h.crashed()
            said = open(h.cfg.stop_file).read()
        assert code == EXIT_JOURNAL and "JournalStale" in said and "lost answered steps" in said, said
    finally:
        h.close()
        shutil.rmtree(d, ignore_errors=True)
    assert [p for p in h.pids if h._alive(p)] == []  # (the module's other hierarchy still runs its workers)


def test_a_journal_write_that_fails_stops_the_coordinator_without_an_answer(live: tuple[Hierarchy, str]) -> None:
    h, backup = live
    _restore(backup, h.cfg.journal)
    h.start()
    h.await_reconnects()
    size = os.path.getsize(h.cfg.journal + "-wal")
    resource.prlimit(h.proc.pid, resource.RLIMIT_FSIZE, (size, size))  # the next WAL append fails (EFBIG)
    assert h.wop(1, "return", 1) is None  # no answer: the step was never told
    assert h.crashed() == EXIT_FAILED
    assert "stopped by an unexpected OperationalError" in open(h.cfg.stop_file).read()
    h.start()  # the journal holds the state before the failed step
    try:
        h.await_reconnects()
        assert h.snapshot()["workers"][1]["quota"] == 5
        assert h.wop(1, "snapshot")["slice"] == 5  # the worker assumed the return applied, then resynchronised
    finally:
        _kill(h)
