# Suite-wide setup: the contract switch is the project's only module-level
# mutable state, so every test gets it back at its start value; Hypothesis
# profiles follow ORT-NOTES section 6 ("ci" when the CI env var is set;
# "mutation" for benchmarks/mutation.py).

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from invariants import contracts

settings.register_profile("ci", max_examples=50, stateful_step_count=30, deadline=None, derandomize=True,
                          database=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=20, stateful_step_count=20, deadline=None)
# benchmarks/mutation.py: small and derandomized, so each mutant's verdict is reproducible and affordable.
settings.register_profile("mutation", max_examples=15, stateful_step_count=20, deadline=None, derandomize=True,
                          database=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.getenv("HYPOTHESIS_PROFILE", "ci" if os.getenv("CI") else "dev"))


@pytest.fixture(autouse=True)
def _reset_contract_switch():
    yield
    contracts.reset()
