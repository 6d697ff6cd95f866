"""The governor's error vocabulary, shared by spec, refimpl and the checkers.

Errors are grouped by who is at fault (trio style): the caller misused the API
(`CallerError`), the governor's policy refused a request (`PolicyRefusal`), or
the environment failed (`EnvironmentFault`). Every class subclasses the nearest
builtin so generic handlers still work, and every message names the problem.

`InvariantViolation` is deliberately *not* here: it lives in `invariants` and
does not derive from `GovernorError`, so `except GovernorError` can never
swallow a bug in the governor itself.
"""

from __future__ import annotations

__all__ = [
    "GovernorError",
    "CallerError",
    "InvalidBytes",
    "InvalidArgument",
    "UnknownAuthority",
    "UnknownHolder",
    "UnknownAllocation",
    "UnknownAllowance",
    "ForeignHolder",
    "InvalidTransition",
    "IdentityMismatch",
    "TierMismatch",
    "PolicyRefusal",
    "CapacityDenied",
    "AllowanceExceeded",
    "EnvironmentFault",
    "DeviceLost",
    "CeilingUnreadable",
    "ModelDataError",
    "ExternalDataMalformed",
    "ExternalDataMissing",
    "ExternalDataOutOfRange",
    "ExternalDataOverlap",
    "ProviderUnavailable",
    "UndeclaredState",
    "HostMappedCapacityExceeded",
    "BudgetBelowFloor",
    "ContextExhausted",
    "InfeasibleRequest",
    "UnknownTicket",
    "StaleGeneration",
    "StaleAnswer",
    "PinnedVictim",
    "MailboxFull",
    "GrantOutOfOrder",
    "UnknownTransaction",
    "UnknownView",
    "UnknownBundle",
    "UnknownIntent",
    "ReservationOrder",
    "ViewInUse",
    "ProviderPinned",
    "HolderInUse",
    "BundlePoisoned",
    "ManagerPoisoned",
    "ModelFileInvalid",
    "CalloutFailed",
    "HolderCallbackFailed",
    "SessionCreationFailed",
    "RunFailed",
    "TraceSinkFailed",
    "UnknownWorker",
    "AuthenticationFailed",
    "ReplayedMessage",
    "StaleEpoch",
    "NotAParticipant",
    "WorkerNotLive",
    "JournalDamaged",
    "JournalMissing",
    "JournalUnreadable",
    "JournalInconsistent",
    "JournalStale",
]
#: The categories every refusal falls in: bases, never raised themselves (a trace naming one names no refusal).
CATEGORIES = ("GovernorError", "CallerError", "PolicyRefusal", "EnvironmentFault")


class GovernorError(Exception):
    """Base of every error the governor raises on purpose."""


# --- caller misuse -----------------------------------------------------------


class CallerError(GovernorError):
    """The caller asked for something the protocol does not allow."""


class InvalidBytes(CallerError, ValueError):
    """A byte count is zero, negative, not an int, or beyond the representable range."""


class InvalidArgument(CallerError, ValueError):
    """An argument other than a byte count is malformed (wrong type, empty name)."""


class UnknownAuthority(CallerError, LookupError):
    """No authority with this id is registered."""


class UnknownHolder(CallerError, LookupError):
    """No holder with this id is registered."""


class UnknownAllocation(CallerError, LookupError):
    """No allocation with this id was ever issued."""


class UnknownAllowance(CallerError, LookupError):
    """No allowance with this id was ever opened."""


class ForeignHolder(CallerError, PermissionError):
    """The caller is not the holder that owns this lease or allowance (I6)."""


class InvalidTransition(CallerError, RuntimeError):
    """The lifecycle table has no transition for (state, event): double release, stale id."""


class IdentityMismatch(CallerError, ValueError):
    """A pool was re-registered with a different identity (C1)."""


class TierMismatch(CallerError, ValueError):
    """The requested tier is not the tier of the authority's pool (C2)."""


# --- policy refusal ----------------------------------------------------------


class PolicyRefusal(GovernorError):
    """The request was well-formed but the governor declined it; nothing changed."""


class CapacityDenied(PolicyRefusal):
    """Granting would push grants past the authority's limit (I2, lease rule G1)."""


class AllowanceExceeded(PolicyRefusal):
    """An allowance operation would exceed its limit or the authority's capacity (I4b)."""


# --- environment -------------------------------------------------------------


class EnvironmentFault(GovernorError):
    """The device, driver or OS failed; not the caller's fault."""


class CeilingUnreadable(EnvironmentFault, OSError):
    """The OS ceiling's kernel files (cgroup v2, /proc/meminfo, PSI) are missing or malformed (C10)."""


class DeviceLost(EnvironmentFault):
    """The authority's device context is lost or terminated; new work is refused (C3)."""


# --- model input errors (raised by refimpl/ort) ---


class ModelDataError(CallerError, ValueError):
    """A model's external-data entries do not describe bytes that exist (I8)."""


class ExternalDataMalformed(ModelDataError):
    """An external-data entry lacks a location, offset or length, or has a negative, non-integer or escaping one."""


class ExternalDataMissing(ModelDataError):
    """An external-data entry names a file that does not exist next to the model."""


class ExternalDataOutOfRange(ModelDataError):
    """An external-data range ends past the end of its file."""


class ExternalDataOverlap(ModelDataError):
    """Two external-data ranges in one file overlap, so their bytes would be counted twice."""


# --- environment errors (raised by refimpl/ort) ---


class ProviderUnavailable(EnvironmentFault, RuntimeError):
    """The session does not run on the requested execution provider.

    ORT does not fail a session whose EP does not load: it warns, logs or prints, and runs the session on the
    remaining providers (docs/ort-claims.md#cuda-fallback), so ortmem checks `get_providers()` and raises this.
    """


