"""The coordinator's journal: sqlite, one transaction per coordinator step, audited before it is trusted (C10).

Every figure a restarted coordinator needs is here: the free balance and the
counters, and per worker its pid and start time (to recognise it, or its
absence, after a restart), state, epoch, last accepted sequence number, quota
and the units credited at its exit; the pending intents and open reclaim
tickets; and a digest, HMAC(coordinator key, canonical state), over all of it.
A step writes the whole (small) state in one transaction, so a crash leaves
either the state before the step or the state after it, never half: an
exit's credit and the worker's EXITED state commit together, which is what
makes a return happen exactly once across restarts.

Durability (WAL, `synchronous=FULL`, the `clean` marker and `JournalMissing`), first start against
lost journal (`Journal.create` / `Journal.open`) and the audit `open` runs before anything is served
(`JournalUnreadable`, `JournalInconsistent`; `JournalStale` at a worker's hello,
`refimpl.hierarchy.service`): docs/hierarchy.md, "The journal". (`durable=False`, for the in-process
simulation, turns the fsyncs off: a simulated crash loses the process, not the page cache.)
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
from typing import Any

from spec.errors import InvalidArgument, JournalInconsistent, JournalMissing, JournalUnreadable
from spec.hierarchy_actions import MAX_COUNTER, MAX_PRIORITY, MAX_QUOTA

__all__ = ["Journal", "audit"]

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE workers (id INTEGER PRIMARY KEY, pid INTEGER, starttime INTEGER, state TEXT, epoch INTEGER,
    seq INTEGER, quota INTEGER, returned INTEGER);
CREATE TABLE intents (seq INTEGER PRIMARY KEY, worker INTEGER, nbytes INTEGER, priority INTEGER, age INTEGER);
CREATE TABLE tickets (id INTEGER PRIMARY KEY, target TEXT, nbytes INTEGER);
"""

_W = ("id", "pid", "starttime", "state", "epoch", "seq", "quota", "returned")
_I = ("seq", "worker", "nbytes", "priority", "age")
_META = ("serving_quota", "aging_cap", "free", "next_worker", "next_intent", "next_ticket", "incarnation")
_MARKS = ("clean",)
_STATES = ("spawned", "active", "fenced", "exited")


def _connect(path: str, durable: bool, create: bool) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{path}?mode={'rwc' if create else 'rw'}", uri=True, isolation_level=None,
                         timeout=5.0)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        raise JournalUnreadable(f"sqlite journal {path}: WAL mode refused ({mode})")
    db.execute(f"PRAGMA synchronous={'FULL' if durable else 'OFF'}")
    return db


def _digest(key: bytes, state: dict[str, Any]) -> str:
    canon = json.dumps([[state[k] for k in (*_META, *_MARKS)],
                        [[w[k] for k in _W] for _, w in sorted(state["workers"].items())],
                        [[i[k] for k in _I] for _, i in sorted(state["intents"].items())],
                        [[t, x["target"], x["nbytes"]] for t, x in sorted(state["tickets"].items())]],
                       separators=(",", ":"))
    return hmac.new(key, canon.encode(), hashlib.sha256).hexdigest()


