"""The layers and the patched modules the mutant registry (`refimpl.verify.mutants` and its parts) names, once."""

from __future__ import annotations

from spec.guards import Layer

R, S = Layer.REFIMPL, Layer.SPEC
# the governor (refimpl.manager) and its limits
GOV, ALW, MDEV = "refimpl.manager.ledger", "refimpl.manager.allowances", "refimpl.manager.devices"
MARB, MPRE = "refimpl.manager.arbitration", "refimpl.manager.pressure"
MTX, MBUN, LIM = "refimpl.manager.transactions", "refimpl.manager.bundles", "refimpl.manager.limits"
# the composed spec (spec.manager and its parts), the real-session spec
SMAN, SPARTS, STX = "spec.manager", "spec.manager_parts", "spec.manager_tx"
SVIEW, SES = "spec.manager_views", "spec.sessions"
# admission, hierarchy, real ORT sessions, the replay checker
ADB, ADC, ADE = "refimpl.admission.batching", "refimpl.admission.coresidency", "refimpl.admission.elastic"
HC, HW = "refimpl.hierarchy.core", "refimpl.hierarchy.worker_core"
HOLD, OGOV = "refimpl.ort.holders", "refimpl.ort.governed"
REP, MREP = "invariants.replay", "invariants.manager_replay"
