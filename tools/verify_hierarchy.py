"""Usage: PYTHONPATH=. python tools/verify_hierarchy.py [out.json]. verify's phases restricted to the hierarchy checker (no CLI option for one checker): campaign, controls,
mutants, explorer; then refimpl.verdict.judge on C10 and I11. CrossHair is not run here (R5 reported apart)."""
import json, sys, time
from invariants.clauses import Coverage
from refimpl import verify as V
from refimpl.checkers import CHECKERS
from refimpl.mutants import MUTANTS
from refimpl.verdict import guards_of, judge
from spec.guards import GUARDS, Layer
t0 = time.time()
b = V.PROFILES["quick"]
run = V._job("campaign", "hierarchy", None, "quick")
assert not isinstance(run, str), run
print("campaign", run.stats.examples, "examples", run.stats.steps, "steps", run.stats.accepted, "accepted",
      round(time.time() - t0), "s", flush=True)
controls = [V._job("control", g.name, l.value, "quick") for g in GUARDS if g.model == "hierarchy" for l in Layer]
muts = [V._job("mutant", m.name, m.layer.value, "quick") for m in MUTANTS.values() if m.model == "hierarchy"]
h = CHECKERS["hierarchy"]
excon = {g.name: h.explore(g, b) for g in GUARDS if g.model == "hierarchy"}
ex = h.explore(None, b)
print("explorer", ex.found if hasattr(ex, "found") else ex, round(time.time() - t0), "s", flush=True)
out = {}
for id in ("C10", "I11"):
    cov = Coverage(); cov.add(run.stats.coverage)
    j = judge(id, "quick", cov, guards_of(id), controls, muts, excon, False, "CrossHair not run in this script")
    print(id, j.status, "checks", j.checks)
    for r in j.reasons: print("   ", r)
    for c in j.coverage:
        print(f"    {c.predicate}.{c.clause}: evaluated {c.evaluated}, case {c.antecedent_held}, failed by {', '.join(c.failed_by)}")
    out[id] = {"status": j.status, "reasons": j.reasons, "coverage": [(c.predicate, c.clause, c.evaluated, c.antecedent_held, c.failed_by) for c in j.coverage]}
print("controls found", sum(c.found for c in controls), "/", len(controls), "; mutants killed", sum(m.found for m in muts), "/", len(muts))
json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "hierarchy-verdict.json", "w"), indent=1, default=list)
print("seconds", round(time.time() - t0))
