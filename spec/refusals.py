"""Every refusal that applies to (state, action): where the design orders no checks, any of them is legal.

`step` validates in one fixed order and raises the first failing check
(`spec.ledger`'s theory of operation): that order makes the reference
governor deterministic, but the design orders none of these checks
(DESIGN-FACTS section 6 gives an existing implementation's validation order
as precedent, not requirement), so a governor that checks the device context
before the holder, or the bytes last, conforms as well (issue #21, D11).

`every_refusal(step, state, action)` derives the set from `step` itself, never
from a second copy of its checks: each refusal site in the spec raises
through `GuardSet.refuse(site, error)`; after a refusal at a site, the step
is run again with that site waived (the check is passed over as if it held),
which reaches the next check whose precondition holds, until the step goes
through or a refusal cannot be passed over (a site-less one: a lookup whose
record the later checks need, an ill-typed argument). The first element is
always the error `step` raises. No I/O, no state kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet

__all__ = ["every_refusal"]


def every_refusal(step: Callable[..., Any], state: Any, action: Any,
                  guards: GuardSet = ALL_ON) -> tuple[GovernorError, ...]:
    """Every refusal `step` can reach for (state, action), in its own order; () iff it accepts the action."""
    found: list[GovernorError] = []
    while True:
        try:
            step(state, action, guards)
        except GovernorError as e:
            found.append(e)
            site = getattr(e, "site", None)
            if site is None or site in guards.waived:
                return tuple(found)
            guards = guards.waive(site)
            continue
        return tuple(found)
