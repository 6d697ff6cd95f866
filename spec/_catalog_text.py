"""Catalog prose: title, normative statement, rationale and evidence per ID.

Data only. The linking fields (predicates, guards, tests, status) live in
`spec/catalog.py`; this module holds the words, restated from the design.
"""

from __future__ import annotations

TEXT: dict[str, dict[str, str | tuple[str, ...]]] = {
    "C1": {
        "kind": "contract",
        "title": "Resource authority",
        "statement": (
            "Within one accounting scope each pool MUST have at most one canonical authority, and "
            "every view of that pool, UMA aliases included, MUST resolve to that authority. A "
            "register or bind whose identity does not match MUST fail before any use and MUST "
            "leave all state unchanged. Registering the same pool again MUST return the existing "
            "authority id instead of creating a second one. Two ledgers that can both grant over "
            "one pool are a violation."
        ),
        "rationale": (
            "When every holder sizes its own pool, none can lend idle capacity and none can be "
            "asked to give excess back, and budgets derived from unowned numbers drift from "
            "reality. One ledger per pool rules out stranded capacity and misstated sizes by "
            "construction."
        ),
        "evidence": (
            (
                "#857: KV sized for the maximum at load (1,610,612,736 B = 196,608 B/token x "
                "8,192) sat idle from token one while weights streamed 3,943,690,240 B/step"
            ),
            (
                "#853/#856: a weight size nobody owned (file size, not referenced extents) made "
                "the model look 2.00x its size, so every derived budget was wrong"
            ),
            (
                "Design #917 section 1: ORT bounds each pool [ort:pool-bounds](ort-claims.md#pool-bounds), but no holder "
                "can lend idle capacity and nothing can reclaim from a holder that holds more than it needs"
            ),
        ),
    },
    "C2": {
        "kind": "contract",
        "title": "Lease and allowance",
        "statement": (
            "Capacity MUST be reserved before it is allocated, and committing a reservation MUST "
            "yield a lease keyed (authority, allocation id, tier, bytes, role, holder) that is "
            "released exactly once. Every live allocation MUST be covered by a committed "
            "reservation with the same authority, tier and holder and at least as many bytes. "
            "Allowances own nothing and are counted on a separate axis: they MUST NOT add to "
            "`used`, and for each allowance mapped bytes plus reserved growth MUST be <= its "
            "limit."
        ),
        "rationale": (
            "Allocating first and accounting afterwards lets the ledger lag real use, and "
            "counting a permission to map already-charged bytes as a second charge double-counts "
            "them. Keeping leases and allowances apart keeps both the charge and the mapping "
            "bound exact."
        ),
        "evidence": (
            (
                "Design #917 section 6 (existing implementation): lease rules G1-G4: no new "
                "reservation pushes live leases over a limit, release happens exactly once and "
                "infallibly, the governor never frees, and a refusal leaves leases untouched"
            ),
            (
                "Design #917 section 7: on WDDM, host-backed GPU memory is one host lease plus "
                "one non-local allowance"
            ),
        ),
    },
    "C3": {
        "kind": "contract",
        "title": "Allocator and provider lifetime",
        "statement": (
            "ORT MUST define the allocator and provider ABI, implemented by the EP, host or "
            "embedder, and the manager MUST keep a provider and its context pinned while any "
            "handle, lease or view refers to them; removing a referenced context MUST be refused. "
            "On device loss, views MUST become invalid, new work MUST fail, the charge MUST stay "
            "unchanged and worker termination MUST begin. Delegated quota MUST stay charged until "
            "exit, and only confirmed termination may refund it, exactly once."
        ),
        "rationale": (
            "Without pinning, a provider can disappear under a live lease or view, and without "
            "knowing the last user an allocator can never be retired safely. Refunding at loss "
            "rather than at confirmed termination would let new grants overlap memory that may "
            "still be in use."
        ),
        "evidence": (
            (
                "Design #917 section 1: `RegisteredAllocator` leaks on purpose because ORT does "
                "not expose the last session user, so it cannot be retired safely [ort:no-last-user](ort-claims.md#no-last-user)"
            ),
            (
                "Design #917 section 6: device loss bumps the device generation, makes contexts "
                "and views terminal, stops admission, refunds nothing and terminates the worker"
            ),
            (
                "Design #917 section 11 items 2-3: provider registration before allocation, "
                "pinning, terminal device loss, and manager-backed handles with no leak"
            ),
        ),
    },
    "C4": {
        "kind": "contract",
        "title": "Capacity transaction",
        "statement": (
            "Every capacity change MUST run plan -> reserve -> provisional view -> execute -> "
            "commit, with quota negotiation and every wait finished before the first reservation "
            "is taken. Authorities MUST be reserved try-only in strictly increasing id order, "
            "nothing may wait while holding a reservation, and a view MUST be published only once "
            "all reservations are held. An abort MUST restore every authority and quota exactly, "
            "and the retry MUST keep the original submit sequence and priority as a zero-byte "
            "intent."
        ),
        "rationale": (
            "Waiting while holding part of a multi-authority grant invites deadlock and strands "
            "capacity, and a retry that loses its place can be overtaken forever. Ordered "
            "try-only reservation with exact rollback avoids both."
        ),
        "evidence": (
            (
                "Design #917 section 6: multi-authority phase 1 finds all needs and waits holding "
                "nothing; phase 2 try-reserves in id order, and a failure releases all, leaving "
                "zero-byte intents"
            ),
            (
                "Design #917 section 6: coordinator reclaim is a deadline-bounded ticket, never "
                "awaited inside a transaction"
            ),
            (
                "Design #917 section 11 item 10: refinement coverage for ordered, starvation-free "
                "multi-authority transactions"
            ),
        ),
    },
    "C5": {
        "kind": "contract",
        "title": "Reclaimable holder",
        "statement": (
            "Pressure MUST reach a holder as a cancellable ticket carrying target bytes, "
            "priority, deadline and generation, and only the holder MUST choose victims, drawn "
            "from its own unpinned idle bytes. The amount released MUST be >= 0; zero is a legal "
            "answer, after which the requester fails or defers and nothing is forced. Answers to "
            "stale or cancelled tickets MUST credit nothing. A kernel buffer that outlives one "
            "call and scales with weight size is a holder: it MUST be declared before allocation, "
            "in bytes actually allocated, and MUST be declinable to a working fallback."
        ),
        "rationale": (
            "Only the holder knows which of its bytes are safe to drop, and a governor that "
            "seized bytes itself could corrupt live state. An arena that shrinks only when a "
            "caller asks at the end of a Run cannot answer pressure that arrives mid-generation."
        ),
        "evidence": (
            (
                "#1056: kernels are holders; weight-scaled buffers are large (dequant ~8x packed, "
                "packed int4 ~2x, transpose 1x f32), and one estimate was 40% of truth, worse "
                "than no report"
            ),
            (
                "Design #917 section 1: the BFC arena shrinks only on a caller's end-of-Run "
                "request [ort:arena-shrink](ort-claims.md#arena-shrink), never driven by another holder's demand"
            ),
            (
                "Design #917 section 6 (existing implementation): each responder is called once "
                "with the remaining shortfall, then one retry"
            ),
        ),
    },
    "C6": {
        "kind": "contract",
        "title": "Model memory view",
        "statement": (
            "A model MUST consume memory through a contiguous, blocks-plus-table, indexed or "
            "opaque view that stays valid for the whole consuming execution: while a view is "
            "bound, its allocation MUST be live and its mapping generation MUST NOT change until "
            "that execution ends. The view kind MUST be chosen as follows: flat VMM when state is "
            "flat and VMM is efficient; blocks-plus-table when tables are supported and there is "
            "high concurrency, fine-grained prefix COW or a coarse granule; otherwise static "
            "contiguous, sized for the worst case at admission with no reclaim or lending."
        ),
        "rationale": (
            "A kernel reading a view whose backing is freed or remapped during its execution "
            "reads garbage. Fixing the generation per execution lets the governor remap between "
            "executions without fencing inside one."
        ),
        "evidence": (
            (
                "Design #917 section 4: view selection (flat VMM, blocks-plus-table, else static "
                "contiguous)"
            ),
            (
                "Design #917 section 7: static contiguous takes the worst case at admission with "
                "no reclaim or lending"
            ),
            (
                "Design #917 section 9: qwen14b-zp fp16 KV is 196,608 B/token, ~10.67 tokens per "
                "2 MiB"
            ),
        ),
    },
    "C7": {
        "kind": "contract",
        "title": "Topology and capability",
        "statement": (
            "The topology MUST report pools, aliasing, capacity, granularity, links, allocator "
            "capabilities, supported views, resident-versus-host read bandwidth and the aggregate "
            "host-mapped read capacity, that is the distinct host-mapped bytes a device may read "
            "per execution before its results stop being trustworthy. Per execution, distinct "
            "host-mapped bytes MUST be <= the reported capacity, and an unreported capacity MUST "
            "count as zero; the capacity MUST be measured per platform (later revision). Rounding "
            "MUST use the reported granule. Unknown oversubscription behaviour MUST be read as "
            "'fails' and unknown enforcement as 'does not enforce' (later revision)."
        ),
        "rationale": (
            "Host-mapped reads are far slower than resident ones, and past a platform-specific "
            "volume a consumer GPU silently computes on stale data, so an unmeasured default "
            "yields wrong tokens rather than errors."
        ),
        "evidence": (
            "#877/#880: host-mapped int4 GEMV reads ~5.6 GB/s vs ~100-133 resident",
            (
                "#912: on a WDDM consumer GPU ~0.44-0.65 GB/step is the limit; 32 cold weights "
                "read right, 48 silently collapse 16 tokens to 3; a 256 MiB safe cap gave 0.73 vs "
                "WDDM 7.84"
            ),
            (
                "#925/#936: H200 Linux shows no ceiling up to 6.795 GB/step (67 vs ~8.5 tok/s); "
                "the opt-in default is 256 MiB on Windows and 2 GiB elsewhere"
            ),
        ),
    },
    "C8": {
        "kind": "contract",
        "title": "Reconfiguration and observability",
        "statement": (
            "Snapshots MUST report used, available, oversubscribed, per-role, reclaimable and "
            "unattributed figures, all as charge, with available = max(0, limit - used - growth "
            "reserved) and oversubscribed = max(0, used - limit). Policy rates MUST be "
            "byte-weighted, not count-weighted. Lowering a limit MUST run prepare -> reclaim -> "
            "commit: if it fails, the old limit MUST remain and the reclaims already done MUST be "
            "listed; if it succeeds, used MUST be <= the new limit."
        ),
        "rationale": (
            "A count-based hit rate can improve while the bytes moved get worse, so policy tuned "
            "on counts optimises the wrong quantity. A lowering that fails halfway must neither "
            "leave an unreachable limit in force nor hide what it already reclaimed."
        ),
        "evidence": (
            "#869: count hit rate rose 57.09% -> 81.31% while the byte gap grew 1.78x -> 2.30x",
            (
                "#837/#886: 11% of page-ins carry 44.6% of bytes; ~90% of the recoverable gap is "
                "admission"
            ),
            (
                "Design #917 section 6 (existing implementation): an engine lowering a limit "
                "evicts background KV first, then paused, then running, and interactive last"
            ),
            (
                "Design #917 section 6 (existing implementation, a deviation from this contract, not "
                "evidence for it): a limit lowered below use revokes nothing and shows as "
                "oversubscription; this contract keeps the old limit instead, and the spec refuses to "
                "commit such a lowering (CommitLimit)"
            ),
        ),
    },
    "C9": {
        "kind": "contract",
        "title": "Persistent state bundle",
        "statement": (
            "In managed mode a model MUST declare every loop-carried state with its lifetime, "
            "growth, view and checkpoint/fork/migrate/recompute behaviour, and the declared set "
            "MUST cover all loop-carried state. Otherwise it MUST be rejected or run in reported "
            "compatibility, with unattributed bytes >= the inferred state and prefix reuse and "
            "migration switched off. Bundles cover dense, windowed or latent KV, linear-attention "
            "summaries, SSM state plus a conv ring (committed atomically together), hybrids as "
            "one bundle and speculative COW branches; descriptors MUST declare capabilities, not "
            "model names."
        ),
        "rationale": (
            "State the ledger cannot see is neither charged nor carried along, so sharing, "
            "forking or migrating a bundle that misses part of it corrupts generation while the "
            "figures look correct."
        ),
        "evidence": (
            "Design #917 section 4: bundle forms and capability-based descriptors",
            (
                "Design #917 section 7: prefix-cache entries are immutable, content-addressed "
                "complete bundles; hybrid KV-only hits recompute"
            ),
            "Design #917 section 11 item 6: APIs declaring C9 bundles and C6 views",
        ),
    },
    "C10": {
        "kind": "contract",
        "title": "Cooperative hierarchy",
        "statement": (
            "Quota MUST be delegated only to authenticated workers the coordinator spawned, and "
            "worker quotas MUST sum to <= the serving quota. A worker awaiting quota MUST hold no "
            "open local reservation, and on defer it MUST return uncommitted quota so that its "
            "quota equals its committed bytes, while the coordinator keeps the deferred work's "
            "submit identity, priority and aging as an intent. Heartbeat failure MUST fence and "
            "terminate the worker, old-epoch claims MUST be rejected, quota MUST stay charged "
            "until exit, and returning quota MUST be idempotent across a coordinator restart. A "
            "worker's budget MUST be min(delegated quota, OS ceiling)."
        ),
        "rationale": (
            "Without fencing and charge-until-exit, a hung or partitioned worker could keep using "
            "quota already handed to someone else; without returning uncommitted quota on defer, "
            "a waiting worker strands capacity that others need."
        ),
        "evidence": (
            (
                "Design #917 section 7: with a coordinator, quotas sum <= serving quota, budget = "
                "min(delegated, OS ceiling), fence on heartbeat loss, charge until exit"
            ),
            (
                "Design #917 section 11 item 5: authenticated workers, delegated quotas, epoch "
                "fencing, exit reclaim, aggregate snapshots"
            ),
        ),
    },
    "I1": {
        "kind": "invariant",
        "title": "Single charge per scope",
        "statement": (
            "Each physical identity MUST be charged once per scope: a parent quota and the child "
            "lease carved from it are linked, never two grantable copies. An authority's charge "
            "MUST be the sum over distinct physical allocation ids, with aliases adding 0, and "
            "process quota used MUST equal live leases plus delegation slices. Mapped bytes MAY "
            "exceed physical bytes."
        ),
        "rationale": (
            "Counting an alias or a parent and its child twice makes the process look bigger than "
            "it is and refuses work that fits; counting too little lets two grants spend the same "
            "bytes."
        ),
        "evidence": (
            (
                "Design #917 section 7: on unified memory, views alias one authority and moving "
                "to host relabels the same id"
            ),
            (
                "Design #917 section 7: on WDDM, host-backed GPU memory is one host lease plus "
                "one non-local allowance"
            ),
        ),
    },
    "I2": {
        "kind": "invariant",
        "title": "Charge before commit",
        "statement": (
            "Every allocate or map MUST come after a grant for its reservation. An allocation "
            "that has already happened MUST still be recorded, even when recording pushes used "
            "above the limit, and the snapshot MUST then report oversubscribed > 0."
        ),
        "rationale": (
            "Granting after the fact admits memory that was never checked against the budget, "
            "while refusing to record a completed allocation hides real use and makes the ledger "
            "lie."
        ),
        "evidence": (
            (
                "Design #917 section 6 (existing implementation): G1 no new reservation pushes "
                "live leases over a limit, yet committed memory is still recorded"
            ),
        ),
    },
    "I3": {
        "kind": "invariant",
        "title": "Honest compatibility",
        "statement": (
            "Managed mode MUST NOT leave the authority silently. Compatibility or declined mode, "
            "including inferred compatibility such as the Windows default that stops managing "
            "weights that do not fit, MUST be reported: the snapshot MUST say 'not enforced' and "
            "MUST show no binding limit. An EP MUST either enforce the budget or declare up front "
            "that it cannot (later revision)."
        ),
        "rationale": (
            "Declining to manage is often the right outcome, but a limit shown as binding when "
            "nothing enforces it misleads operators and every budget computed from it."
        ),
        "evidence": (
            (
                "#864: managed copying ran 30x slower than OS demand paging (0.18 vs WDDM paging "
                "5.53 tok/s)"
            ),
            (
                "#874: quiet A/B WDDM 7.18 vs managed 0.86 tok/s (8.3x); defaulting to decline "
                "recovered ~100x end-to-end (WDDM 8.09 / 7.78 vs managed 0.11 tok/s)"
            ),
            "#955: 7.8 GiB of weights shown as 258.6% of a limit that was never applied",
        ),
    },
    "I4a": {
        "kind": "invariant",
        "title": "Physical ownership",
        "statement": (
            "Every physical allocation MUST be provisional, committed to exactly one holder, or "
            "terminally released, and MUST move only along the section 6 lifecycle: provisional "
            "-> live -> (queued -> settling) -> released, quarantined, device-lost or "
            "context-terminated. A newly issued PhysicalAllocationId MUST NOT be in the set "
            "already issued, even when an address is reused, and an allocation's holder MUST NOT "
            "change after commit."
        ),
        "rationale": (
            "A reused id or a holder that changes lets a stale release, view or refund land on "
            "the wrong allocation."
        ),
        "evidence": (
            (
                "Design #917 section 6: lifecycle provisional -> live -> (queued -> settling) -> "
                "released | quarantined | device-lost | context-terminated; ids never reused"
            ),
            (
                "Design #917 section 2: PhysicalAllocationId is process-unique and never reused, "
                "even if an address is"
            ),
        ),
    },
    "I4b": {
        "kind": "invariant",
        "title": "Allowance ownership",
        "statement": (
            "Each allowance MUST keep its own free, reserved and committed state and MUST never "
            "exceed the charged capacity behind it: mapped + growth reserved <= limit, and the "
            "limits over one capacity MUST sum to <= that capacity. A transfer of n bytes MUST "
            "lower one limit by n and raise the other by n, leaving `used` unchanged. Growth MUST "
            "draw first on the holder's own unused allowance, then on unassigned capacity, then "
            "on transfers from other holders by reclaim priority, and a short reclaim MUST roll "
            "back the whole grant."
        ),
        "rationale": (
            "If an allowance could outgrow the charge behind it, or a transfer moved charge, "
            "mappings would claim bytes that no lease pays for."
        ),
        "evidence": (
            (
                "Design #917 section 6: growth order own allowance -> unassigned -> transfers by "
                "reclaim priority (requester excluded); a short reclaim rolls back the whole "
                "grant; transfers move limits, not charge"
            ),
        ),
    },
    "I5": {
        "kind": "invariant",
        "title": "Failure scope",
        "statement": (
            "A failure before commit MUST restore everything, so the snapshot after an abort "
            "equals the snapshot before. A disagreement after commit MUST poison the smallest "
            "rebuildable unit: a state/view mismatch poisons the engine, and shared-ledger "
            "corruption poisons the worker, after which later grants fail. Failing closed is "
            "allowed: a rollback that cannot be undone keeps its residual charge as quarantined, "
            "and ownership that cannot be identified keeps its reservations as leaked."
        ),
        "rationale": (
            "A partial rollback leaks or double-frees capacity, poisoning too much discards work "
            "that could survive, and refunding bytes not proven free can hand live memory to "
            "another holder."
        ),
        "evidence": (
            (
                "Design #917 section 6: settlement refunds only the released part of a quarantine "
                "(never a rounded charge by nominal length), nothing on device loss until "
                "termination is confirmed, and fails closed when handles drop with no terminal "
                "outcome"
            ),
            (
                "Design #917 section 6 (existing implementation): any failure in the allocation "
                "transaction rolls back exactly"
            ),
        ),
    },
    "I6": {
        "kind": "invariant",
        "title": "Live-state safety",
        "statement": (
            "An authority MUST NOT take bytes itself: every decrease in charge MUST be the owning "
            "holder's own action. A victim MUST be neither pinned nor in flight."
        ),
        "rationale": (
            "Only the holder knows what is safe to evict, and reclaiming bytes that are still "
            "being read corrupts results without any error."
        ),
        "evidence": (
            (
                "#944/#945: a weight-lending bug where retaining lm_head corrupts decode; a "
                "size-based 2.371 GB pin is exact"
            ),
            (
                "Design #917 section 3: the governor grants and issues pressure but never takes "
                "bytes or picks victims"
            ),
            "Design #917 section 11: weight lending stays blocked until token identity is gated",
        ),
    },
    "I7": {
        "kind": "invariant",
        "title": "Non-blocking governance",
        "statement": (
            "A waiter MUST hold no lock and no reservation. The allocator callback path MUST fail "
            "fast and MUST never be handed 'pending' (existing implementation: poll once and "
            "treat pending as refusal). For each ticket, at most one of release, cancel-granted "
            "and timeout-granted MUST credit the grant."
        ),
        "rationale": (
            "Waiting under a lock or reservation can deadlock the governor against the very "
            "holders it is asking to reclaim, and crediting one grant twice creates capacity from "
            "nothing."
        ),
        "evidence": (
            (
                "Design #917 section 6: exactly one of release, cancel-granted, timeout-granted "
                "credits a grant; waiters park per ticket, never on the ledger lock"
            ),
            (
                "Design #917 section 6 (existing implementation): the caller enforces timeout "
                "deadlines"
            ),
        ),
    },
    "I8": {
        "kind": "invariant",
        "title": "Bytes are authoritative",
        "statement": (
            "Admitted bytes MUST come from geometry and queried granularity over the referenced "
            "extents, not the size of the containing file: admitted = roundup(referenced, "
            "granule) + transient peak. Padding a blob with dead space MUST NOT change the "
            "admitted figure. Declared figures MUST be the bytes actually allocated, with the "
            "per-run transient peak and granularity reported by InferenceSession/EP."
        ),
        "rationale": (
            "A size taken from the wrong source corrupts every budget derived from it, and an "
            "under-estimate is worse than none because admission trusts it."
        ),
        "evidence": (
            (
                "#853/#856/#927: blob 16,652,453,888 B vs referenced 8,329,906,176 B (dead prefix "
                "8,322,547,712 B) made the model look 2.00x its size; plan 16,653,143,582 vs "
                "8,330,595,870; margin 0.599 vs ~8.9 GB (14x off), caught as 4.11 GB/step sat "
                "under its 10.53 floor"
            ),
            (
                "#1056: one kernel buffer estimate was 40% of truth; under-reporting is worse "
                "than none"
            ),
            (
                "Design #917 section 11 item 8: InferenceSession/EP reporting of per-run "
                "transient peak and granularity"
            ),
        ),
    },
    "I8b": {
        "kind": "invariant",
        "title": "Charge is not residency",
        "statement": (
            "Charged, physical, mapped and unattributed bytes MUST be kept as separate figures, "
            "and ledger figures MUST be labelled as charge. OS demotion MUST change only an "
            "observed-residency field, and every residency claim MUST name its source and "
            "conditions."
        ),
        "rationale": (
            "On WDDM the OS can demote counted granules to system memory without telling anyone, "
            "so a charge presented as residency overstates what is really on the device."
        ),
        "evidence": (
            "#863: 9,984 MiB committed on an 8,188 MiB card, with only ~7,942 resident",
            (
                "Design #917 section 7: on WDDM `SharedSystemMemory` is a maximum, not free, and "
                "a no-spill setting bounds only our admission"
            ),
        ),
    },
    "I8c": {
        "kind": "invariant",
        "title": "Elastic reservations",
        "statement": (
            "Future-state capacity MUST be held as current occupancy plus a guaranteed path to "
            "the maximum: weights budget + KV committed + headroom <= device budget, and weights "
            "budget >= the static baseline (device budget - KV bytes/token x max context). From "
            "every reachable state, KV MUST be able to grow bucket by bucket to its maximum by "
            "reclaiming from weights through the production reclaim path, with zero "
            "oversubscription at every step. KV growth MUST reserve its copy peak, (old + new "
            "tokens) x bytes/token, at admission."
        ),
        "rationale": (
            "Sizing KV for the maximum at load strands capacity that weights could use, while "
            "lending it without a guaranteed way back lets a long context fail mid-generation."
        ),
        "evidence": (
            (
                "#857: the static split reserved 1,610,612,736 B of KV at load (196,608 x 8,192), "
                "leaving a 6,116,140,442 B weight budget, while a 16-token run committed only "
                "402,653,184 B; weights streamed 3,943,690,240 B/step (372 page-ins, hit 57.09%, "
                "5,248 evictions) and a 2.75x streaming-floor reduction was available"
            ),
            (
                "#857/#869: at ctx 1024 the budget was 7,525,426,586 and streaming 1,850,486,784 "
                "B/step (2.13x less, 162 page-ins, hit 81.31%)"
            ),
            (
                "#866: the elastic split cut streaming 1.68x (3,943,690,240 -> 2,349,010,944 "
                "B/step; page-ins 188, hit 78.32%, evictions 2,672), weight budget 7,139,550,618 "
                "(512 MiB default headroom) or 7,676,421,530 (none), mapped 5,662,310,400 -> "
                "6,406,799,360, peak committed 7,725,907,968 within the 7,726,753,178 B device "
                "budget, KV floor ~50 MB (derived 50,331,648 = 256 tokens); 0.72-1.42 tok/s vs "
                "WDDM 7.42"
            ),
        ),
    },
    "I9": {
        "kind": "invariant",
        "title": "Mapping synchronisation",
        "statement": (
            "Views MUST be keyed (allocation id, mapping generation). A remap MUST bump the "
            "generation and MUST NOT proceed while any user of the allocation is active, and "
            "every active user MUST observe the current generation."
        ),
        "rationale": (
            "A remap under an active reader lets it see a half-changed mapping, and an "
            "unversioned view cannot tell it is stale."
        ),
        "evidence": (
            (
                "Design #917 section 2: mapping generation is a monotone version of views over "
                "one allocation; views keyed (id, generation)"
            ),
            (
                "Design #917 section 6: device loss bumps the device generation and makes views "
                "terminal"
            ),
        ),
    },
    "I10": {
        "kind": "invariant",
        "title": "State-complete commit",
        "statement": (
            "A request's KV, recurrent and conv state, sampler/search state and progress MUST "
            "commit or roll back as one unit. After each step every part of the request MUST "
            "carry the same version."
        ),
        "rationale": (
            "Mixed versions, such as KV advanced while sampler state was not, produce wrong "
            "tokens that look valid."
        ),
        "evidence": (
            "Design #917 section 7: continuous batching commits atomically (I10)",
            "Design #917 section 4: SSM state and its conv ring are atomic together (C9)",
        ),
    },
    "I11": {
        "kind": "invariant",
        "title": "Honest enforcement scope",
        "statement": (
            "Guarantees MUST cover only participants and their delegated quotas. No pressure "
            "ticket may target a process outside the scope; usage by outside programs MUST only "
            "lower the OS ceiling and MUST never be treated as a holder."
        ),
        "rationale": (
            "The governor cannot reclaim from programs that do not participate, so treating them "
            "as holders would promise capacity it cannot deliver."
        ),
        "evidence": (
            "Design #917 section 11 non-goals: reclaiming non-participating applications",
            (
                "Design #917 section 7: the worker's OS signal is a safety floor: stop admitting, "
                "notify, emergency reclaim only if failure is imminent"
            ),
        ),
    },
    "I12": {
        "kind": "invariant",
        "title": "Completion-feasible admission",
        "statement": (
            "Every admitted request and model MUST keep a path to its next release or completion, "
            "and waiting work MUST hold zero scarce state. In continuous-batching KV admission a "
            "request peaks at prompt + output - 1 entries, remaining need = peak - held, and a "
            "request MUST be admitted or advanced only if its remaining need fits in free = "
            "capacity - total held, so every non-terminal state has an unfinished request whose "
            "remaining need fits. In multi-model co-residency a resident unpinned model MUST be "
            "evicted only after serving at least one request since loading and only when a "
            "pending non-resident model does not fit; pinned models MUST stay resident and "
            "service MUST happen only while resident. The checks MUST assert the real properties "
            "(capacity, conservation, peaks, progress, no wasted residency), not vacuous "
            "arithmetic."
        ),
        "rationale": (
            "Without the KV guard prefills fill the pool and no request can finish; without "
            "retire-before-evict models thrash and none is ever served."
        ),
        "evidence": (
            (
                "Design #917 section 5: upstream, two such checks were vacuous arithmetic; the "
                "real properties must be asserted"
            ),
            (
                "Design #917 section 5: negative controls: disabling KV admission or "
                "retire-before-evict must yield a counterexample"
            ),
            (
                "Design #917 section 11 item 9: completion-feasible admission and "
                "eviction-progress protection"
            ),
        ),
    },
    "I13": {
        "kind": "invariant",
        "title": "Starvation-free arbitration",
        "statement": (
            "In process and coordinator scopes, deferred work MUST keep its submit identity, "
            "priority and bounded aging as a zero-byte intent. For a pending request that fits "
            "after reclaim, the number of rounds in which later submissions are granted ahead of "
            "it MUST be bounded, so equal- or lower-priority newcomers MUST NOT overtake it "
            "indefinitely."
        ),
        "rationale": (
            "A large request can be passed forever by a stream of smaller newcomers that always "
            "fit; aging lets returned capacity accumulate for it instead."
        ),
        "evidence": (
            "Design #917 section 5 (existing implementation): aging cap of 8 rounds",
            (
                "Design #917 section 6 (existing implementation): matured pendings go first, FIFO "
                "by submit sequence, and greedy granting stops at a matured misfit so returned "
                "capacity accumulates for it"
            ),
            (
                "Design #917 section 10: upstream models check safety only; bound I13 with "
                "explicit tests"
            ),
        ),
    },
}