class Journal:
    def __init__(self, db: sqlite3.Connection, path: str, key: bytes) -> None:
        """Use `Journal.create` or `Journal.open`."""
        self.db, self.path, self.key = db, path, key
        self._state: dict[str, Any] | None = None
        self._mark = False  # the clean-shutdown marker every commit writes (true only in `close_cleanly`)

    @classmethod
    def create(cls, path: str, key: bytes, serving_quota: int, aging_cap: int, durable: bool = True) -> Journal:
        """The explicit init of a hierarchy: a new journal at `path` (an existing file is refused)."""
        if os.path.lexists(path):
            raise InvalidArgument(f"{path}: a journal already exists; init creates only a new one")
        j = cls(_connect(path, durable, create=True), path, key)
        j.db.executescript(_SCHEMA)
        meta = {"serving_quota": serving_quota, "aging_cap": aging_cap, "free": serving_quota, "next_worker": 1,
                "next_intent": 1, "next_ticket": 1, "incarnation": 0}
        j.commit(meta, [], [], [])
        j._state = j._read()
        audit(j._state)
        j._running()  # the schema and the running marker in the database file itself, before anything is served
        return j

    @classmethod
    def open(cls, path: str, key: bytes, durable: bool = True) -> Journal:
        """An existing journal, checked (integrity, figures, digest) before the coordinator serves from it."""
        if not os.path.exists(path):
            raise JournalMissing(f"{path}: no journal. It was lost, or this hierarchy was never initialised "
                                 "(a first start is an explicit init); refusing to start afresh while workers "
                                 "may hold quota")
        wal_missing = not os.path.exists(path + "-wal")  # before sqlite opens it (which makes an empty one)
        try:
            db = _connect(path, durable, create=False)
            rows = db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.Error as e:
            raise JournalUnreadable(f"{path}: not a readable sqlite database ({type(e).__name__}: {e})") from None
        if rows != [("ok",)]:
            db.close()
            raise JournalUnreadable(f"{path}: sqlite integrity check failed: {str(rows)[:300]}")
        j = cls(db, path, key)
        try:
            state = j._read()
            audit(state)
            if state.get("digest") != _digest(key, state):
                raise JournalInconsistent(f"{path}: digest mismatch: the journal was altered outside its "
                                          "coordinator (or damaged) although every figure is in range")
            if state["clean"] is not True and wal_missing:
                raise JournalMissing(f"{path}-wal: missing, and the last coordinator did not shut down cleanly: "
                                     "the answered steps it held are lost; refusing to serve from an older state")
        except BaseException:
            db.close()
            raise
        j._state = state
        try:
            j._running()
        except sqlite3.Error as e:
            db.close()
            raise JournalUnreadable(f"{path}: cannot be written ({type(e).__name__}: {e})") from None
        return j

    def _running(self) -> None:
        """From now on this journal has a running coordinator: say so in the database file itself."""
        self._clean(False)

    def _clean(self, clean: bool) -> None:
        self._mark = clean
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'clean'", (json.dumps(clean),))
            state = self._read()
            self.db.execute("UPDATE meta SET value = ? WHERE key = 'digest'", (json.dumps(_digest(self.key, state)),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close_cleanly(self) -> None:
        """A clean shutdown: the marker true, everything checkpointed into the database file, the WAL removed."""
        self._clean(True)
        self.db.close()

    def _read(self) -> dict[str, Any]:
        db = self.db
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            workers = db.execute(f"SELECT {','.join(_W)} FROM workers").fetchall()
            intents = db.execute(f"SELECT {','.join(_I)} FROM intents").fetchall()
            tickets = db.execute("SELECT id, target, nbytes FROM tickets").fetchall()
        except sqlite3.Error as e:
            raise JournalUnreadable(f"{self.path}: a table does not read ({type(e).__name__}: {e})") from None
        out: dict[str, Any] = {}
        for k in (*_META, *_MARKS, "digest"):
            if k not in meta:
                raise JournalInconsistent(f"{self.path}: meta figure {k!r} is missing")
            try:
                out[k] = json.loads(meta[k])
            except (TypeError, ValueError):
                raise JournalInconsistent(f"{self.path}: meta figure {k!r} does not parse: {meta[k][:40]!r}") from None
        out["workers"] = {r[0]: dict(zip(_W, r)) for r in workers}
        out["intents"] = {r[0]: dict(zip(_I, r)) for r in intents}
        out["tickets"] = {}
        for t, target, n in tickets:
            try:
                out["tickets"][t] = {"target": json.loads(target), "nbytes": n}
            except (TypeError, ValueError):
                raise JournalInconsistent(f"{self.path}: ticket {t}'s target does not parse") from None
        return out

    def load(self) -> dict[str, Any]:
        """The audited state this journal was opened (or created) with; each call a fresh copy."""
        assert self._state is not None, "a Journal is made by create() or open()"
        s = self._state
        return {**{k: s[k] for k in _META}, "workers": {k: dict(v) for k, v in s["workers"].items()},
                "intents": {k: dict(v) for k, v in s["intents"].items()},
                "tickets": {k: dict(v) for k, v in s["tickets"].items()}}

    def commit(self, meta: dict[str, Any], workers: list[dict[str, Any]], intents: list[dict[str, Any]],
               tickets: list[tuple[int, object, int]]) -> None:
        """Replace the journaled state with this one, atomically, its digest with it."""
        meta = {**meta, "clean": self._mark}
        state = {**meta, "workers": {w["id"]: w for w in workers}, "intents": {i["seq"]: i for i in intents},
                 "tickets": {t: {"target": x, "nbytes": n} for t, x, n in tickets}}
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM meta")
            db.executemany("INSERT INTO meta VALUES (?, ?)",
                           [(k, json.dumps(v)) for k, v in {**meta, "digest": _digest(self.key, state)}.items()])
            db.execute("DELETE FROM workers")
            db.executemany(f"INSERT INTO workers VALUES ({','.join('?' * len(_W))})",
                           [tuple(w[k] for k in _W) for w in workers])
            db.execute("DELETE FROM intents")
            db.executemany(f"INSERT INTO intents VALUES ({','.join('?' * len(_I))})",
                           [tuple(i[k] for k in _I) for i in intents])
            db.execute("DELETE FROM tickets")
            db.executemany("INSERT INTO tickets VALUES (?, ?, ?)", [(t, json.dumps(x), n) for t, x, n in tickets])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self.db.close()


def _int(v: object, lo: int, hi: int, what: str) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise JournalInconsistent(f"{what} is {v!r:.40}, outside [{lo}, {hi}]")
    return v


def audit(s: dict[str, Any]) -> None:
    """The journal's figures against the hierarchy's invariants; the first that fails is named."""
    q = _int(s["serving_quota"], 1, MAX_QUOTA, "the serving quota")
    cap = _int(s["aging_cap"], 1, MAX_COUNTER, "the aging cap")
    _int(s["free"], 0, q, "the free balance")
    nw = _int(s["next_worker"], 1, MAX_COUNTER, "the next worker id")
    ni = _int(s["next_intent"], 1, MAX_COUNTER, "the next intent id")
    nt = _int(s["next_ticket"], 1, MAX_COUNTER, "the next ticket id")
    _int(s["incarnation"], 0, MAX_COUNTER, "the incarnation")
    if type(s["clean"]) is not bool:
        raise JournalInconsistent(f"the clean-shutdown marker is {s['clean']!r:.40}, not a bool")
    workers = s["workers"]
    for wid in workers:
        _int(wid, 1, MAX_COUNTER, "a worker id")
    missing = sorted(set(range(1, nw)) - set(workers))
    if missing:
        raise JournalInconsistent(f"worker {missing[0]} is missing (workers 1..{nw - 1} were spawned)")
    extra = sorted(set(workers) - set(range(1, nw)))
    if extra:
        raise JournalInconsistent(f"worker {extra[0]} was never issued (the next id is {nw})")
    for wid, w in workers.items():
        if w["state"] not in _STATES:
            raise JournalInconsistent(f"worker {wid}'s state is {w['state']!r:.40}")
        for f, lo, hi in (("pid", 0, 1 << 32), ("starttime", 0, MAX_COUNTER), ("epoch", 1, MAX_COUNTER),
                          ("seq", 0, MAX_COUNTER), ("quota", 0, q), ("returned", 0, q)):
            _int(w[f], lo, hi, f"worker {wid}'s {f}")
        if w["state"] in ("spawned", "exited") and w["quota"]:
            raise JournalInconsistent(f"worker {wid} is {w['state']} but charged {w['quota']}")
        if w["state"] in ("fenced", "exited") and w["epoch"] < 2:
            raise JournalInconsistent(f"worker {wid} is {w['state']} in epoch {w['epoch']}: fencing and exit "
                                      "end an epoch, so its epoch is past the first")
        if w["state"] != "exited" and w["returned"]:
            raise JournalInconsistent(f"worker {wid} is {w['state']} but its exit returned {w['returned']}")
        if w["state"] in ("active", "fenced") and not w["pid"]:
            raise JournalInconsistent(f"worker {wid} is {w['state']} but has no process")
    total = s["free"] + sum(w["quota"] for w in workers.values())
    if total != q:
        raise JournalInconsistent(f"free {s['free']} + quotas {total - s['free']} = {total} != serving quota {q}")
    waiting: set[int] = set()
    for k, i in s["intents"].items():
        _int(k, 1, ni - 1, "an intent id")
        if i["seq"] != k:
            raise JournalInconsistent(f"intent {k} has sequence {i['seq']!r:.40}")
        if (type(i["worker"]) is not int or i["worker"] not in workers or workers[i["worker"]]["state"] != "active"
                or i["worker"] in waiting):
            raise JournalInconsistent(f"intent {k} waits for worker {i['worker']!r:.40}, not a live worker "
                                      "with no other intent")
        waiting.add(i["worker"])
        _int(i["nbytes"], 1, q, f"intent {k}'s units")
        _int(i["priority"], 0, MAX_PRIORITY, f"intent {k}'s priority")
        _int(i["age"], 0, cap, f"intent {k}'s age")
    for t, x in s["tickets"].items():
        _int(t, 1, nt - 1, "a ticket id")
        if type(x["target"]) is not int or x["target"] not in workers or workers[x["target"]]["state"] != "active":
            raise JournalInconsistent(f"reclaim ticket {t} targets {x['target']!r:.40}, not a live worker")
        _int(x["nbytes"], 1, q, f"ticket {t}'s units")
