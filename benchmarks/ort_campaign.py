"""Only the `ort` checker of `ortmem verify`: its campaign, negative controls and mutation controls.

    python benchmarks/ort_campaign.py [quick|thorough] [--json PATH]

Runs exactly the jobs `ortmem verify` runs for the real-ORT checker (the same
`refimpl.verify._job`, one after another in this process), so the ORT part
can be checked without the other checkers: the campaign's accepted actions
and events (decodes, KV growths, reclaims, arena shrinks, decodes on cache
replicas, identical-output checks), and whether every ORT guard's control
and every ORT mutant found its harm. Exit status 1 if any did not, or if the
campaign failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from refimpl.mutants import MUTANTS
from refimpl.verify import _job
from spec.guards import GUARDS, Layer


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("profile", nargs="?", choices=("quick", "thorough"), default="quick")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args()
    out: dict = {"profile": args.profile, "controls": {}, "mutants": {}}
    t0 = time.perf_counter()
    run = _job("campaign", "ort", None, args.profile)
    if isinstance(run, str):
        print(f"ort campaign FAILED: {run}")
        return 1
    s = run.stats
    out["campaign"] = {"examples": s.examples, "steps": s.steps, "accepted": s.accepted, "seconds": round(s.seconds, 1),
                       "accepted_by_action": dict(sorted(s.accepted_by_action.items())),
                       "events": dict(sorted(s.events.items())), "rejected": dict(sorted(s.rejected.items()))}
    print(f"ort campaign ({args.profile}): {s.examples} examples, {s.steps} steps, {s.accepted} accepted in "
          f"{s.seconds:.1f} s")
    print(f"  accepted_by_action: {out['campaign']['accepted_by_action']}")
    print(f"  events: {out['campaign']['events']}")
    ok = True
    for g in (g for g in GUARDS if g.model == "ort"):
        for layer in Layer:
            r = _job("control", g.name, layer.value, args.profile)
            out["controls"][f"{g.name}/{layer.value}"] = {"found": r.found, "violated": r.violated, "clause": r.clause}
            ok &= r.found
            print(f"  control {g.name}/{layer.value}: {'found' if r.found else 'NOT FOUND'} {r.clause}")
    for m in (m for m in MUTANTS.values() if m.model == "ort"):
        r = _job("mutant", m.name, m.layer.value, args.profile)
        found = not isinstance(r, str) and r.found
        out["mutants"][m.name] = {"found": found, "clause": None if isinstance(r, str) else r.clause}
        ok &= found
        print(f"  mutant {m.name}: {'found' if found else 'NOT FOUND'} {out['mutants'][m.name]['clause']}")
    out["ok"], out["seconds"] = ok, round(time.perf_counter() - t0, 1)
    print(f"ort checker: {'OK' if ok else 'FAILED'} in {out['seconds']} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
