"""Mutation testing of spec/, the refimpl core and invariants/ (the checkers) with mutmut, one module at a time, with a ratchet.

Why mutmut (3.x): it is maintained, mutates with libcst (so the mutants are
real Python edits, shown as diffs), and it runs each mutant against only the
tests that called the mutated function (it records that in one instrumented
run of the selection). That per-function selection is what makes a run
affordable on a 2-core machine where the whole suite takes minutes.

How a run is shaped, per target module:
  * a scratch copy of spec/, invariants/, refimpl/, tests/ and docs/ under
    --workdir (the working tree is never touched; each module has its own
    copy, so one module's mutants cannot leak into another's run);
  * a generated [tool.mutmut] that mutates that one file and selects a small,
    fast set of test files known to exercise it (MODULES below);
  * Hypothesis in conftest's "mutation" profile (derandomized, no database,
    15 examples x 20 steps), so a mutant's verdict does not depend on example
    history and a stateful campaign costs well under a second;
  * a wall-clock budget per module (--budget-s); a module that runs out is
    reported with what it finished, and marked incomplete.

mutmut forks each mutant's run from a process that has already run the
clean tests, so module-level caches are warm there: a mutant in code that
only fills a cache (invariants/replay_ids.py's `_PLANS`) is reached only by a
test that empties the cache first (tests/test_mutkill_replay_ids.py's `cold`).

Classification. mutmut's exit codes map to killed / survived / timeout /
no tests / other. A timeout counts as detected (the mutant made the tests
hang or loop). "no tests" (no selected test calls the function) counts as
survived: it is a gap. Equivalent mutants are never auto-classified: they
are listed by hand in benchmarks/mutation-equivalent.toml, each with its id,
the mutated line it must still show, and a one-line reason; an entry whose
mutant was killed, or whose diff no longer shows that line, is an error.

    kill rate = (killed + timeout) / (mutants - equivalent)

Outputs: a per-module table on stdout, benchmarks/mutation-results.json, and
benchmarks/mutation-ratchet.json (per-module floors; raised to the new rate,
never lowered unless --lower-ratchet). tests/test_mutation_ratchet.py checks
the two files against each other without running anything.

Staleness: each result records `source_sha256`, the sha256 of the module it
mutated. A module whose bytes today differ is stale: its rate is of code that
is gone. `--report` (runs nothing) prints the recorded table with "(stale:
changed since its recorded run at <commit>)" next to each such rate, and
tests/test_mutation_ratchet.py names each in a warning; neither fails on it
(that would force a mutation run per edit): rerun the module to refresh it.

    python benchmarks/mutation.py [--modules spec/arith.py,...] [--max-children 2]
                                  [--budget-s 900] [--workdir .mutation-work]
                                  [--lower-ratchet] [--no-ratchet] [--resume]
    python benchmarks/mutation.py --report

Not part of the pytest run or .ci/run: a full run takes tens of minutes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "mutation-results.json"
RATCHET = ROOT / "benchmarks" / "mutation-ratchet.json"
EQUIVALENT = ROOT / "benchmarks" / "mutation-equivalent.toml"

_MANAGER_CLAUSE_TESTS = ["tests/test_manager_clauses.py", "tests/test_manager_clause_cases.py",
                         "tests/test_manager_clause_harms_i1.py", "tests/test_manager_clause_harms_steps.py",
                         "tests/test_manager_clause_harms_tickets.py", "tests/test_manager_order_answers.py",
                         "tests/test_manager_tx.py", "tests/test_manager_devices.py", "tests/test_reserve_order.py",
                         "tests/test_grant_events.py", "tests/test_step_frames.py", "tests/test_replay_harms.py",
                         "tests/test_mutkill_manager_holders.py", "tests/test_mutkill_manager_parts.py",
                         "tests/test_mutkill_manager_tx.py", "tests/test_mutkill_manager_order.py",
                         "tests/test_mutkill_replay_grants.py", "tests/test_mutkill_manager_shrink.py",
                         "tests/test_mutkill_view_clauses.py", "tests/test_mutkill_manager_grow.py"]

#: Target module -> the test files run against its mutants (mutmut then
#: narrows to the tests that called each mutated function). Chosen fast:
#: no CrossHair, no ORT, no real-thread suites unless the module is threaded.
MODULES: dict[str, list[str]] = {
    "spec/arith.py": ["tests/test_arith_units.py"],
    "spec/lifecycle.py": ["tests/test_lifecycle.py", "tests/test_lifecycle_tables.py"],
    "spec/tickets.py": ["tests/test_tickets_tables.py", "tests/test_manager_order_answers.py"],
    "spec/quota.py": ["tests/test_spec_quota.py"],
    "spec/ledger.py": ["tests/test_bad_input.py", "tests/test_lifecycle.py", "tests/test_explore.py", "tests/test_replay.py",
                        "tests/test_machine_units.py", "tests/test_stateful.py",
                        "tests/test_mutkill_spec_ledger.py",
                        "--deselect", "tests/test_stateful.py::test_campaign_reaches_deep_states_and_rejects_bad_input",
                        "--deselect", "tests/test_stateful.py::test_campaign_with_contracts_off_still_refines",
                        # the explorer's own end-to-end run (2-9 s): its per-guard cases stay
                        "--deselect", "tests/test_explore.py::test_explorer_exhausts_quick_scope_without_violation",
                        "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean"],
    # The composed manager's model views (C4, C6, I9): their four actions, each guard and refusal on hand-made
    # scripts, the view scope explored with each view guard off, the composed clauses that judge views, and the
    # refimpl differential that compares the two layers' views step by step. (spec/view_actions.py, the records,
    # has no mutants: mutmut mutates function bodies, and it defines only frozen records and a tuple.)
    "spec/manager_views.py": ["tests/test_drop_view.py", "tests/test_explore_views.py", "tests/test_manager_clauses.py",
                              "tests/test_spec_manager.py", "tests/test_manager_differential.py",
                              "tests/test_mutkill_manager_views.py"],
    # The two campaign tests (fixed 40 x 30 and 100 x 30 examples, 10-20 s) are left out.
    "spec/admission.py": ["tests/test_admission.py", "tests/test_admission_units.py",
                          "--deselect", "tests/test_admission.py::test_admission_models_refine_spec",
                          "--deselect", "tests/test_admission.py::test_admission_negative_controls"],
    # refimpl: the same scripted suites drive it through its adapters; the real-thread suites
    # (test_*threads.py, 5-6 s of waiting each) are left out, so lock-ordering mutants may survive.
    # The ledger moved from refimpl/governor.py (since removed) into refimpl/manager/ (issue #10): the
    # ratchet is keyed on the manager's modules, each with the rate its own run measured.
    "refimpl/manager/ledger.py": ["tests/test_bad_input.py", "tests/test_lifecycle.py", "tests/test_authorities.py",
                            "tests/test_contracts.py", "tests/test_replay.py", "tests/test_stateful.py",
                            "tests/test_governor_units.py", "tests/test_manager_refimpl.py", "tests/test_manager_bad_input.py",
                            "tests/test_manager_quota.py",  # every credit's rounds owed to a tier's quota (`_credit`)
                            # introspects the class's public methods, which mutmut's trampolines add to
                            "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation",
                            "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean",
                            "--deselect", "tests/test_stateful.py::test_campaign_reaches_deep_states_and_rejects_bad_input",
                            "--deselect", "tests/test_stateful.py::test_campaign_with_contracts_off_still_refines"],
    "refimpl/manager/allowances.py": ["tests/test_bad_input.py", "tests/test_lifecycle.py", "tests/test_authorities.py",
                            "tests/test_contracts.py", "tests/test_replay.py", "tests/test_stateful.py",
                            "tests/test_governor_units.py",
                            # introspects the class's public methods, which mutmut's trampolines add to
                            "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation",
                            "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean",
                            "--deselect", "tests/test_stateful.py::test_campaign_reaches_deep_states_and_rejects_bad_input",
                            "--deselect", "tests/test_stateful.py::test_campaign_with_contracts_off_still_refines"],
    # transactions: the composed manager's (plan_tx ... abort_tx, reserve_all, views, bundles).
    "refimpl/manager/transactions.py": ["tests/test_manager_tx.py", "tests/test_manager_tx_campaign.py",
                                "tests/test_manager_refimpl.py", "tests/test_manager_bad_input.py",
                                "tests/test_manager_contracts_local.py", "tests/test_manager_differential.py",
                                "tests/test_reserve_order.py", "tests/test_drop_view.py", "tests/test_authorities.py",
                                "tests/test_mutkill_transactions.py",
                                # these apply refimpl/verify's own source mutants, whose snippets mutmut's copies repeat
                                "--deselect", "tests/test_manager_contracts_local.py::test_local_contract_catches_manager_mutant",
                                "--deselect", "tests/test_manager_contracts_local.py::test_local_and_full_agree_under_hot_mutants",
                                "--deselect", "tests/test_manager_tx_campaign.py::test_tx_campaign_reaches_views_and_bundles_and_rejects_bad_input",
                                "--deselect", "tests/test_manager_tx.py::test_mutant_is_caught_by_its_harm_clause",
                                "--deselect", "tests/test_reserve_order.py::test_control_declared_order_in_the_governor_reaches_a_circle",
                                "--deselect", "tests/test_manager_contracts_local.py::test_what_the_local_contract_cannot_see_the_full_one_does"],
    # The other manager parts the ledger's records meet: ticket arbitration, two-phase limits, device loss.
    "refimpl/manager/arbitration.py": ["tests/test_manager_refimpl.py", "tests/test_manager_bad_input.py",
                                "tests/test_manager_contracts_local.py", "tests/test_manager_contracts_local_clauses.py",
                                "tests/test_manager_slots.py", "tests/test_bad_input.py",
                                "tests/test_arbitration_pinned_paths.py", "tests/test_mutkill_arbitration.py",
                                "tests/test_manager_quota.py",  # the rounds `_rounds` owes a tier's quota
                                "tests/test_mailbox.py",  # acquire applies the posts first
                                "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation",
                                "--deselect", "tests/test_manager_contracts_local.py::test_local_contract_catches_manager_mutant",
                                "--deselect", "tests/test_manager_contracts_local.py::test_local_and_full_agree_under_hot_mutants",
                                "--deselect", "tests/test_manager_contracts_local_clauses.py::test_snapshot_available_names_growth"],
    # The cancellation mailbox (drop, drain, wait): posts applied as composed CancelTickets, dropped tickets never
    # granted, bad posts refused typed, the bound on posts; the pinned arbitration paths that post and drain.
    # The real-thread suites (test_pressure_threads, test_manager_faults) are left out.
    "refimpl/manager/mailbox.py": ["tests/test_mailbox.py", "tests/test_manager_drop.py", "tests/test_mutkill_mailbox.py",
                                   "tests/test_arbitration_pinned_paths.py", "tests/test_manager_devices.py",
                                   "tests/test_bad_input.py",
                                   "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation"],
    # The composed manager's refinement mappings, contract runner and trace hooks: every composed verb through
    # `_run`, checked locally and in full and refused unchanged, a drained cancel, views, device loss, and
    # test_mutkill_views (stale cached records, a trace of every ledger kind replayed, unhashable ids). Kept
    # lean because every operation runs through this module (a survivor runs all of it): the bad-input
    # suites, test_contracts and test_manager_trace (4-8 s each) are left out.
    "refimpl/manager/views.py": ["tests/test_mutkill_views.py", "tests/test_manager_refimpl.py",
                                 "tests/test_manager_contracts_local_clauses.py", "tests/test_manager_contracts_local.py",
                                 "tests/test_mailbox.py", "tests/test_manager_drop.py", "tests/test_drop_view.py",
                                 "tests/test_manager_devices.py", "tests/conformance/test_device.py",  # the traced device
                                 "--deselect", "tests/test_manager_contracts_local.py::test_local_contract_catches_manager_mutant",
                                 "--deselect", "tests/test_manager_contracts_local.py::test_local_and_full_agree_under_hot_mutants"],
    "refimpl/manager/limits.py": ["tests/test_manager_quota.py", "tests/test_manager_refimpl.py", "tests/test_manager_bad_input.py",
                           "tests/test_manager_differential.py", "tests/test_spec_manager.py", "tests/test_bad_input.py",
                           "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation",
                           # patches limits.py's source (a mutmut copy holds it six times, trampolined)
                           "--deselect", "tests/test_manager_quota.py::test_the_full_contract_catches_a_grant_past_the_quota"],
    "refimpl/manager/devices.py": ["tests/test_bad_input.py", "tests/test_lifecycle.py", "tests/test_machine_units.py",
                            "tests/test_manager_bad_input.py", "tests/test_manager_contracts_local.py",
                            "tests/test_manager_refimpl.py",
                            "tests/test_replay.py", "tests/test_manager_devices.py",
                            "tests/test_authorities.py", "tests/test_mutkill_devices.py",
                            "--deselect", "tests/test_bad_input.py::test_cases_cover_every_public_operation",
                            "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean",
                            "--deselect", "tests/test_manager_contracts_local.py::test_local_contract_catches_manager_mutant",
                            "--deselect", "tests/test_manager_contracts_local.py::test_local_and_full_agree_under_hot_mutants"],
    # invariants/ (issue #26 item 4): the checkers are mutated like the governor. A clause weakened must make
    # a control or a clause test fail: the clause tests (each clause on a mutated state or step, each guard
    # off reaching its clause) and the negative controls of both layers, the two slowest (I5's poisoned
    # manager, 6 s each, also reached by the clause tests' poisoned states) left out.
    # The clause machinery itself: counting a clause's case, naming its failure, the conjunction and the
    # collecting mode that credits every failing clause to a control (verdict rule R3).
    "invariants/clauses.py": ["tests/test_verdict.py", "tests/test_harm_clauses.py"],
    # The admission models' clauses (I12, I8c, C5): the ledger-books clause tests, the verdict pins, and the
    # models' refinement campaigns and negative controls (3-4 s each in the mutation profile).
    "invariants/admission.py": ["tests/test_admission_ledger.py", "tests/test_verdict_pins.py", "tests/test_admission.py"],
    # The ledger clauses (C1 C2 I1 I2 I4a I4b I6, C8's snapshot): each clause's harm and near miss on states and
    # steps broken by hand, the verdict pins, the composed manager's clause tests (it reuses these predicates),
    # the ledger guards' negative controls and explorer cases, and the contracts and state machines that run
    # them on every step. Left out: the campaigns (the explorer's end-to-end run is test_verify's, not selected).
    "invariants/ledger.py": ["tests/test_ledger_clauses.py", "tests/test_verdict.py", "tests/test_verdict_pins.py",
                             "tests/test_manager_clauses.py", "tests/test_negative_controls.py", "tests/test_explore.py",
                             "tests/test_stateful.py", "tests/test_machine_units.py", "tests/test_contracts.py",
                             "tests/test_authorities.py",
                             "--deselect", "tests/test_stateful.py::test_campaign_reaches_deep_states_and_rejects_bad_input",
                             "--deselect", "tests/test_stateful.py::test_campaign_with_contracts_off_still_refines"],
    # The real-session model's clauses (C1 I3 I8 I8b I8c C7 C8 C9, and the two observations the ORT checker
    # feeds): each harm reached with a guard off or a registered spec mutant, or broken by hand, and its near
    # miss; the I3 and I8 harm scripts of test_harm_clauses. No ORT: the ort checker's campaign is left out.
    "invariants/sessions.py": ["tests/test_sessions_clauses.py", "tests/test_harm_clauses.py"],
    # The cooperative hierarchy's clauses (C10, I11): every clause's whole outcome on states and steps broken by
    # hand and on the first harmful step of each guard-off script, near misses and case witnesses; the spec's
    # own scripts and explorer controls, and the simulated hierarchy's refinement. The real-process and
    # crash suites are left out.
    "invariants/hierarchy.py": ["tests/test_hierarchy_clauses.py", "tests/test_hierarchy_vanished.py",
                                "tests/test_hierarchy_spec.py", "tests/test_hierarchy_sim.py"],
    # The composed manager's clauses (every ID on shared authorities): each clause broken on a state or step by
    # hand, the refimpl's local contracts judged against the full ones, the differential's guard-off cases, the
    # verdict scripts and harm scripts. The tests that apply refimpl/verify's own source mutants are left out.
    "invariants/manager.py": ["tests/test_manager_clauses.py", "tests/test_manager_clause_harms_i1.py",
                              "tests/test_manager_clause_harms_steps.py", "tests/test_manager_clause_cases.py",
                              "tests/test_manager_clause_harms_tickets.py",
                              "tests/test_manager_contracts_local_clauses.py",
                              "tests/test_verdict_scripts.py", "tests/test_harm_clauses.py", "tests/test_spec_manager.py",
                              "tests/test_manager_differential.py", "tests/test_manager_contracts_local.py",
                              # the clause modules' suites: they call check_step outside counting (its planned path)
                              *_MANAGER_CLAUSE_TESTS,
                              "--deselect", "tests/test_manager_contracts_local.py::test_local_contract_catches_manager_mutant",
                              "--deselect", "tests/test_manager_contracts_local.py::test_local_and_full_agree_under_hot_mutants"],
    # The composed manager's clause modules split out of invariants/manager.py (issue #26 item 4), each against the
    # fast scripted suites that break its clauses by hand (states, steps, guard-off scripts, near misses), the frame
    # table's per-mutation selection, and the grant-event and ordering scripts; the explorer runs are left out.
    **{m: _MANAGER_CLAUSE_TESTS for m in ("invariants/manager_holders.py", "invariants/manager_answers.py",
                                          "invariants/manager_bundles.py", "invariants/manager_views.py",
                                          "invariants/manager_tx.py", "invariants/manager_order.py",
                                          "invariants/manager_devices.py", "invariants/replay_grants.py",
                                          "invariants/step_frames.py", "invariants/manager_grow.py",
                                          "invariants/manager_tickets.py")},
    # the process quota's harm clause and room (D6): the clause suites, and the quota's own spec and refimpl tests
    "invariants/manager_quota.py": [*_MANAGER_CLAUSE_TESTS, "tests/test_spec_quota.py", "tests/test_manager_quota.py"],
    # The replay's trace reading and ledger-event decoding (issue #21 item 8): the replay self-tests (every failure
    # class at the smallest bad prefix, buggy governors' traces naming their ID), the replay-control corpus, the
    # conformance traces of refusals and fresh ids, and what a foreign governor's trace can get wrong
    # (test_replay_harms), and the spec's refusals quoted in the trace's ids (test_replay_messages). Left out: the
    # campaign-trace test (slow), and the tests that apply refimpl/verify's own source mutants, whose snippets
    # mutmut's copies repeat.
    "invariants/replay.py": ["tests/test_replay.py", "tests/test_replay_mutants.py", "tests/test_replay_harms.py",
                             "tests/conformance/test_refusals.py", "tests/conformance/test_fresh_ids.py",
                             "tests/test_replay_messages.py",
                             "tests/test_mutkill_manager_replay.py",  # the figures' shapes, read by the one decoder
                             "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean",
                             "--deselect", "tests/test_replay_mutants.py::test_mutant_flips_its_trace",
                             "--deselect", "tests/test_replay_mutants.py::test_every_replay_mutant_is_registered_and_tested"],
    # The one replay engine (issue #26 item 4, issue #21 items 1/4): the composed traces replayed clean and broken
    # by hand (each event removed, repeated, reordered, a figure or result changed or left out, an ill-typed
    # field), the aging and grant events, the refusal, fresh-id and upstream conformance traces (the converted ones
    # too: every upstream verdict is judged on them; their conversion tests need tools/, not copied), and the
    # ledger-only traces' self-tests and harms (a wrong figure named by its clause), the spec's text in its messages in the
    # trace's ids (test_replay_messages), with the same slow test left out as for invariants/replay.py.
    "invariants/manager_replay.py": ["tests/test_manager_trace.py", "tests/test_manager_trace_aging.py",
                                     "tests/test_grant_events.py", "tests/conformance/test_refusals.py",
                                     "tests/conformance/test_fresh_ids.py", "tests/conformance/test_upstream_traces.py",
                                     "tests/test_mutkill_manager_replay.py", "tests/test_replay.py",
                                     "tests/test_replay_harms.py", "tests/conformance/test_converted_traces.py",
                                     "tests/test_observed_figures.py", "tests/test_replay_messages.py",
                                     "tests/test_topology_epoch.py",
                                     "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean",
                                     "--deselect", "tests/conformance/test_converted_traces.py::test_the_converter"],
    # The replay checker's parts (issue #21 item 8), each against the replay suites that reach it, with the same
    # slow and source-mutant tests left out as for invariants/replay.py. Observed-step predicates (I2's charge):
    # the replay self-tests and harms, and the verdict pins that call the predicate directly.
    "invariants/replay_predicates.py": ["tests/test_replay.py", "tests/test_replay_harms.py",
                                        "tests/test_verdict_pins.py", "tests/test_mutkill_replay_predicates.py",
                                        "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean"],
    # The topology epochs against the spec's versions (issue #21 item 4): a stale or unexplained epoch after each
    # topology-changing kind, renumbering, the messages.
    "invariants/replay_epochs.py": ["tests/test_topology_epoch.py"],
    # Observed ids to the spec's: fresh-id conformance traces, the owed-grant rule's observed ids, spec text
    # rewritten into the trace's ids (test_replay_messages).
    "invariants/replay_ids.py": ["tests/test_replay.py", "tests/test_replay_harms.py",
                                 "tests/conformance/test_fresh_ids.py", "tests/conformance/test_refusals.py",
                                 "tests/test_mutkill_replay_grants.py", "tests/test_mutkill_replay_ids.py",
                                 "tests/test_replay_messages.py",
                                 "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean"],
    # The liveness checkers (issue #26 item 4): the starvation scope (I13's), the catalog's properties with their
    # fairness, and the lasso / SCC search on the explored graph. Each whole scope is built in well under a second,
    # so the property runs, the guard-off controls with their lassos replayed, and the fairness-weight tests are all
    # selected; test_mutkill_liveness pins the lassos' prefix and cycle states, the names and the fairness.
    **{m: ["tests/test_liveness.py", "tests/test_mutkill_liveness.py"]
       for m in ("invariants/manager_starvation.py", "invariants/liveness_props.py", "invariants/liveness.py")},
    # The replay's changed-record walk (issue #21 item 8): the diff against a full comparison along chains and off
    # them, the walk that never reads the whole map, the memo, and the step predicates on tracked states.
    "invariants/changed.py": ["tests/test_changed.py", "tests/test_mutkill_changed.py"],
    # The composed trace format: events written and replayed (every kind, broken by hand), the configure event,
    # the schema, test_mutkill_manager_trace's whole messages and boundaries of each decoder, and the figures an
    # event touches (`touched`: each left out, test_observed_figures).
    "invariants/manager_trace.py": ["tests/test_manager_trace.py", "tests/test_trace_schema.py",
                                    "tests/test_mutkill_manager_trace.py", "tests/test_observed_figures.py"],
    # The ledger trace format (issue #26 item 4): its values written exactly or opaque and read back (every bound),
    # the ledger event written whole, the recorder's traces (test_issue14_tracing), the documented example and
    # the schema, the tuple fields built on it, and the replay self-tests that feed it bad input (the campaign
    # test left out, as for invariants/replay.py).
    "invariants/trace_format.py": ["tests/test_mutkill_trace_format.py", "tests/test_trace_format.py",
                                   "tests/test_issue14_tracing.py", "tests/test_trace_schema.py",
                                   "tests/test_mutkill_manager_trace.py", "tests/test_replay.py",
                                   "--deselect", "tests/test_replay.py::test_campaign_traces_always_replay_clean"],
    # The trace schema: generated text compared whole with docs/trace-schema.json, events and malformed events
    # validated against it, and test_mutkill_trace_schema's layout boundaries.
    "invariants/trace_schema.py": ["tests/test_trace_schema.py", "tests/test_mutkill_trace_schema.py"],
    # The hierarchy trace: a run's trace written from the spec's steps and replayed, each failure class on an event
    # broken by hand, and the schema file. No real coordinator: its forked processes break mutmut's own child
    # bookkeeping (a KeyError on a pid it did not fork), so test_hierarchy_trace's recorded traces are left out.
    "invariants/hierarchy_trace.py": ["tests/test_mutkill_hierarchy_trace.py",
                                      "tests/test_hierarchy_trace.py::test_schema_file_is_current"],
    # The checked step every stateful checker shares (refinement after every step, G4, the counters, the
    # failure's script) and its state diff: a toy protocol whose governor goes wrong one way at a time, each
    # mismatch reported at the step it is planted on with its whole message (the real machines' campaigns, which
    # run every mutant of `_step` for seconds each, are left out).
    "invariants/checked.py": ["tests/test_mutkill_checked.py"],
    # A governor's own grants as GrantTicket steps (issue #21): the rule on hand-built states (the legal set, an
    # out-of-order grant, a waiter left pending, an over-grant, read through the governor's records); the two
    # campaign-level broken governors and the counts (tens of seconds each) are left out.
    "invariants/governor_grants.py": ["tests/test_governor_grants.py", "--deselect",
                                      "tests/test_governor_grants.py::test_the_campaign_catches_a_governor_that_breaks_"
                                      "the_grant_rule", "--deselect", "tests/test_governor_grants.py::test_the_campaign_"
                                      "counts_a_correct_governors_grants_as_GrantTicket_steps"],
    # Breadth-first exploration: a toy counter scope whose figures are worked out by hand (states, steps, refusals,
    # depth, diameter), a fixpoint "complete" and a depth-cut or state-bounded search never, a violation's
    # shortest counterexample and its clauses, keys and fingerprints, the progress ticks. The real scopes'
    # explorer runs (seconds each, every mutant of `_explore` would run them all) are left out.
    "invariants/explore.py": ["tests/test_mutkill_explore.py"],
    # Successor memoization: the memoized successors against the plain step's on every state of a quick scope
    # (QUICK_SCOPE to depth 2, well under a second), a stand-in step that counts its calls (a hit rebuilt on the
    # current state, a refusal raised again fresh, a write outside the footprint caught), and the footprint table's
    # own checks. test_explore_memo's whole-scope comparisons (5-17 s each) are left out.
    "invariants/explore_memo.py": ["tests/test_mutkill_explore_memo.py"],
    # Level-synchronous parallel exploration (forked workers; a mutant is active in them: they inherit mutmut's
    # MUTANT_UNDER_TEST): parallel = serial on toy counter grids of 25-625 states, 1-2 workers (the wide levels
    # dealt out), whole, depth-cut, state-bounded, with a symmetry key, with a violation (state, step, both) and
    # its trace and clauses, a worker's error raised here and a dead worker's EOFError. The real scopes' parallel
    # runs in test_explore*.py (seconds each) are left out.
    "invariants/explore_parallel.py": ["tests/test_mutkill_explore_parallel.py"],
    # The progress ticks' ambient sink: a tick reaches the sink installed around it (counter and amount) and
    # nobody else, a no-op with none, an inner block (None included) hiding the outer until it ends, on an error too.
    "invariants/progress.py": ["tests/test_mutkill_progress.py"],
    # The governor protocol and the id mapping (OwnIds): renaming over every id-bearing field kind, the identity
    # binding, a foreign governor's ids bound to the spec's (the binding under which it agrees, else the order of
    # appearance), an id handed out again, the failure's script; and test_own_governor's scripted cases (a foreign
    # governor, an id reused, a grant left uncharged whatever the ids, the field and result-kind tables). Its README
    # and guide runs (Hypothesis searches, 5-60 s each) are left out.
    "invariants/adapter.py": ["tests/test_mutkill_adapter.py",
                              *(f"tests/test_own_governor.py::{t}" for t in (
                                  "test_the_foreign_governor_issues_none_of_the_specs_ids",
                                  "test_an_id_handed_out_again_is_caught",
                                  "test_every_int_field_of_the_spec_is_an_id_the_adapter_renames_or_a_figure",
                                  "test_result_kinds_are_read_from_the_specs_documented_actions",
                                  "test_a_grant_left_uncharged_is_caught_whatever_the_ids"))],
    # The explorer's own parts (issue #26 item 4). ITF counterexamples: every value kind, the golden ITF files of
    # the ledger guards, every scope's states encoded, and test_mutkill_itf's whole traces and refusals.
    "invariants/itf.py": ["tests/test_itf.py", "tests/test_mutkill_itf.py"],
    # Canonical forms: reduced and unreduced runs agree on every guard and keep one state per orbit, the ledger key
    # is a bisimulation, and test_mutkill_explore_symmetry's keys of states permuted and of states changed. Left out:
    # the limits scope's bisimulation failure (13 s; test_mutkill_explore_symmetry names limits' group directly).
    "invariants/explore_symmetry.py": ["tests/test_explore_symmetry.py", "tests/test_mutkill_explore_symmetry.py",
                                       "--deselect", "tests/test_explore_symmetry.py::"
                                       "test_holders_are_not_interchangeable_where_limits_change"],
    # Incremental checks: test_mutkill_explore_checks walks each quick scope (every manager guard's control, the view
    # and quota scopes) judging every state and step both ways, and pins how many distinct inputs each projection
    # passed on (so a projection reading less or more fails), with planted violations; test_explore_fast's declared
    # reads, bundle scope and controls. Its other walks of the same scopes and the parallel explorer are left out.
    "invariants/explore_checks.py": ["tests/test_mutkill_explore_checks.py",
                                     *(f"tests/test_explore_fast.py::{t}" for t in (
                                         "test_incremental_checks_skip_only_declared_predicates",
                                         "test_incremental_checks_report_a_failure_seen_before",
                                         "test_bundle_projection_flags_a_bundle_moved_without_its_commit",
                                         "test_incremental_checks_flag_exactly_what_the_full_checks_flag_with_a_bundle",
                                         "test_incremental_explorer_finds_each_control_as_the_full_one"))],
    # The violation classes (what a failed clause raises and carries): test_mutkill__violation pins each class's
    # whole message and arguments, its id and clause, and that none is a caller error (GovernorError).
    "invariants/_violation.py": ["tests/test_mutkill__violation.py"],
    # The composed campaign's cases of interest: test_mutkill_manager_events names each case exactly when it happens
    # on hand-made states around one step, and not on its near misses (each condition broken in turn). The campaign
    # that counts them (test_manager_campaign_reach, 120 x 50 examples on both layers) is left out.
    "invariants/manager_events.py": ["tests/test_mutkill_manager_events.py"],
    # The campaign runners (what R1's coverage rests on): test_mutkill_campaign runs a toy machine whose governor goes
    # wrong one way at a time, its counts compared exactly with what the toy saw, each control's whole result pinned
    # (a fake clock), and the settings, seeds, database and progress ticks read back. The real campaigns and
    # controls (test_stateful, test_negative_controls: seconds each, every mutant of `hunt` would run them) are left out.
    "invariants/campaign.py": ["tests/test_mutkill_campaign.py"],
    # The contract switch: start value and level under each environment, on/off/level and the watchers told of each
    # change, the context manager, the bad level's message, what a governor checks under each setting
    # (test_mutkill_contracts); test_contracts' switch tests (its fresh-interpreter starts included) and its ledger
    # guards' negative controls (2 s in all).
    "invariants/contracts.py": ["tests/test_mutkill_contracts.py", "tests/test_contracts.py"],
    # The mutant applier, on a scratch module of test_mutkill_mutation's own (stale snippets and their messages, the
    # definition a snippet lies in, every rebinding, table entry and composed class's base restored exactly). The
    # suites that apply the registered mutants (each a clause's control, seconds per run) are left out.
    "invariants/mutation.py": ["tests/test_mutkill_mutation.py"],
    # The drift check: test_mutkill_drift's own catalog, predicate tables, guards, docs and tests, each problem
    # planted and its whole message pinned in order, and an installed copy's unchecked parts; test_drift's project
    # in step and its stale docs and missing test.
    "invariants/drift.py": ["tests/test_mutkill_drift.py", "tests/test_drift.py"],
    # The situations a composed scope must reach: test_mutkill_manager_features pins every situation's count of
    # accepted steps on seven small scopes (complete, or cut at a depth; 3.5 s in all, cheapest first)
    # that together reach all of them. The quick scopes' own run (test_explore_scopes, 35 s) is left out.
    "invariants/manager_features.py": ["tests/test_mutkill_manager_features.py"],
}
DEFAULT_MODULES = list(MODULES)

#: mutmut exit-code statuses -> the classes reported here.
_DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
_STATUS_CLASS = {"killed": "killed", "timeout": "timeout", "survived": "survived", "no tests": "no_tests"}

COPIED = ["spec", "invariants", "refimpl", "tests", "docs"]  # docs: the trace schema some tests read


def _slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def _mutmut_config(module: str, tests: list[str]) -> str:
    """The pyproject.toml of one module's scratch copy."""
    lines = [
        "[tool.mutmut]",
        'source_paths = ["spec", "invariants", "refimpl"]',
        f"only_mutate = [{json.dumps(module)}]",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        # -x: a mutant is killed by its first failure; no cache, no -ra noise.
        'pytest_add_cli_args = ["-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]',
        "use_git_change_detection = false",
        'also_copy = ["docs"]',
        # CPU-time limits (not wall: the machine is shared): 4 x (2 x the tests' own time + 1 s).
        "timeout_multiplier = 4.0",
        "",
        "[tool.pytest.ini_options]",
        'testpaths = ["tests"]',
        "",
    ]
    return "\n".join(lines)


