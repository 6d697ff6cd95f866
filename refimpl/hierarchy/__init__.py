"""The cooperative hierarchy with real processes (C10, I11): coordinator, workers, journal, OS ceiling.

`refimpl.hierarchy.coordinator` is the `ServingMemoryCoordinator` process;
`refimpl.hierarchy.worker` a worker process running `ProcessMemoryManager`
bounded by its delegated slice; `journal` the sqlite (WAL) journal a restarted
coordinator reconciles from; `osceiling` the OS ceiling (cgroup v2, else
/proc/meminfo, PSI where present); `protocol` the authenticated messages.
An independent implementation: nothing here calls `spec.hierarchy`.
"""
