"""The coordinator's journal: sqlite in WAL mode, one transaction per coordinator step (C10).

Every figure a restarted coordinator needs is here: the free balance and the
counters, and per worker its pid and start time (to recognise it, or its
absence, after a restart), state, epoch, last accepted sequence number, quota
and the bytes credited at its exit; the pending intents and open reclaim
tickets. A step writes the whole (small) state in one transaction, so a crash
leaves either the state before the step or the state after it, never half: an
exit's credit and the worker's EXITED state commit together, which is what
makes a return happen exactly once across restarts.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

__all__ = ["Journal"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workers (id INTEGER PRIMARY KEY, pid INTEGER, starttime INTEGER, state TEXT,
    epoch INTEGER, seq INTEGER, quota INTEGER, returned INTEGER);
CREATE TABLE IF NOT EXISTS intents (seq INTEGER PRIMARY KEY, worker INTEGER, nbytes INTEGER, priority INTEGER,
    age INTEGER);
CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY, target TEXT, nbytes INTEGER);
"""

_W = ("id", "pid", "starttime", "state", "epoch", "seq", "quota", "returned")
_I = ("seq", "worker", "nbytes", "priority", "age")


class Journal:
    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, timeout=5.0)
        mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise OSError(f"sqlite journal {path}: WAL mode refused ({mode})")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(_SCHEMA)

    def load(self) -> dict[str, Any] | None:
        """The last committed state, or None for a fresh journal."""
        meta = dict(self.db.execute("SELECT key, value FROM meta").fetchall())
        if not meta:
            return None
        out: dict[str, Any] = {k: json.loads(v) for k, v in meta.items()}
        out["workers"] = {r[0]: dict(zip(_W, r)) for r in self.db.execute(f"SELECT {','.join(_W)} FROM workers")}
        out["intents"] = {r[0]: dict(zip(_I, r)) for r in self.db.execute(f"SELECT {','.join(_I)} FROM intents")}
        out["tickets"] = {r[0]: {"target": json.loads(r[1]), "nbytes": r[2]}
                          for r in self.db.execute("SELECT id, target, nbytes FROM tickets")}
        return out

    def commit(self, meta: dict[str, Any], workers: list[dict[str, Any]], intents: list[dict[str, Any]],
               tickets: list[tuple[int, object, int]]) -> None:
        """Replace the journaled state with this one, atomically."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM meta")
            db.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
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
