"""Subprocess body for tests/ort/test_ort_arena.py: the env arena is process-wide; the binding cannot unregister it.

Run as `python tests/ort/arena_proc.py` from the repository root; prints one JSON object of observations.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.getcwd())

import numpy as np  # noqa: E402

from refimpl.manager import ProcessMemoryManager  # noqa: E402
from refimpl.ort.arena import ArenaHolder  # noqa: E402
from refimpl.ort.models import build_dynamic, reference_dynamic  # noqa: E402
from refimpl.verify.manager_hooks import abstract_ledger  # noqa: E402
from spec.types import Tier  # noqa: E402

WIDTH, GRANT = 256, 4 << 20  # activations: rows x 256 x 4 B per tensor


def _error(call) -> str | None:
    """What `call()` raised, as "Type: message" (the report records it; the tests judge it), or None."""
    try:
        call()
    except Exception as e:  # ORT's own error type, or ortmem's
        return f"{type(e).__name__}: {e}"
    return None


def main() -> dict[str, object]:
    out: dict[str, object] = {}
    pmm = ProcessMemoryManager()
    auth = pmm.register_authority("host", Tier.HOST, 64 << 20)
    arena = ArenaHolder(pmm, auth, GRANT)
    out["lease_charge"] = abstract_ledger(pmm).allocations[arena.lease].charge
    out["used"] = pmm.snapshot(auth).used
    model = build_dynamic(WIDTH)
    s = arena.session(model)
    small = np.ones((16, WIDTH), np.float32)
    y = arena.run(s, {"x": small})[0]
    out["small_ok"] = bool(np.allclose(y, reference_dynamic(model, small), rtol=1e-4, atol=1e-4))
    big = np.ones((4096, WIDTH), np.float32)  # 4 MiB per activation tensor: over the 4 MiB cap
    out["big_error"] = _error(lambda: arena.run(s, {"x": big}))
    y = arena.run(s, {"x": small})[0]
    out["after_ok"] = bool(np.allclose(y, reference_dynamic(model, small), rtol=1e-4, atol=1e-4))
    # Mid-generation: pressed between two steps, answered only when the next Run ends.
    pid = arena.press(1 << 20)
    out["state_before_run"] = arena.state(pid)[0].value
    out["pending_before_run"] = list(arena.pending)
    arena.run(s, {"x": small})
    state, released = arena.state(pid)
    out["state_after_run"], out["released"] = state.value, released
    out["shrinking_runs"], out["runs"] = arena.shrinking_runs, arena.runs
    out["answers"] = [[a.pressure, a.released, a.rss_before, a.rss_after, a.source] for a in arena.answers]
    out["opened"], out["answered"] = arena.opened, arena.answered
    out["used_after"] = pmm.snapshot(auth).used
    # The arena's lease is its cap: pinned for the process's life, never a victim (I6).
    pid2 = arena.press(1 << 20)
    out["pinned_victim"] = _error(lambda: arena.answer(pid2, (arena.lease,)))
    out["pid2_state"] = arena.state(pid2)[0].value
    out["second"] = _error(lambda: ArenaHolder(pmm, auth, GRANT))
    out["used_final"] = pmm.snapshot(auth).used
    # Another manager in this process (another runtime): it shares the one arena only at the cap in force.
    pmm2 = ProcessMemoryManager()
    auth2 = pmm2.register_authority("host", Tier.HOST, 64 << 20)
    out["mismatch"] = _error(lambda: ArenaHolder(pmm2, auth2, GRANT // 2))
    out["used_mismatch"] = pmm2.snapshot(auth2).used
    shared = ArenaHolder(pmm2, auth2, GRANT)
    out["shared_charge"] = abstract_ledger(pmm2).allocations[shared.lease].charge
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
