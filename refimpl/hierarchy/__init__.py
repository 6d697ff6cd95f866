"""The cooperative hierarchy with real processes (C10, I11): coordinator, workers, journal, OS ceiling.

`coordinator` is the `ServingMemoryCoordinator` process (its loop over sockets
and pidfds), `service` its transport-free decisions, `core` its ledger,
`journal` the audited sqlite journal a restarted coordinator resumes from;
`worker` a worker process and `worker_core` its rules over a
`ProcessMemoryManager` bounded by its delegated slice; `zygote` forks workers
from a process that never holds a key; `protocol` (pure) and `transport`
(sockets) the authenticated wire; `osceiling` the OS ceiling (cgroup v2, else
/proc/meminfo, PSI where present); `driver` the operator's handle; `serve`
`ortmem serve`. An independent implementation: nothing here calls
`spec.hierarchy`. What it assumes and does under faults: docs/hierarchy.md.
"""
