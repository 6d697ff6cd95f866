"""Mutation survivors of `invariants/replay_store.py`, killed (placeholder)."""
