"""The mutant registry: named, realistic bugs, each expected to make a clause of its IDs fail.

Like the guard registry, but with every guard on: each mutant is a small
source patch (`invariants.mutation.Mutant`) the verify harness applies to a
copy of one module for one control run. The governor's own code carries no
bug switch. A mutant whose snippet no longer occurs exactly once in its
module is stale and fails `ortmem verify` (it would otherwise test nothing).

Each entry reads as a bug report: what a plausible implementation mistake
looks like, and which ID's clauses must notice it; its snippets are the few
words (or lines) the bug changes, as many as make them unique in the module.
`model` names the checker that runs it (`refimpl.verify.checkers`). The
parts (`refimpl.verify.mutants_*`, each saying what it holds) are spliced
into `MUTANTS` below; `refimpl.verify.mutants_paths` names the modules they
all patch.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import ADB, ADC, ADE, ALW, GOV, HC, HOLD, HW, LIM, MDEV, OGOV, R, S, SES
from refimpl.verify.mutants_pressure import PRESSURE_MUTANTS
from refimpl.verify.mutants_lifetime import LIFETIME_MUTANTS
from refimpl.verify.mutants_manager import MANAGER_MUTANTS
from refimpl.verify.mutants_protocols import PROTOCOL_MUTANTS
from refimpl.verify.mutants_tx import TX_MUTANTS
from refimpl.verify.mutants_replay import REPLAY_MUTANTS
from refimpl.verify.mutants_views import VIEW_MUTANTS

__all__ = ["MUTANTS"]

_ALL: tuple[Mutant, ...] = (
    # --- ledger (refimpl.manager.ledger, .allowances) --------------------------------
    Mutant("commit_keeps_reserved_charge", ("I1",), "ledger", R, GOV,
           "self._credit(rec, rec.charge - nbytes)  # the excess is refunded",
           "rec.charge = nbytes  # the excess is kept charged",
           "commit publishes fewer bytes than reserved but never refunds the excess to the ledger"),
    Mutant("release_without_refund", ("I1",), "ledger", R, GOV, "self._credit(rec, rec.charge)", "rec.charge = 0",
           "releasing a lease drops the record but leaves its bytes charged"),
    Mutant("quarantine_refunds_everything", ("I1",), "ledger", R, GOV,
           "self._credit(rec, released)", "rec.auth.used -= rec.charge - released\n        self._credit(rec, released)",
           "a partial settlement refunds the whole charge while the residual stays on the record"),
    Mutant("limit_check_off_by_request", ("I2",), "ledger", R, GOV, "+ nbytes > a.limit", "> a.limit",
           "the limit check compares what is used, not what the grant would make used"),
    Mutant("quota_ignored", ("I1",), "manager", R, LIM,
           # tests/test_explore_quota.py derives its spec twin from these lines, one indent less
           "        return a.limit - a.used if left is None else min(a.limit - a.used, left)\n",
           "        return a.limit - a.used\n",
           "a grant's room is its ledger's free bytes alone: tickets, tries, grows, transactions pass the tier quota"),
    Mutant("alias_keeps_own_ledger", ("I1",), "ledger", R, GOV,
           'if tier is not a.tier and self._guards.on("tier_match")',
           'a = self._auth(authority)\n        if tier is not a.tier and self._guards.on("tier_match")',
           "a reservation through an alias is charged to the alias instead of the canonical ledger"),
    Mutant("commit_grows_lease", ("C2",), "ledger", R, GOV,
           "        rec.nbytes = rec.charge = nbytes\n",
           "        rec.nbytes = rec.charge = nbytes\n        rec.reserved = min(rec.reserved, nbytes) - 1 or 1\n",
           "commit shrinks the recorded reservation below the published lease"),
    Mutant("commit_keeps_reserved_size", ("C2",), "ledger", R, GOV,
           "        rec.nbytes = rec.charge = nbytes\n", "        rec.charge = nbytes\n",
           "commit charges the published bytes but keeps the lease recorded at the reserved size"),
    Mutant("reissue_ids_after_release", ("I4a",), "ledger", R, GOV,
           "            self._next_alloc += 1\n",
           "            self._next_alloc += 1\n            if aid > 1 and aid - 1 not in self._allocs:\n"
           "                aid, self._next_alloc = aid - 1, aid\n",
           "after a release the id counter hands out the retired id again"),
    Mutant("device_loss_refunds_at_once", ("I6", "C3"), "ledger", R, MDEV,
           "rec.state = AllocState.DEVICE_LOST",
           "rec.state = AllocState.DEVICE_LOST\n                    rec.auth.used -= rec.charge\n"
           "                    rec.charge = 0",
           "device loss refunds the holders' charge at once instead of at confirmed termination (C3's harm, as the "
           "guard loss_keeps_charge names it: the composed predicates judge a loss's charge by C3)"),
    Mutant("transfer_backwards", ("I6", "I4b"), "ledger", R, ALW,
           "src.limit -= nbytes\n        dst.limit += nbytes", "src.limit += nbytes\n        dst.limit -= nbytes",
           "a transfer moves limit the wrong way: the caller takes it from another holder's allowance (I6), "
           "and a target's limit can fall below what it holds (I4b)"),
    Mutant("map_keeps_reservation", ("I4b",), "ledger", R, ALW,
           "        w.reserved = max(0, w.reserved - nbytes)\n", "",
           "mapping allowance bytes leaves them counted as reserved too"),
    Mutant("close_foreign_allowance", ("I6",), "ledger", R, ALW,
           "def _close(self, holder: int, allowance: int) -> None:\n        w = self._owned_allow(holder, allowance)",
           "def _close(self, holder: int, allowance: int) -> None:\n        w = self._allow(allowance)",
           "closing an allowance skips the owner check: any holder can close another holder's allowance"),
    Mutant("close_forgets_promise", ("I4b",), "ledger", R, ALW,
           "w.auth.promised -= w.limit", "w.auth.promised -= 2 * w.limit",
           "closing an allowance returns twice its limit to the pool's promise budget"),
    Mutant("transfer_mints_limit", ("I4b",), "ledger", R, ALW,
           "src.limit -= nbytes\n        dst.limit += nbytes", "dst.limit += nbytes",
           "a transfer adds limit to the target without taking it from the source"),
    Mutant("identity_check_ignores_capacity", ("C1",), "ledger", R, GOV,
           "(existing.tier is not tier or existing.capacity != capacity)", "(existing.tier is not tier)",
           "re-registering a pool with another capacity binds it to the existing ledger silently"),
    Mutant("available_ignores_growth", ("C8",), "ledger", R, "spec.arith",
           "return max(0, limit - used - growth_reserved)", "return max(0, limit - used)",
           "`available` forgets bytes reserved for growth, in the shared arithmetic (so in both layers at once; "
           "CrossHair's postcondition 0 <= available <= limit still holds)"),
    Mutant("oversubscription_off_by_one", ("I2",), "ledger", R, GOV,
           "oversubscribed(a.used, a.limit)", "oversubscribed(a.used, a.limit + 1)",
           "the snapshot reports oversubscription only from one byte past the limit (> for >=)"),
    Mutant("alias_of_alias", ("C1",), "ledger", R, GOV,
           "self._auths[base.alias_of] if base.alias_of is not None else base", "base",
           "a view registered through another view becomes an alias of that alias, not of the canonical ledger"),
    Mutant("recorded_bytes_not_charged", ("I2",), "ledger", R, GOV,
           "a.used += nbytes", "a.used += nbytes if origin is Origin.GRANTED else 0",
           "bytes recorded as already taken are listed but never charged to the ledger"),
    Mutant("grant_rounds_charge_down", ("I2",), "ledger", R, GOV,
           "a.used += nbytes", "a.used += nbytes - (nbytes > 1 and origin is _O_GRANTED)",
           "a grant charges its ledger one byte less than it granted (a rounding slip on the grant path only: "
           "recorded bytes stay charged in full, so every counterexample, shrunk or not, is a grant)"),
    # With owner_only on, a foreign holder's commit is refused before it touches the record; the bug that
    # still harms I4a is a commit path that skips that check for any registered holder and re-homes the lease.
    Mutant("commit_rehomes_lease", ("I4a",), "ledger", R, GOV,
           ("if rec is None or rec.holder != holder or type(holder) is not int:\n"
            "            rec = self._owned_alloc(holder, allocation)\n        if rec.part is not None:\n"
            "            _owned_by_part(rec)\n        if rec.state is not _PROVISIONAL:",
            'raise InvalidBytes(f"allocation {rec.id}: {nbytes} B committed but only {rec.reserved} B reserved")'),
           ("if rec is None or type(holder) is not int or holder not in self._holders:\n"
            "            rec = self._owned_alloc(holder, allocation)\n        if rec.part is not None:\n"
            "            _owned_by_part(rec)\n        if rec.state is not _PROVISIONAL:",
            'raise InvalidBytes(f"allocation {rec.id}: {nbytes} B committed but only {rec.reserved} B reserved")\n'
            "        rec.holder = holder"),
           "a reservation is handed to whichever registered holder commits it (a producer reserves, a consumer "
           "commits and becomes the owner): the lease changes holder, and the reserving holder's charge moves "
           "to a holder that never asked for it"),
    Mutant("id_counter_not_advanced", ("I4a",), "ledger", R, GOV,
           "            self._next_alloc += 1\n", "", "the allocation id counter is read but never advanced"),
    Mutant("growth_charges_ledger", ("I4b",), "ledger", R, ALW,
           "w.reserved += nbytes", "w.reserved += nbytes\n        w.auth.used += nbytes",
           "reserving allowance growth also charges the ledger, though an allowance owns no bytes"),
    # --- ledger, spec layer (spec.ledger: the invariants judge the spec's own states) ---------------
    Mutant("reregister_grows_capacity", ("C1",), "ledger", S, "spec.ledger",
           'if (a.tier, a.capacity) != (tier, capacity) and guards.on("identity_check"):',
           "if (a.tier, a.capacity) != (tier, capacity) and capacity > a.capacity:  # a bigger device\n"
           "                    a = _evolve(a, capacity=capacity, limit=capacity)\n"
           "                    state = _evolve(state, authorities=state.authorities.set(a.id, a))\n"
           '                elif (a.tier, a.capacity) != (tier, capacity) and guards.on("identity_check"):',
           "re-registering a pool with a larger capacity resizes the existing ledger in place, under the leases "
           "and promises made against the old size, instead of refusing the mismatch"),
    # --- admission models (refimpl.admission) ---------------------------------
    Mutant("finish_keeps_kv", ("I12",), "admission", R, ADB,
           "for aid in self._leases[rid]:\n            self.seat.release(aid)\n"
           "        self._leases[rid], self._state[rid] = [], S.ReqState.FINISHED",
           "self._state[rid] = S.ReqState.FINISHED",
           "a finished request is marked finished but its KV leases are never released", "kv_admission_fits"),
    Mutant("finish_forgets_kv_leases", ("I12",), "admission", R, ADB,
           "        for aid in self._leases[rid]:\n            self.seat.release(aid)\n", "",
           "a finish forgets the request's KV leases without releasing them: the ledger keeps charging bytes "
           "no request holds, stranded where no admission can use them", "kv_admission_fits"),
    Mutant("free_ignores_other_requests", ("I12",), "admission", R, ADB,
           "free = self.seat.free()", "free = self.capacity - held",
           "the free room is computed from this request's entries only, not the pool's", "kv_admission_fits"),
    # The ledger's limit check refuses what free_ignores_other_requests over-admits; past the pool only a
    # bypass of the reservation goes: entries recorded as already written (record_committed, I2).
    Mutant("advance_records_past_the_pool", ("I12",), "admission", R, ADB,
           ("free = self.seat.free()", "self._leases[rid].append(self.seat.lease(n, Role.KV))"),
           ("free = self.capacity - held",
            "self._leases[rid].append(self.seat.pmm.record_committed(\n"
            "            self.seat.holder, self.seat.auth, self.seat.tier, n, Role.KV))"),
           "the free room is this request's entries only, and the entries are recorded as already written instead "
           "of reserved, so the ledger cannot refuse them", "kv_admission_fits"),
    # advance_records_past_the_pool over-admits mid-request, so a deadlock (some_resident_can_finish) always
    # comes first; a bypass taken only by a request's last entries strands no one, and the pool overflows.
    Mutant("last_entries_skip_fit", ("I12",), "admission", R, ADB,
           "if n > free:",
           "if n == need:\n            self._leases[rid].append(self.seat.pmm.record_committed(\n"
           "                self.seat.holder, self.seat.auth, self.seat.tier, n, Role.KV))\n"
           "            self._state[rid] = S.ReqState.RESIDENT\n            return\n        if n > free:",
           "a request's last entries are booked as already written, without a fit check (it is about to finish "
           "and free everything): the pool holds more KV than its capacity", "kv_admission_fits"),
    Mutant("feasibility_against_capacity", ("I12",), "admission", R, ADB, "> free and", "> self.capacity and",
           "admission asks whether the request could ever fit, not whether it can finish from here",
           "kv_admission_fits"),
    # With the weights leased on the ledger, a fit check against the capacity alone is refused by the
    # ledger's own limit check (the same CapacityDenied, an equivalent mutant): the bug that still harms is
    # that check plus booking the weights as already mapped, which the ledger records past its limit (I2).
    Mutant("load_against_capacity", ("I12",), "admission", R, ADC,
           'if size > free:\n                raise CapacityDenied(f"{a.model}: {size} B asked, {free} B free")\n'
           "            row[_LEASE], row[_SERVED] = self.seat.lease(size, Role.WEIGHTS), False",
           'if size > self.capacity:\n                raise CapacityDenied(f"{a.model}: {size} B asked")\n'
           "            row[_LEASE], row[_SERVED] = self.seat.pmm.record_committed(\n"
           "                self.seat.holder, self.seat.auth, self.seat.tier, size, Role.WEIGHTS), False",
           "loading a model checks the pool's capacity instead of the free room, and books its weights as already "
           "mapped (record_committed) instead of reserving them, so the ledger cannot refuse the load",
           "retire_before_evict"),
    Mutant("serve_without_residency", ("I12",), "admission", R, ADC, "if not resident or not work:", "if not work:",
           "a request is served by a model that was evicted", "retire_before_evict"),
    Mutant("evict_without_need", ("I12",), "admission", R, ADC, "and r[_SIZE] > free for", "for",
           "a model is evicted whenever anything is pending, even when the pending model fits already",
           "retire_before_evict"),
    Mutant("evict_before_serving", ("I12",), "admission", R, ADC, "if not served:", "if False:",
           "a freshly loaded model is evicted before it served anyone", "retire_before_evict"),
    Mutant("evict_pinned", ("I12",), "admission", R, ADC,
           "if not resident or pinned:", "if not resident:", "a pinned model can be evicted", "retire_before_evict"),
    Mutant("evict_keeps_weights_charged", ("I12",), "admission", R, ADC, "            self.seat.release(lease)\n", "",
           "an evicted model is marked non-resident but its weights lease is never released: the ledger keeps "
           "charging the room the eviction was for", "retire_before_evict"),
    Mutant("prefetch_ignores_headroom", ("I8c",), "admission", R, ADE,
           "room = self.seat.free() - self.headroom", "room = self.seat.free()",
           "the weight cache prefetches into the headroom", "elastic_guaranteed_path"),
    Mutant("prefetch_as_static_split", ("I8c",), "admission", R, ADE,
           "- self.headroom", "+ kv_bytes(self.kv_tokens - self.max_context - self.bucket, self.bpt) - self.headroom",
           "the weight cache leaves room for KV beyond max context, as a conservative static split would",
           "elastic_guaranteed_path"),
    Mutant("growth_forgets_copy_peak", ("I8c",), "admission", R, ADE,
           "over = grow +", "over = grow - kv_bytes(self.kv_tokens, self.bpt) +",
           "KV growth reclaims for the new buffer only, forgetting the old one stays live while copying",
           "elastic_guaranteed_path"),
    Mutant("growth_past_max_context", ("I8c",), "admission", R, ADE,
           "min(self.kv_tokens + self.bucket, self.max_context)", "self.kv_tokens + self.bucket",
           "a KV growth adds a whole bucket even past max context", "elastic_guaranteed_path"),
    Mutant("grow_after_short_reclaim", ("I8c",), "admission", R, ADE,
           "if released < over:  # a short answer", "if False:  # a short answer",
           "KV grows after the weight holder answered short (the bug issue #9 found in ElasticSplit)",
           "elastic_guaranteed_path"),
    Mutant("growth_keeps_old_buffer", ("I8c",), "admission", R, ADE,
           "self.seat.release(self._kv)\n        self._kv, self.kv_tokens = kv, new",
           "self._kv, self.kv_tokens = kv, new",
           "after a KV growth's copy the old buffer's lease is never released: the ledger keeps charging it",
           "elastic_guaranteed_path"),
    Mutant("reclaim_ignores_answer", ("C5",), "admission", R, "refimpl.admission.weight_cache",
           "target, self.answer_cap = min(target, self.answer_cap),", "self.answer_cap =",
           "the weight cache gives back all it is asked for whatever its holder answered", "elastic_guaranteed_path"),
    *PRESSURE_MUTANTS,  # the composed pressure part: deadlines, generations, use flags, try-only path
    *VIEW_MUTANTS,  # the composed model views: publish, execute, remap
    *PROTOCOL_MUTANTS,  # the pool protocol and capacity transactions: refimpl.verify.mutants_protocols
    *TX_MUTANTS,  # the composed retry intents and poisoning: refimpl.verify.mutants_tx
    *LIFETIME_MUTANTS,  # unregistering a holder, shrinking a lease: refimpl.verify.mutants_lifetime
    *REPLAY_MUTANTS,  # the replay checker and tracing, run as replay controls: refimpl.verify.mutants_replay
    # --- real ORT holders (refimpl.ort.holders) ---------------------------------------
    Mutant("kv_growth_releases_old_first", ("I8c",), "ort", R, HOLD,
           ("old = self.bundles[rid]\n"
            "        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)",
            "        self.pmm.release(self.id, old.lease)  # only after the copy and the Run: peak = old + new\n"),
           ("old = self.bundles[rid]\n"
            "        self.pmm.release(self.id, old.lease)  # make room first: the old bucket is still read below\n"
            "        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)", ""),
           "a KV growth releases the old bucket's lease before the new one is granted, then copies out of the "
           "old bucket: for the length of the copy its bytes are in use but charged to no one (issue #9's "
           "survivor: the transient state is never a state of the spec)"),
    # --- real-session model (spec.sessions, spec layer: the invariants judge the spec's own states) ------
    Mutant("lowering_ignores_headroom", ("C8",), "ort", S, SES,
           "ok = after.used + t.headroom <= new", "ok = after.used <= new",
           "a limit lowering commits when used fits, forgetting the transient headroom"),
    Mutant("failed_growth_keeps_bucket", ("C8",), "ort", S, SES,
           "            return attrs.evolve(s, cache=s.cache - released), released\n",
           "            return attrs.evolve(s, requests=s.requests.set(a.rid, Request(r.model, r.tokens, new)),\n"
           "                                cache=s.cache - released), released\n",
           "a decode whose growth Run failed keeps the grown bucket: the request holds KV capacity for a step "
           "that never happened (the spec's side of failed_run_keeps_grown_lease)"),
    Mutant("report_available_ignores_cache", ("C8",), "ort", S, SES,
           "available=available(s.limit, s.used, 0),", "available=available(s.limit, s.pinned, 0),",
           "the report counts the reclaimable cache as available"),
    Mutant("decline_not_reported", ("I3",), "ort", S, SES,
           's.not_enforced | {a.role.value} if guards.on("honest_decline") else s.not_enforced  # I3', "s.not_enforced",
           "declining a class of bytes records it but never reports it as not enforced"),
    Mutant("compat_labelled_weights", ("I3",), "ort", S, SES,
           'f"model:{a.name}" if mode is Mode.COMPAT else Role.WEIGHTS.value', "Role.WEIGHTS.value",
           "a compatibility-mode model is reported under the weights label, so it reads as enforced"),
    Mutant("compat_reuses_prefix", ("C9",), "ort", S, SES,
           "mode is not Mode.COMPAT", "True", "a model without a state declaration still gets prefix reuse"),
    Mutant("residency_without_source", ("I8b",), "ort", S, SES,
           "Residency(a.nbytes, a.source)", 'Residency(a.nbytes, "")',
           "a residency figure is stored without the source it was read from"),
    Mutant("admission_drops_transient_peak", ("I8",), "ort", S, SES,
           "t.granule, f.transient_peak", "t.granule, 0", "weights are admitted without the session's transient peak"),
    Mutant("prefetch_into_headroom", ("I8c",), "ort", S, SES,
           "max(s.cache, s.limit - s.pinned - t.headroom)", "max(s.cache, s.limit - s.pinned)",
           "the weight cache prefetches into the transient headroom"),
    Mutant("admission_ignores_granule", ("C7",), "ort", S, SES, "t.granule,", "1,",
           "weights are admitted at their exact size, not rounded up to the device's mapping granule"),
    Mutant("decode_past_capacity", ("I8c",), "ort", S, SES, "if r.tokens < r.kv_tokens:", "if r.tokens <= r.kv_tokens:",
           "a decode writes one token past the KV capacity it holds before growing"),
    # --- real ORT sessions (refimpl.ort, refimpl layer: real sessions, checked against ungoverned runs) ---
    Mutant("kv_growth_forgets_copy", ("C9",), "ort", R, HOLD,
           '            for name in ("key", "value"):\n'
           "                new.bufs[name][old.cur][:n] = old.bufs[name][old.cur][:n]\n", "",
           "a KV growth allocates the bigger bucket but never copies the old K/V into it: the next decode attends "
           "over zeros (the bug issue #11 says the thorough campaign used to miss)"),
    Mutant("kv_growth_leaks_old_lease", ("C8",), "ort", R, HOLD,
           "        self.pmm.release(self.id, old.lease)  # only after the copy and the Run: peak = old + new\n", "",
           "a KV growth moves the request to the new bucket but never gives the old lease back: the ledger "
           "charges KV the request no longer holds (issue #11: ledger 36,288 B, abstraction 30,144 B)"),
    Mutant("failed_run_keeps_grown_lease", ("C8",), "ort", R, "refimpl.ort.requests",
           "            self.kv.abandon(grown)  # no grown lease is kept for a step that did not happen\n", "",
           "a decode whose Run fails after its KV growth keeps the grown bucket's lease: the ledger charges KV "
           "for a step that never happened (issue #11 item 6's RunFailed, now an environment event of the spec)"),
    Mutant("arena_peak_charged_twice", ("I8",), "ort", R, OGOV,
           'rec.arena_loan = self.env_arena.lend(f.transient_peak, enforce=self.guards.on("arena_room"))',
           'rec.arena_loan = self.env_arena.lend(f.transient_peak, enforce=self.guards.on("arena_room"))\n'
           "            extra = self.pmm.reserve(self.arena, self.auth, Tier.HOST, f.transient_peak, Role.ARENA)\n"
           "            self.pmm.commit(self.arena, extra, f.transient_peak)",
           "each model's transient peak is lent within the env arena and still charged as its own ARENA lease on the "
           "host authority beside the arena's lease: the same bytes booked twice (issue #11's closing note)"),
    Mutant("arena_on_second_authority", ("C1", "I8"), "ort", R, OGOV,
           "return ArenaHolder(self.pmm, self.auth, arena_cap, on_pressure=zero)",
           'env_auth = self.pmm.register_authority("env-arena", Tier.HOST, arena_cap)\n'
           "        return ArenaHolder(self.pmm, env_auth, arena_cap, on_pressure=zero)",
           "the env arena's lease is booked on a second authority of the host tier sized to its cap, apart "
           "from the host pool (the shape issue #11 closed with): two ledgers over one pool, the arena's "
           "bytes outside the pool's books"),
    Mutant("limit_above_capacity", ("C7",), "ort", S, SES,
           "if new > t.capacity:", "if new > 2 * t.capacity:", "a limit above the pool's capacity is accepted"),
    # --- cooperative hierarchy (refimpl.hierarchy.core: the coordinator's ledger, real processes) --------
    Mutant("exit_credited_twice", ("C10",), "hierarchy", R, HC,
           "            if self.guards.on(\"return_once\"):\n                return 0\n", "",
           "a restarted coordinator re-observing a recorded exit credits the worker's quota again"),
    Mutant("fence_refunds", ("C10",), "hierarchy", R, HC, 'if not self.guards.on("charge_until_exit"):', "if True:",
           "a missed heartbeat is taken for an exit: the fenced worker's quota comes back at fence time"),
    Mutant("grants_lifo", ("C10",), "hierarchy", R, HC,
           '(0, 0, i["seq"]) if i["age"] >= cap else (1, -i["priority"], i["seq"])', '-i["seq"]',
           "arbitration grants the newest intent first, ignoring maturity and submit order"),
    Mutant("defer_keeps_quota", ("C10",), "hierarchy", R, HC, 'back = max(0, w["quota"] - keep)', "back = 0",
           "a deferring worker's uncommitted quota stays charged to it at the coordinator"),
    Mutant("grant_not_journaled", ("C10",), "hierarchy", R, HC,
           'w["seq"] = max(w["seq"], seq)\n        self._commit()', 'w["seq"] = max(w["seq"], seq)',
           "a message's effect (a grant) is answered before it is journaled: a restart forgets it"),
    Mutant("stale_epoch_off_by_one", ("C10",), "hierarchy", R, HC, '!= w["epoch"]', '< w["epoch"] - 1',
           "a message one epoch behind (from a fenced incarnation) is still accepted"),
    Mutant("exit_keeps_quota", ("C10",), "hierarchy", R, HC,
           "w.update(state=EXITED, quota=0, returned=credit", "w.update(state=EXITED, returned=credit",
           "an observed exit credits the quota back but leaves it charged to the dead worker too"),
    Mutant("spawn_predelegates", ("C10",), "hierarchy", R, HC,
           '"seq": 0, "quota": 0, "returned": 0}',
           '"seq": 0, "quota": min(1, self.free), "returned": 0}\n        self.free -= self.workers[wid]["quota"]',
           "a spawned worker is handed a first unit of quota before it has authenticated"),
    Mutant("return_skips_quota_check", ("C10",), "hierarchy", R, HC, 'if n > w["quota"]:', "if n > self.serving_quota:",
           "a return message may give back more than the worker's quota: the coordinator mints free quota"),
    Mutant("reclaim_outside_by_name", ("I11",), "hierarchy", R, HC,
           'self.guards.on("participants_only")', 'self.guards.on("participants_only") and not target.isalpha()',
           "the participant check only rejects path-like names: an outside program named 'db' is a target"),
    Mutant("tight_pool_books_outsider", ("I11", "C10"), "hierarchy", R, HC,
           'if delta > 0 and not self.guards.on("outside_is_ceiling"):',
           'if delta > 0 and (not self.guards.on("outside_is_ceiling") or delta >= self.free // 2):',
           "when the pool is tight an outside allocation is booked against the free quota, as if it were a holder"),
    Mutant("aging_unbounded", ("C10",), "hierarchy", R, HC,
           'i["age"] = min(i["age"] + 1, cap)', 'i["age"] = i["age"] + 1', "an intent's age grows past the aging cap"),
    Mutant("grant_off_by_one", ("C10",), "hierarchy", R, HC, "if n <= self.free:", "if n <= self.free + 1:",
           "a request is granted when it exceeds the free quota by one unit"),
    Mutant("ceiling_counts_slice", ("C10",), "hierarchy", R, HW, "= self._in_use()", "= self.slice",
           "a worker's OS ceiling counts its whole slice as its own charge, not what it uses"),
    Mutant("fenced_still_served", ("C10",), "hierarchy", R, HC, "!= ACTIVE and", "== EXITED and",
           "the liveness check only refuses exited workers: a fenced worker's identity, with its current epoch, is "
           "still granted quota"),
    Mutant("lost_reply_trusts_old_slice", ("C10",), "hierarchy", R, HW,
           "self._drop_reservations(0)\n                self.slice = self._committed()", "pass",
           "a worker whose request got no reply keeps its slice and open reservation, as if it had been granted: "
           "after a deferral the coordinator gives those units to another worker"),
    Mutant("defer_keeps_reservations", ("C10",), "hierarchy", R, HW,
           "            for aid in self.provisional:  # no local reservation while awaiting quota\n"
           "                self.pmm.cancel(self.work, aid)\n            self.provisional.clear()\n", "",
           "a deferring worker keeps its open reservations while it waits for quota"),
    *MANAGER_MUTANTS,  # the composed manager, where the parts meet on one ledger: refimpl.verify.mutants_manager
)

MUTANTS: dict[str, Mutant] = {m.name: m for m in _ALL}
if len(MUTANTS) != len(_ALL):
    raise ValueError("two mutants share a name")
