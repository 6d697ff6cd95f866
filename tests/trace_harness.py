"""Shared helpers of the trace tests: a traced manager and its recorded lines, the upstream conformance traces, lossy
variants of a recorded JSONL trace."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from refimpl.manager import ProcessMemoryManager
from refimpl.tracing import JsonlSink

ROOT = Path(__file__).resolve().parents[1]


def traced(**kwargs: Any) -> tuple[ProcessMemoryManager, io.StringIO]:
    """A manager (built with `kwargs`) writing its JSONL trace to a fresh buffer: (manager, buffer)."""
    buf = io.StringIO()
    return ProcessMemoryManager(trace=JsonlSink(buf), **kwargs), buf


def lines_of(buf: io.StringIO) -> list[bytes]:
    """The events written to `buf`, one line each, as a trace file holds them."""
    return [line.encode() + b"\n" for line in buf.getvalue().splitlines()]


def replaced(lines: list[bytes], i: int, ev: dict[str, Any]) -> list[bytes]:
    """`lines` with the event at 0-based `i` replaced by `ev`."""
    return [*lines[:i], json.dumps(ev).encode() + b"\n", *lines[i + 1:]]


def upstream() -> Path:
    """The shared folder's upstream conformance traces; without them the test is skipped (failed under CI)."""
    for base in (os.environ.get("ORTMEM_SHARED"), ROOT.parent / "shared"):
        if base and (Path(base) / "conformance" / "upstream").is_dir():
            return Path(base) / "conformance" / "upstream"
    msg = ("the upstream conformance traces were not found: set ORTMEM_SHARED to the shared folder (the one "
           "holding conformance/upstream/), or place it beside the repository as ../shared")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(msg)
    pytest.skip(msg)


def renumbered(lines: list[bytes]) -> list[bytes]:
    """The events renumbered 1, 2, 3, ... in line order: an emitter that lost, duplicated or moved an event and
    hid it from the sequence check, so only the spec can notice."""
    out = []
    for n, raw in enumerate(lines, 1):
        ev = json.loads(raw)
        ev["source_sequence"] = n
        out.append(json.dumps(ev).encode() + b"\n")
    return out


def ledger_payload(ids: dict[str, Any], used: dict[str, Any] | None = None, charges: dict[str, Any] | None = None,
                   error: str | None = None, kind: str = "", **args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ledger event's (ids, payload) in `ortmem-manager/2`, written as tests think of it: `ids.result` the id the
    operation issued (moved to the payload's `result`), a registration on the device its pool names unless one is
    given."""
    ids = dict(ids)
    if kind == "register_authority":
        args.setdefault("device", args.get("pool"))
    return ids, {**args, "outcome": "rejected" if error else "accepted", "error": error,
                 "result": ids.pop("result", None), "used": used or {}, "charges": charges or {}, "bundles": {}}


def ledger_event(seq: int, kind: str, ids: dict[str, Any], used: dict[str, Any] | None = None,
                 charges: dict[str, Any] | None = None, error: str | None = None, **args: Any) -> bytes:
    """One `ortmem-manager/2` event line of source "g", its ids and payload as `ledger_payload` writes them."""
    ids, payload = ledger_payload(ids, used, charges, error, kind, **args)
    return json.dumps({"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": seq, "kind": kind,
                       "ids": ids, "payload": payload}).encode() + b"\n"


def epoched(lines: list[bytes]) -> list[bytes]:
    """`lines` with a `topology_epoch` written into each event that carries none (the object's first key, the rest
    of the line byte for byte): 0 from the first event, + 1 after each accepted event that changed the topology (a
    registration issuing a new id, an alias of a new view whatever id answers it, a device lost while active, a
    termination confirmed while lost, a removal), as a governor numbers them; an event that carries one keeps it.
    Written from docs/trace-format.md, independently of `invariants.manager_trace.topology_changed`. Lines that are
    no JSON object pass unchanged."""
    epoch, known, views, canon, context, out = 0, set(), set(), {}, {}, []
    for raw in lines:
        try:
            ev = json.loads(raw)
        except ValueError:
            ev = None
        if type(ev) is not dict:
            out.append(raw)
            continue
        if "topology_epoch" not in ev:
            raw = raw.replace(b"{", b'{"topology_epoch": %d, ' % epoch, 1)
        out.append(raw)
        kind, ids, p = ev.get("kind"), ev.get("ids"), ev.get("payload")
        if type(ids) is not dict or type(p) is not dict or p.get("outcome") != "accepted":
            continue
        r, a = p.get("result"), canon.get(ids.get("authority"), ids.get("authority"))
        if kind == "register_authority" and r not in known:
            known.add(r)
            context[r], epoch = "active", epoch + 1
        elif kind == "register_alias" and (canon.get(ids.get("of"), ids.get("of")), p.get("view")) not in views:
            views.add((canon.get(ids.get("of"), ids.get("of")), p.get("view")))
            canon[r], epoch = canon.get(ids.get("of"), ids.get("of")), epoch + 1
        elif (kind, context.get(a)) in (("lose_device", "active"), ("confirm_termination", "lost")):
            context[a], epoch = "lost" if kind == "lose_device" else "terminated", epoch + 1
        elif kind == "remove_authority":
            epoch += 1
    return out


def replay_epoched(lines: list[bytes]) -> Any:
    """`invariants.manager_replay.replay_manager_lines` of `epoched(lines)`: a hand-built trace as a governor writes
    it, its topology epochs included."""
    from invariants.manager_replay import replay_manager_lines
    return replay_manager_lines(epoched(list(lines)))