# --- issue #5: admission over real sessions (I3, I8, I8c, I12, C7, C8, C9) ---


class UndeclaredState(CallerError, ValueError):
    """Managed mode was asked for a model whose loop-carried state is not all declared (C9)."""


class HostMappedCapacityExceeded(PolicyRefusal):
    """An execution would read more distinct host-mapped bytes than the topology reports (C7; unreported = 0)."""


class BudgetBelowFloor(CallerError, ValueError):
    """A budget or limit is below the floor the configuration needs (headroom, pinned bytes, one request's path)."""


class ContextExhausted(PolicyRefusal):
    """A request already holds its declared maximum context; it cannot grow further."""


class InfeasibleRequest(PolicyRefusal):
    """Admitting or advancing this request would leave no resident request able to finish (I12)."""


# --- pressure and arbitration (issue #3) ---


class UnknownTicket(CallerError, LookupError):
    """No requester or pressure ticket with this id was ever issued."""


class StaleGeneration(CallerError, ValueError):
    """The id names an older generation: a ticket from before a reconfigure (C5), or a view from before a remap (C6, I9)."""


class StaleAnswer(CallerError, RuntimeError):
    """A pressure answer arrived for a ticket that is no longer open (answered, cancelled or expired)."""


class PinnedVictim(CallerError, PermissionError):
    """A pressure answer named a victim that is pinned, in flight, or not the holder's own (I6)."""


class MailboxFull(PolicyRefusal):
    """Back-pressure: every cancellation-mailbox slot is reserved by a live ticket; try again later."""


class GrantOutOfOrder(PolicyRefusal):
    """A ticket ahead in arbitration order is owed the free bytes first, or is a matured misfit they accumulate for (I13)."""


# --- capacity transactions, views, bundles, failure scope (issue #4) ---


class UnknownTransaction(CallerError, LookupError):
    """No transaction with this id was ever planned."""


class UnknownView(CallerError, LookupError):
    """No model view with this id was ever published."""


class UnknownBundle(CallerError, LookupError):
    """No state bundle with this id was ever opened."""


class UnknownIntent(CallerError, LookupError):
    """No retry intent with this id exists (never left behind, or already used)."""


class ReservationOrder(CallerError, RuntimeError):
    """Authorities must be reserved in stable id order, lowest needed first (C4)."""


class ViewInUse(CallerError, RuntimeError):
    """The view is bound to an execution; it cannot be remapped or dropped now (I9)."""


class ProviderPinned(CallerError, RuntimeError):
    """A lease, reservation, view or unrefunded charge still references this provider (C3)."""


class HolderInUse(CallerError, RuntimeError):
    """An allocation, allowance, ticket, pressure or transaction still names this holder (I4a)."""


class BundlePoisoned(EnvironmentFault):
    """A post-commit disagreement poisoned this state bundle; the engine must rebuild it (I5)."""


class ManagerPoisoned(EnvironmentFault):
    """The shared ledger was found corrupt; every grant fails from now on (I5)."""


# --- faults at call-out points and unreadable models (issue #14) ---


class ModelFileInvalid(ModelDataError):
    """A model file is missing, a directory, empty, truncated or not a parseable ONNX model."""


class CalloutFailed(EnvironmentFault):
    """Code the governor called out to (a holder callback, ORT, a trace sink) raised; the ledger is consistent."""


class HolderCallbackFailed(CalloutFailed):
    """A holder's pressure callback raised; its pressure ticket was cancelled, no byte moved (C5)."""


class SessionCreationFailed(CalloutFailed):
    """ORT failed to create a session after admission; every lease taken for it was returned."""


class RunFailed(CalloutFailed):
    """An ORT Run failed (over the arena cap, a binding's shape, any ORT error); the step was not applied and no lease was kept or grown."""


class TraceSinkFailed(CalloutFailed):
    """The trace sink raised after the operation was applied; `.result` holds the operation's outcome."""

    def __init__(self, message: str, result: object = None, error: BaseException | None = None) -> None:
        super().__init__(message)
        self.result, self.error = result, error
# --- cooperative hierarchy (issue #12: C10, I11) ---


class UnknownWorker(CallerError, LookupError):
    """No worker with this id was spawned by the coordinator (C10)."""


class AuthenticationFailed(CallerError, PermissionError):
    """A message failed its worker's authentication (wrong key, forged MAC): it gets nothing (C10)."""


class ReplayedMessage(CallerError, ValueError):
    """A message's sequence number is not above the worker's last accepted one: a replay or reorder (C10)."""


class StaleEpoch(CallerError, ValueError):
    """A message carries an epoch older than the worker's current one: it was fenced (C10)."""


class NotAParticipant(CallerError, PermissionError):
    """The target is outside the hierarchy: it is OS pressure, never a holder or a reclaim target (I11)."""


class WorkerNotLive(CallerError, PermissionError):
    """The worker is not live in the coordinator's books (spawned but never authenticated, fenced or exited):
    a message in its name gets nothing (C10: quota only to authenticated, spawned, live workers)."""


class JournalDamaged(EnvironmentFault):
    """The coordinator's journal cannot be trusted; the coordinator refuses to serve from it (C10)."""


class JournalMissing(JournalDamaged, FileNotFoundError):
    """No journal where one must be: lost, or never initialised (a first start is an explicit init)."""


class JournalUnreadable(JournalDamaged):
    """The journal file is not a readable sqlite database, or its integrity check fails."""


class JournalInconsistent(JournalDamaged, ValueError):
    """The journal's figures break the hierarchy's invariants (conservation, ranges, rows) or its digest."""


class JournalStale(JournalDamaged):
    """A live worker proves the journal lost an answered step (it knows a sequence number or a worker
    the journal does not): serving from it would grant units twice."""
