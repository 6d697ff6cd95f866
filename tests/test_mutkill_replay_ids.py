"""Mutation survivors of `invariants/replay_ids.py`, killed (placeholder)."""