def _prepare(workdir: Path, module: str, tests: list[str]) -> Path:
    here = workdir / _slug(module)
    if here.exists():
        shutil.rmtree(here)
    here.mkdir(parents=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, here / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    (here / "pyproject.toml").write_text(_mutmut_config(module, tests))
    return here


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # conftest's "mutation" Hypothesis profile: derandomized, no example database, 15 examples x 20 steps.
    env["HYPOTHESIS_PROFILE"] = "mutation"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _statuses(here: Path, module: str) -> dict[str, str]:
    """Mutant id -> mutmut status, read from mutmut's own meta file."""
    from mutmut.stats import status_by_exit_code

    meta = here / "mutants" / (module + ".meta")
    data = json.loads(meta.read_text())
    return {k: status_by_exit_code[v] for k, v in sorted(data["exit_code_by_key"].items())}


def _diffs(here: Path, module: str, mutants: list[str]) -> dict[str, str]:
    """The changed lines of each mutant, as `mutmut show` prints them (read in-process: one
    `mutmut show` per survivor costs a second or more on a loaded machine)."""
    from mutmut.configuration import reset_config
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    old = os.getcwd()
    os.chdir(here)
    reset_config()
    try:
        out = {}
        for m in mutants:
            diff = get_diff_for_mutant(m, path=module)
            out[m] = "\n".join(line for line in diff.splitlines()
                               if line.startswith(("-", "+")) and not line.startswith(("---", "+++")))
        return out
    finally:
        os.chdir(old)
        reset_config()


def load_equivalent(path: Path = EQUIVALENT) -> list[dict[str, str]]:
    """The reviewed list of equivalent mutants (module, mutant, line, reason)."""
    if not path.exists():
        return []
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    for e in entries:
        missing = {"module", "mutant", "line", "reason"} - set(e)
        if missing:
            raise ValueError(f"{path.name}: entry {e.get('mutant')!r} lacks {sorted(missing)}")
    return entries


def orphaned_equivalents(entries: list[dict[str, str]], root: Path = ROOT) -> list[str]:
    """Entries whose module is gone or not a target, or whose mutated function is no longer defined in it.

    `classify` checks an entry only when its module runs, so an entry of deleted code would stay listed for ever
    (twelve of `refimpl/manager/leases.py`, a module deleted with the pool front end, did)."""
    bad: list[str] = []
    for e in entries:
        path = root / e["module"]
        # "spec.ledger.x_reserve__mutmut_3" / "refimpl.manager.views.xǁViewsǁ_bind__mutmut_7" -> the function name
        name = re.sub(r"__mutmut_\d+$", "", e["mutant"].rsplit(".", 1)[-1]).split("\u01c1")[-1]
        name = name[2:] if name.startswith("x_") else name
        if e["module"] not in MODULES or not path.exists():
            bad.append(f"{e['mutant']}: module {e['module']} is not a mutation target")
        elif not re.search(rf"def {re.escape(name)}\(", path.read_text()):
            bad.append(f"{e['mutant']}: {e['module']} defines no function {name}")
    return bad


def classify(module: str, statuses: dict[str, str], diffs: dict[str, str],
             equivalent: list[dict[str, str]]) -> tuple[dict[str, object], list[str]]:
    """Counts and survivors of one module; errors for equivalent entries that do not hold."""
    errors: list[str] = []
    marked = {}
    for e in equivalent:
        if e["module"] != module:
            continue
        m = e["mutant"]
        if m not in statuses:
            errors.append(f"equivalent entry {m}: no such mutant")
        elif statuses[m] in _DETECTED:
            errors.append(f"equivalent entry {m}: it was {statuses[m]}, so it is not equivalent")
        elif e["line"].strip() not in diffs.get(m, ""):
            errors.append(f"equivalent entry {m}: its diff no longer shows {e['line'].strip()!r} (stale id)")
        else:
            marked[m] = e["reason"]
    counts = {"mutants": len(statuses), "killed": 0, "timeout": 0, "survived": 0, "no_tests": 0, "other": 0,
              "equivalent": len(marked)}
    survivors = []
    for m, status in statuses.items():
        if m in marked:
            continue
        cls = _STATUS_CLASS.get(status, "killed" if status in _DETECTED else "other")
        counts[cls] += 1
        if cls in ("survived", "no_tests", "other"):
            survivors.append({"mutant": m, "status": status, "diff": diffs.get(m, "")})
    counts["kill_rate"] = kill_rate(counts)
    counts["survivors"] = survivors
    counts["equivalent_marked"] = [{"mutant": m, "reason": r} for m, r in sorted(marked.items())]
    return counts, errors


def kill_rate(c: dict[str, object]) -> float:
    """(killed + timeout) / (mutants - equivalent); 1.0 when nothing is left to kill."""
    denom = int(c["mutants"]) - int(c["equivalent"])  # type: ignore[call-overload]
    detected = int(c["killed"]) + int(c["timeout"])  # type: ignore[call-overload]
    return round(detected / denom, 4) if denom else 1.0


def source_hash(data: bytes) -> str:
    """The sha256 of a module's source bytes, recorded with each run (`source_sha256`)."""
    return hashlib.sha256(data).hexdigest()


def stale(results: dict[str, dict[str, object]], root: Path = ROOT) -> dict[str, str]:
    """Module -> "stale: ..." for every result whose module's source today is not the source its run mutated.

    Not a ratchet failure (that would force a mutation run per edit): the report and the table say it next to
    the rate, so a floor is never read as true of code its run did not see."""
    out = {}
    for module, r in sorted(results.items()):
        path = root / module
        if not path.exists() or source_hash(path.read_bytes()) != r.get("source_sha256"):
            out[module] = f"stale: changed since its recorded run at {r.get('commit', 'unknown')}"
    return out


def check_ratchet(results: dict[str, dict[str, object]], ratchet: dict[str, float]) -> list[str]:
    """Every ratchet module has a result at or above its floor; every module run is in the ratchet;
    every result's counts add up, its rate is the one its counts give, and it names its source's hash."""
    problems = []
    for module, floor in sorted(ratchet.items()):
        r = results.get(module)
        if r is None:
            problems.append(f"{module}: in the ratchet but not in the results")
            continue
        if float(r["kill_rate"]) < floor:  # type: ignore[arg-type]
            problems.append(f"{module}: kill rate {r['kill_rate']} below the ratchet floor {floor}")
    for module, r in sorted(results.items()):
        if module not in ratchet:
            problems.append(f"{module}: run, but has no ratchet floor")
        parts = sum(int(r[k]) for k in ("killed", "timeout", "survived", "no_tests", "other", "equivalent"))  # type: ignore[call-overload]
        if parts != r["mutants"]:
            problems.append(f"{module}: counts add up to {parts}, not {r['mutants']} mutants")
        if r.get("incomplete"):
            problems.append(f"{module}: the run did not finish (budget), its rate is not a result")
        if not r.get("source_sha256"):
            problems.append(f"{module}: no source_sha256, so whether its module changed since cannot be told")
        if kill_rate(r) != r["kill_rate"]:
            problems.append(f"{module}: kill rate {r['kill_rate']} is not what its counts give ({kill_rate(r)})")
    return problems


def next_ratchet(old: dict[str, float], results: dict[str, dict[str, object]], modules: list[str],
                 *, allow_lower: bool) -> tuple[dict[str, float], list[str]]:
    """The ratchet after a run of `modules`: floors rise to the new rates and never fall unless
    allow_lower; a module whose run did not finish keeps its old floor. Returns (floors, refused)."""
    new = dict(old)
    refused = []
    for module in modules:
        r = results[module]
        if r.get("incomplete"):
            continue
        rate = float(r["kill_rate"])  # type: ignore[arg-type]
        floor = old.get(module)
        if floor is None or rate >= floor:
            new[module] = rate
        elif allow_lower:
            new[module] = rate
        else:
            refused.append(f"{module}: {rate} < floor {floor}")
    return new, refused


def _test_files(selection: list[str]) -> list[str]:
    return [a for a in selection if a.endswith(".py")]


def _resume(workdir: Path, module: str, tests: list[str]) -> tuple[Path, list[str]]:
    """The module's existing copy with today's tests/, and the mutants it has not yet detected.

    Only valid when the selection is unchanged (mutmut resets every verdict when it changes) and
    tests were only added: a detected mutant stays detected because the test that caught it is
    still there, so rerunning the others with the new tests gives the same figures as a full run."""
    here = workdir / _slug(module)
    if not (here / "mutants" / (module + ".meta")).exists():
        raise SystemExit(f"--resume: no earlier run of {module} under {workdir}")
    def selection(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith(("pytest_add_cli_args", "only_mutate"))]

    # The copy keeps its own pyproject.toml: a changed selection would make mutmut reset every verdict.
    if selection((here / "pyproject.toml").read_text()) != selection(_mutmut_config(module, tests)):
        raise SystemExit(f"--resume: the test selection of {module} changed since its run; run it in full")
    for dst in (here / "tests", here / "mutants" / "tests"):
        shutil.copytree(ROOT / "tests", dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    return here, [m for m, st in _statuses(here, module).items() if st not in _DETECTED]


def run_module(module: str, workdir: Path, max_children: int, budget_s: float,
               equivalent: list[dict[str, str]], resume: bool = False) -> tuple[dict[str, object], list[str]]:
    names: list[str] = []
    before = 0.0
    if resume:
        here = workdir / _slug(module)
        # walls.json: the wall seconds of every earlier invocation on this copy (the full run first).
        before = sum(json.loads((here / "walls.json").read_text())) if (here / "walls.json").exists() else 0.0
        here, names = _resume(workdir, module, MODULES[module])
        print(f"   resuming: rerunning {len(names)} undetected mutants with today's tests", flush=True)
    else:
        here = _prepare(workdir, module, MODULES[module])
    start = time.monotonic()
    incomplete = False
    try:
        # mutmut's progress goes to a log beside the copy (tail -f it); its own spinner is noise here.
        # Own process group, so the budget stops mutmut's forked workers too, not only its parent.
        with open(here / "mutmut-run.log", "a" if resume else "w") as log:
            proc = subprocess.Popen([sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names],
                                    cwd=here, env=_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=budget_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                raise
        if proc.returncode != 0:
            tail = (here / "mutmut-run.log").read_text()[-4000:]
            raise RuntimeError(f"mutmut run failed for {module} (rc {proc.returncode}):\n{tail}")
    except subprocess.TimeoutExpired:
        incomplete = True
    wall = time.monotonic() - start
    walls = json.loads((here / "walls.json").read_text()) if resume and (here / "walls.json").exists() else []
    (here / "walls.json").write_text(json.dumps([*walls, round(wall, 1)]))
    statuses = _statuses(here, module)
    total = len(statuses)
    if incomplete:
        statuses = {k: v for k, v in statuses.items() if v != "not checked"}
    diffs = _diffs(here, module, [m for m, s in statuses.items() if s not in _DETECTED])
    counts, errors = classify(module, statuses, diffs, equivalent)
    counts["tests"] = MODULES[module]
    counts["wall_s"] = round(wall, 1)
    counts["resumed"] = resume
    counts["wall_s_before_resume"] = round(before, 1)
    counts["mutmut_config"] = (here / "pyproject.toml").read_text().split("\n\n")[0]
    counts["incomplete"] = incomplete
    counts["not_checked"] = total - len(statuses)  # > 0 only when the budget cut the run
    counts["source_sha256"] = source_hash((here / module).read_bytes())  # the copy's unmutated source
    return counts, errors


def _table(results: dict[str, dict[str, object]], modules: list[str], root: Path = ROOT) -> str:
    head = f"{'module':28} {'mutants':>7} {'killed':>6} {'timeout':>7} {'survived':>8} {'no tests':>8} {'equiv':>5} {'rate':>7} {'wall s':>7}"
    rows = [head, "-" * len(head)]
    old = stale(results, root)
    for m in modules:
        r = results.get(m)
        if r is None:
            rows.append(f"{m:28} not run")
            continue
        flag = (" (incomplete)" if r.get("incomplete") else "") + (f" ({old[m]})" if m in old else "")
        rows.append(f"{m:28} {r['mutants']:>7} {r['killed']:>6} {r['timeout']:>7} {r['survived']:>8} "
                    f"{r['no_tests']:>8} {r['equivalent']:>5} {float(r['kill_rate']):>7.1%} {r.get('wall_s_total', r['wall_s']):>7}{flag}")  # type: ignore[arg-type]
    return "\n".join(rows)


def _git_head() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", default=",".join(DEFAULT_MODULES))
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=900.0, help="wall-clock budget per module")
    ap.add_argument("--workdir", type=Path, default=ROOT / ".mutation-work")
    ap.add_argument("--lower-ratchet", action="store_true", help="allow a floor to fall to the new rate")
    ap.add_argument("--no-ratchet", action="store_true", help="do not touch the ratchet file")
    ap.add_argument("--resume", action="store_true",
                    help="reuse each module's last copy; rerun only its undetected mutants with the current tests")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: the recorded results' table, stale ones flagged, and the ratchet's problems")
    args = ap.parse_args(argv)
    if args.report:
        return report()
    modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in modules if m not in MODULES]
    if unknown:
        ap.error(f"no test selection for {unknown}; known: {sorted(MODULES)}")

    equivalent = load_equivalent()
    results = json.loads(RESULTS.read_text())["modules"] if RESULTS.exists() else {}
    errors: list[str] = []
    t0 = time.monotonic()
    for module in modules:
        print(f"== {module}: {len(_test_files(MODULES[module]))} test files", flush=True)
        counts, errs = run_module(module, args.workdir, args.max_children, args.budget_s, equivalent, args.resume)
        counts["wall_s_total"] = round(counts["wall_s"] + counts["wall_s_before_resume"], 1)  # type: ignore[operator]
        counts["commit"] = _git_head()
        counts["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        results[module] = counts
        errors += errs
        print(f"   {counts['mutants']} mutants, rate {float(counts['kill_rate']):.1%}, {counts['wall_s']} s", flush=True)  # type: ignore[arg-type]
    total = round(time.monotonic() - t0, 1)
    # Re-read before writing: another invocation (other modules) may have written meanwhile.
    # A run cut short by the budget is kept apart: its rate is not a result and has no floor.
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    merged, cut = old.get("modules", {}), old.get("incomplete", {})
    for m in modules:
        merged.pop(m, None)
        cut.pop(m, None)
        (cut if results[m]["incomplete"] else merged)[m] = results[m]
    RESULTS.write_text(json.dumps({"tool": _tool_version(), "modules": dict(sorted(merged.items())),
                                   "incomplete": dict(sorted(cut.items()))}, indent=1) + "\n")
    results = {**cut, **merged}

    print()
    print(_table(results, list(MODULES)))
    print(f"\nthis run: {total} s for {len(modules)} module(s); results in {RESULTS.relative_to(ROOT)}")
    for module in modules:
        for s in results[module]["survivors"]:  # type: ignore[union-attr]
            print(f"\n{s['status']}: {s['mutant']}\n{s['diff']}")
    for e in errors:
        print(f"ERROR: {e}")

    rc = 1 if errors else 0
    if not args.no_ratchet:
        ratchet = json.loads(RATCHET.read_text())["floors"] if RATCHET.exists() else {}
        new, refused = next_ratchet(ratchet, results, modules, allow_lower=args.lower_ratchet)
        if refused:
            print("REFUSED to lower the ratchet (pass --lower-ratchet to accept):\n  " + "\n  ".join(refused))
            rc = 1
        RATCHET.write_text(json.dumps({"floors": dict(sorted(new.items()))}, indent=1) + "\n")
    return rc


def report() -> int:
    """The committed results against the ratchet, without running anything: 1 if the ratchet fails.

    A stale result (its module changed since its run) is flagged, not failed: rerun that module to refresh it."""
    results = json.loads(RESULTS.read_text())["modules"]
    print(_table(results, sorted(results)))
    problems = check_ratchet(results, json.loads(RATCHET.read_text())["floors"])
    for p in problems:
        print(f"RATCHET: {p}")
    print(f"\n{len(stale(results))} of {len(results)} results stale (their module changed since the run)")
    return 1 if problems else 0


def _tool_version() -> str:
    try:
        from importlib.metadata import version

        return f"mutmut {version('mutmut')}"
    except Exception:  # noqa: BLE001 - the version is a label only
        return "mutmut (version unknown)"


if __name__ == "__main__":
    sys.exit(main())
