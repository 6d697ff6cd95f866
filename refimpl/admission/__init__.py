"""Mutable admission schedulers: KV batcher (I12), co-residency scheduler (I12), elastic KV split (I8c).

The implementations `spec.admission` specifies, written independently: mutable
records, their own guard checks, and an `abstract()` refinement mapping back
to the spec's frozen states. They share only vocabulary (errors, actions,
arithmetic) with the spec, never its transition code. No ORT here; the
real-session elastic path lives in `refimpl.ort.governed`.

Capacity is the `ProcessMemoryManager`'s (issue #10): each model is built on
a manager and an authority (by default a fresh manager with one authority of
the given capacity), every byte it admits is a lease of its holder there,
its "fits" decisions read the authority's snapshot, and `abstract()` reads
the manager's allocations by holder and role. No model keeps a capacity
figure or byte books of its own.

    seat.py          a holder's seat on one authority (leases, snapshot, reading allocations)
    batching.py      KvBatcher: continuous batching over one KV authority
    coresidency.py   CoResidencyScheduler: models sharing one device authority
    weight_cache.py  WeightCache: borrowed weights answering pressure tickets
    elastic.py       ElasticSplit: one request's KV grows from a floor, weights yield
"""

from refimpl.admission.batching import KvBatcher
from refimpl.admission.coresidency import CoResidencyScheduler
from refimpl.admission.elastic import ElasticSplit, ReclaimableHolder
from refimpl.admission.weight_cache import WeightCache

__all__ = ["ReclaimableHolder", "KvBatcher", "CoResidencyScheduler", "ElasticSplit", "WeightCache"]
