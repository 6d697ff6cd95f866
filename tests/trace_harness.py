"""Shared helpers of the trace tests: the upstream conformance traces, lossy variants of a recorded JSONL trace."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
