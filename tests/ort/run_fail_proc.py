"""A Run failing over the env arena's cap, for real, in its own process (the env arena is process-wide).

Admission refuses a model whose measured peak does not fit the arena (typed,
nothing changed); with that check off (guard `arena_room`), measured (ORT
1.32, CPU, managed sessions with prepacking off): with the env arena capped at 512 B, session creation succeeds and the first decode Run
needs more than the arena can give (768 B and up run all 16 steps): ORT's
own BFC arena error ("Available memory of ... is smaller than requested"),
no injection. Prints one JSON line for the test to read.
"""

from __future__ import annotations

import json
import sys
import tempfile

from refimpl.ort.governed import GovernedRuntime
from refimpl.ort.zoo import build_zoo, reporter_facts
from refimpl.topology import scaled_topology
from refimpl.verify.manager_hooks import abstract_ledger
from spec import sessions as S
from spec.errors import GovernorError
from spec.guards import GuardSet

CAP = 512


def main() -> None:
    out: dict = {}
    with tempfile.TemporaryDirectory() as d:
        zoo = build_zoo(d)
        f = reporter_facts(zoo["dec_wide"], 16, 4)
        topo = scaled_topology(512 * 1024, 4096, 4096, 0, CAP)
        rt = GovernedRuntime(topo, 256 * 1024, zoo, 16, 4)
        # Admission first: the model's measured peak (8,960 B) does not fit a 512 B arena, so the load is
        # refused, typed, with nothing changed (I8).
        before = rt.abstract(), abstract_ledger(rt.pmm)
        try:
            rt.execute(S.LoadModel("w", "dec_wide", f, f.loop_carried))
            out["refused"] = ""
        except GovernorError as e:
            out["refused"] = f"{type(e).__name__}: {e}"
        out["refused_unchanged"] = (rt.abstract(), abstract_ledger(rt.pmm)) == before
        rt.close()
        # To reach ORT's own cap, this runtime admits past the arena's room (the guard `arena_room` off,
        # its negative control's setting): what is tested below is ORT failing the Run, not admission.
        rt = GovernedRuntime(topo, 256 * 1024, zoo, 16, 4, guards=GuardSet.without("arena_room"))
        rt.execute(S.LoadModel("w", "dec_wide", f, f.loop_carried))
        rid = rt.execute(S.Open("w"))
        before, allocs, used = rt.abstract(), abstract_ledger(rt.pmm).allocations, rt.used()
        try:
            rt.execute(S.Decode(rid))
            out["error"] = None
        except GovernorError as e:
            out["error"] = f"{type(e).__name__}: {e}"
        out["unchanged"] = rt.abstract() == before and abstract_ledger(rt.pmm).allocations == allocs
        out["used_before"], out["used_after"] = used, rt.used()
        out["tokens"] = rt.kv.bundles[rid].tokens
        out["env_allocators"] = rt.models["w"].session is not None
        rt.close()
        out["used_closed"], out["cap"] = rt.used(), CAP  # the env arena's one lease outlives the runtime
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
