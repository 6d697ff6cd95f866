"""The guard registry: every check that an invariant depends on, by name.

A guard is a single `if` in the spec's `step` or in refimpl's governor that
refuses a harmful action. Each is registered here with the catalog IDs it
protects, so negative controls can switch exactly one off and demand a
counterexample (DESIGN-FACTS section 5, "Negative controls").

Guards are switched off through an explicit `GuardSet` value passed to the
spec (`step(..., guards=)`) or to `ProcessMemoryManager(guards=)`: no global
state, no monkeypatching. Both layers implement every guard independently, so
each guard yields two negative controls: in the spec (an invariant must catch
it) and in refimpl (refinement or an invariant must catch it).
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["Guard", "GuardSet", "Layer", "GUARDS", "ALL_ON", "guard"]


class Layer(enum.Enum):
    SPEC = "spec"
    REFIMPL = "refimpl"


@attrs.frozen
class Guard:
    name: str
    ids: tuple[str, ...]
    description: str
    #: What a switched-off guard lets through, as a counterexample would read.
    harm: str
    #: The checker (see `refimpl.verify.checkers.CHECKERS`) whose campaign hunts for the counterexample.
    model: str = "ledger"


GUARDS: tuple[Guard, ...] = (
    Guard("single_authority_per_pool", ("C1",),
          "registering a pool that already has an authority returns the existing one",
          "two grantable ledgers over one physical pool"),
    Guard("identity_check", ("C1",),
          "re-registering a pool with a different tier or capacity is rejected",
          "a mismatched identity is silently bound to the existing authority"),
    Guard("alias_resolution", ("I1",),
          "a reservation through an alias is charged to the canonical authority",
          "the alias keeps its own ledger, so the same bytes are charged twice"),
    Guard("tier_match", ("C2",),
          "a reservation's tier must be its authority's tier",
          "a lease claims a tier its pool does not have"),
    Guard("commit_within_reservation", ("C2",),
          "commit publishes at most the reserved bytes",
          "a lease larger than the reservation that was granted"),
    Guard("limit_check", ("I2",),
          "a new reservation may not push used past the limit (lease rule G1)",
          "grants exceed the limit without any recorded oversubscription"),
    Guard("fresh_ids", ("I4a",),
          "allocation ids are never reused",
          "a new allocation takes the id of a released one"),
    Guard("lifecycle_table", ("I4a",),
          "allocation transitions follow the lifecycle table",
          "a live lease is re-committed or a lost one released"),
    Guard("allowance_bounds", ("I4b",),
          "growth reservation and mapping stay within the allowance limit",
          "mapped + reserved exceeds the allowance limit"),
    Guard("allowance_capacity", ("I4b",),
          "allowance limits on an authority sum to at most its capacity",
          "allowances promise more than the pool holds"),
    Guard("owner_only", ("I6",),
          "only the holder that owns a lease may release or settle it",
          "another party takes a holder's bytes"),
    # issue #5: admission over real sessions
    Guard("kv_admission_fits", ("I12",),
          "a request is admitted or advanced only if its remaining KV need fits in free",
          "prefills fill the pool and no resident request can finish", model="admission"),
    Guard("retire_before_evict", ("I12",),
          "a model is evicted only after serving since loading, and only for a pending model that does not fit",
          "models are evicted before they serve (thrash)", model="admission"),
    Guard("elastic_guaranteed_path", ("I8c",),
          "KV growth reclaims from the weight cache so the copy peak fits the budget",
          "KV grows into the weights' borrowed bytes: oversubscription", model="admission"),
    Guard("referenced_extents", ("I8",),
          "weights are admitted by referenced extents rounded to the granule plus the transient peak",
          "the container file's size is admitted (a 2x blob doubles the charge)", model="ort"),
    Guard("honest_decline", ("I3",),
          "declining a class of bytes, or loading in compatibility mode, reports its limits as not enforced",
          "declined bytes are reported as enforced", model="ort"),
    Guard("residency_not_charge", ("I8b",),
          "an observed residency moves only a sourced residency field, never the charge",
          "an OS demotion silently changes the ledger's charge", model="ort"),
    Guard("lower_limit_atomic", ("C8",),
          "a limit is lowered only if reclaim brings used under it; otherwise the old limit stays",
          "a lowered limit leaves used above it with the old limit gone", model="ort"),
    Guard("host_mapped_capacity", ("C7",),
          "host-mapped reads per execution stay within the reported capacity (unreported = 0)",
          "a model reads host-mapped bytes the topology never reported", model="ort"),
    Guard("declare_loop_carried", ("C9",),
          "managed mode requires every loop-carried state to be declared",
          "a model with undeclared loop-carried state runs managed", model="ort"),
    Guard("arena_room", ("I8",),
          "a managed model's transient peak is lent within the env arena's one lease only if it fits its room",
          "the peaks lent within the arena sum past its grant: the ledger admits Runs ORT's cap will fail, and "
          "the arena's bytes are promised beyond the one lease that charges them", model="ort"),
    # --- pressure and arbitration (issue #3) ---
    Guard("aging", ("I13",),
          "arbitration stops at a matured pending ticket that does not fit, so returned capacity accumulates for it",
          "a large request is overtaken by later, smaller, equal-priority requests round after round",
          model="pressure"),
    # A grant charged before its waiter is woken (I7) is `grant_charges_ledger` (the composed manager's guard).
    Guard("try_only", ("I7", "I2", "I13"),
          "the allocator path (try_reserve) is granted now or refused now, never left pending, never past the "
          "limit, never ahead of a waiting ticket",
          "an allocator callback is handed 'pending' and would have to wait; or it takes bytes past the limit or "
          "ahead of a waiter, who is overtaken by every allocation",
          model="pressure"),
    Guard("unlock_before_callback", ("I7",),
          "a holder's pressure callback is invoked with the ledger lock released",
          "a holder is called while the ledger lock is held (a re-entrant release would deadlock)",
          model="pressure"),
    Guard("answer_open_only", ("C5",),
          "only an open, current-generation, unexpired pressure ticket can be answered",
          "a stale, cancelled or expired answer is credited",
          model="pressure"),
    Guard("victims_unpinned_idle", ("I6", "C5"),
          "a pressure answer may give back only the holder's own unpinned, idle leases",
          "pinned or in-flight bytes are reclaimed",
          model="pressure"),
    # --- capacity transactions, views, bundles, lifetime (issue #4) ---
    Guard("ordered_reservation", ("C4",),
          "a transaction reserves its authorities in stable id order, lowest needed first",
          "two transactions declared in opposite orders each hold one authority and need the other's",
          model="transactions"),
    Guard("publish_after_all_held", ("C4",),
          "the provisional view is published only once every needed authority is held",
          "a view is published while a reservation it depends on may still fail",
          model="transactions"),
    Guard("retry_keeps_identity", ("C4",),
          "a retry takes the submit sequence, priority and age of its zero-byte intent",
          "a deferred transaction loses its place and can be overtaken forever",
          model="transactions"),
    Guard("full_abort", ("I5",),
          "an abort releases every reservation the transaction holds",
          "a partial abort leaves residual charge on some authority",
          model="transactions"),
    Guard("poisoned_manager_refuses", ("I5",),
          "after ledger corruption every grant fails with ManagerPoisoned",
          "a corrupt ledger keeps granting capacity",
          model="transactions"),
    Guard("current_generation", ("C6",),
          "an execution binds a view only by its current mapping generation",
          "an execution runs on a stale mapping of the view",
          model="transactions"),
    Guard("remap_when_idle", ("I9",),
          "a view is remapped only while no execution uses it",
          "a remap changes the generation under a running execution",
          model="transactions"),
    Guard("atomic_bundle", ("I10",),
          "commit advances every part of the state bundle together",
          "KV commits while recurrent, sampler and progress state stay behind",
          model="transactions"),
    # --- cooperative hierarchy across processes (issue #12) ---
    Guard("authenticated_only", ("C10",),
          "quota messages are accepted only with the worker's own key (authkey challenge / MAC)",
          "an impostor's request is charged to a worker that never asked: quota and the worker's slice disagree",
          model="hierarchy"),
    Guard("sequence_check", ("C10",),
          "a message is accepted only with a sequence number above the worker's last accepted one",
          "a replayed request or return is applied twice: quota and the worker's slice disagree",
          model="hierarchy"),
    Guard("epoch_fencing", ("C10",),
          "a message is accepted only in the worker's current epoch (fencing, exit and every reconnect bump it)",
          "a message delayed from a worker's earlier connection moves quota the resynchronised worker never "
          "learns of: it keeps using units the coordinator took back",
          model="hierarchy"),
    Guard("charge_until_exit", ("C10",),
          "a fenced worker's quota stays charged until its exit is observed (sentinel / waitpid)",
          "quota is returned on a missed heartbeat while the process may still use it: slices sum past the quota",
          model="hierarchy"),
    Guard("return_once", ("C10",),
          "an exit credits the worker's quota once; observing it again (after a restart) credits nothing",
          "a second observation of the same exit returns the quota twice: the free balance exceeds the quota",
          model="hierarchy"),
    Guard("defer_returns_uncommitted", ("C10",),
          "a worker that defers drops its open reservation and returns quota above what it has committed",
          "a waiting worker keeps uncommitted quota and an open reservation (hold and wait)",
          model="hierarchy"),
    Guard("coordinator_aging", ("C10",),
          "arbitration of deferred intents stops at a matured intent that does not fit",
          "a matured intent is overtaken by later-submitted intents round after round",
          model="hierarchy"),
    Guard("budget_min_ceiling", ("C10",),
          "a worker reserves only within min(its slice, its OS ceiling)",
          "a worker reserves past what the machine has left, because its slice alone allowed it",
          model="hierarchy"),
    Guard("live_workers_only", ("C10",),
          "a quota message is accepted only in the name of a live worker: authenticated, neither fenced nor exited",
          "a fenced or exited worker's identity is granted quota: charged to a process being terminated or gone",
          model="hierarchy"),
    Guard("lost_reply_assumes_worst", ("C10",),
          "a worker whose call goes unanswered drops its open reservation and every unit the call may have "
          "given back, and resynchronises to the journal's quota at its next hello",
          "after a lost reply to a deferral the worker keeps units the coordinator grants to another worker: "
          "units usable twice",
          model="hierarchy"),
    Guard("participants_only", ("I11",),
          "reclaim tickets go only to workers of the hierarchy",
          "a reclaim ticket waits on an outside program that never agreed to give anything back",
          model="hierarchy"),
    Guard("outside_is_ceiling", ("I11",),
          "usage by outside programs lowers only the OS ceiling",
          "an outside program's usage is booked against the serving quota as if it were a holder",
          model="hierarchy"),
    # --- the composed manager: where the parts meet on one ledger (issue #10) ---
    Guard("grant_charges_ledger", ("I1", "I2"),
          "a round's grant is a ledger reservation, charged at grant (before the waiter is woken or can see it)",
          "bytes promised to a granted-but-unclaimed ticket are taken by another part: used passes the limit",
          model="manager"),
    Guard("tx_counts_granted", ("I1", "I2"),
          "a transaction's try-only headroom is limit - used, which counts granted-but-unclaimed tickets",
          "a transaction reserves bytes already granted to a waiting ticket: used passes the limit",
          model="manager"),
    Guard("loss_keeps_charge", ("C3", "I6"),
          "on device loss a transaction's reservation on the lost device stays charged until termination",
          "a lost device's bytes are refunded while its context may still use them",
          model="manager"),
    Guard("provider_pinned", ("C3",),
          "an authority referenced by a charge (stranded ones too), allowance, alias or part record cannot be removed",
          "an authority is removed under a lease: its charge has no ledger left to be refunded from",
          model="manager"),
    Guard("holder_in_use", ("I4a",),
          "a holder named by an allocation (stranded ones too), allowance, ticket, pressure or transaction "
          "cannot be unregistered",
          "a holder is unregistered under its lease: the bytes belong to nobody, and nobody may release them",
          model="manager"),
    Guard("limit_after_reclaim", ("I2",),
          "a lowered limit is committed only if reclaim brought used under it; otherwise the old limit stays",
          "the limit is lowered below what is used: grants past the limit with the old limit gone",
          model="manager"),
)

_NAMES = frozenset(g.name for g in GUARDS)


@attrs.frozen
class GuardSet:
    """Which guards are switched off; the default switches none off."""

    off: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    #: Refusal sites passed over, so `spec.refusals` can find the refusals after them (never in a governor).
    waived: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)

    def __attrs_post_init__(self) -> None:
        unknown = self.off - _NAMES
        if unknown:
            raise ValueError(f"unknown guard(s): {sorted(unknown)}")

    def on(self, name: str) -> bool:
        """True iff guard `name` is active; an unregistered name is a bug (its control could never switch it off)."""
        if name not in _NAMES:
            raise ValueError(f"unknown guard {name!r}: register it in spec.guards.GUARDS")
        return name not in self.off

    def refuse(self, site: str, err: Exception) -> None:
        """Raise `err`, the refusal whose precondition holds at `site`, unless that site is waived.

        A waived site lets the step go on as if its check passed, so `spec.refusals.every_refusal` finds
        every other refusal that applies to the same (state, action) from the same checks."""
        if site not in self.waived:
            err.site = site  # type: ignore[attr-defined]
            raise err

    def waive(self, site: str) -> GuardSet:
        return attrs.evolve(self, waived=self.waived | {site})

    @classmethod
    def without(cls, *names: str) -> GuardSet:
        return cls(frozenset(names))


ALL_ON = GuardSet()


def guard(name: str) -> Guard:
    """The registered guard called `name`."""
    for g in GUARDS:
        if g.name == name:
            return g
    raise KeyError(name)
