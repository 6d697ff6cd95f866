# The request path of `GovernedRuntime`: open a request (I8c's guaranteed
# path to max context), decode on bindings built once per KV bucket (the hot
# path is lookups, one compare and ORT's Run), grow KV two-phase (grow ->
# Run -> install, abandon on failure, so an ORT failure (`RunFailed`) keeps
# no grown lease), answer arena pressure at a Run boundary, close.
#
# Owns: the decode and growth steps. Must not touch: admission of models,
# limits (refimpl.ort.lowering), the refinement mapping. A mixin of
# `GovernedRuntime`: it reads the runtime's fields, never spec transitions.

from __future__ import annotations

from typing import Any

from invariants._violation import InvariantViolation
from refimpl.ort.arena import ArenaAnswer
from refimpl.ort.residency import process_rss
from spec import sessions as S
from spec.arith import kv_bytes, kv_growth_peak
from spec.errors import (
    CapacityDenied,
    ContextExhausted,
    GovernorError,
    InvalidArgument,
    InvalidTransition,
    RunFailed,
    UnknownAllocation,
)

__all__ = ["RequestPath"]


def _path_peak(f: S.ModelFacts) -> int:
    """The largest KV charge on one request's way to max context: the last growth, old and new buffers live."""
    if f.max_context <= f.bucket:
        return f.max_context * f.bytes_per_token
    last = (f.max_context - 1) // f.bucket * f.bucket
    return (last + f.max_context) * f.bytes_per_token



class RequestPath:
    """Open, decode (KV growth included) and close requests; a mixin of `GovernedRuntime`."""

    def _open(self, a: S.Open) -> int:
        rec = self.models.get(a.model) if type(a.model) is str and a.model else None
        if type(a.model) is not str or not a.model:
            raise InvalidArgument(f"model must be a non-empty str, got {a.model!r}")
        if rec is None or rec.mode is not S.Mode.MANAGED or not rec.measured.facts.bytes_per_token:
            raise InvalidTransition(f"{a.model!r} is not a loaded, managed model with KV")
        f = rec.measured.facts
        weights = self._held()  # weights and the arena as the ledger charges them (the env arena once)
        paths = sum(_path_peak(self.models[m].measured.facts) for m, _ in self.requests.values()) + _path_peak(f)
        if weights + paths + self.topology.headroom > self.limit:  # I8c: guaranteed path for every request
            raise CapacityDenied(f"{a.model}: no guaranteed path to max context")
        cap = min(f.bucket, f.max_context)
        self._make_room(kv_bytes(cap, f.bytes_per_token))
        rid = self.next_request
        self.kv.open(rid, rec.measured.heads, rec.measured.dh, cap, f.bytes_per_token,
                     self.replicas.session_of(a.model, rec.session))
        self.next_request = rid + 1  # only once the bucket is leased and bound: a failed open takes no id
        self.requests[rid] = (a.model, cap)
        return rid

    def _request(self, rid: object) -> tuple[str, int]:
        if type(rid) is not int or rid not in self.requests:
            raise UnknownAllocation(f"request {rid!r} is not open")
        return self.requests[rid]

    def _decode(self, a: S.Decode) -> int:
        # The hot path (issue #11 item 7): lookups, one compare, and the bucket's prebuilt binding.
        rid = a.rid
        req = self.requests.get(rid) if type(rid) is int else None
        if req is None:
            raise UnknownAllocation(f"request {rid!r} is not open")
        model, cap = req
        b = self.kv.bundles[rid]
        tokens = b.tokens
        if tokens < cap and not self.arena_pending:
            try:
                self.last_output = self.kv.run(b, self.inputs(rid, tokens, b.x.size))  # b: the request's bundle
            except (GovernorError, InvariantViolation):
                raise
            except Exception as e:  # ORT's error (arena cap, binding shape...): an environment event
                raise self._run_failed(rid, tokens, e, grown=False) from e
            return 0
        rec = self.models[model]
        f = rec.measured.facts
        if tokens >= f.max_context:
            raise ContextExhausted(f"request {a.rid} holds {tokens} = max context")
        if tokens < cap:  # pressure is pending on the arena: this Run is the boundary that answers it
            self._run_shrinking(rid, tokens, b)
            return 0
        new = min(cap + f.bucket, f.max_context)
        extra = kv_growth_peak(cap, new, f.bytes_per_token) - kv_bytes(cap, f.bytes_per_token)
        # One reading of the ledger for both checks (`_pinned`, `limit` and `_make_room` would take four):
        # used less the reclaimable cache must leave room (else no reclaim can help), and reclaim runs
        # only when used itself leaves none.
        snap, headroom = self.pmm.snapshot(self.auth), self.topology.headroom
        limit = snap.limit + headroom
        if snap.used - self.weights.cache_bytes + extra + headroom > limit:
            raise CapacityDenied(f"request {a.rid}: growth needs {extra} B")
        released = self._make_room(extra) if snap.used + extra + headroom > limit else 0
        grown = self.kv.grow(rid, new, f.bytes_per_token)  # old bucket still the request's
        try:
            self.last_output = self.kv.run(grown, self.inputs(rid, tokens, b.x.size))
        except BaseException as e:
            self.kv.abandon(grown)  # no grown lease is kept for a step that did not happen
            if isinstance(e, (GovernorError, InvariantViolation)) or not isinstance(e, Exception):
                raise
            raise self._run_failed(rid, tokens, e, grown=True, released=released) from e
        self.kv.install(rid, grown)
        self.requests[rid] = (model, new)
        return released

    def _run_shrinking(self, rid: int, tokens: int, b: Any) -> None:
        before = process_rss()
        try:
            self.last_output = self.kv.step(rid, self.inputs(rid, tokens, b.x.size), self._shrink)
        except (GovernorError, InvariantViolation):
            raise
        except Exception as e:  # not answered: the tickets stay open, the next Run boundary tries again
            raise self._run_failed(rid, tokens, e, grown=False) from e
        after = process_rss()
        self.arena_shrinks += 1
        due, self._arena_pressures, self.arena_pending = self._arena_pressures, [], 0
        for pid in due:  # the Run boundary: the arena holder answers; its charge is the cap, it credits 0 B
            released = self.pmm.answer(self.arena, pid, ())
            self.arena_answers.append(ArenaAnswer(pid, released, None if before is None else before.nbytes,
                                                  None if after is None else after.nbytes))

    @staticmethod
    def _run_failed(rid: int, tokens: int, e: Exception, grown: bool, released: int = 0) -> RunFailed:
        what = "; the grown bucket's lease was returned, the request keeps its old bucket" if grown else ""
        err = RunFailed(f"request {rid} step {tokens}: ORT's Run failed ({type(e).__name__}: {e}); the step "
                        f"was not applied{what}")
        # What the growth's room-making credited before the Run failed: the weight holder's answer to its
        # pressure ticket is final, so these cache bytes stay yielded (spec.sessions.RunFails' result).
        err.released = released  # type: ignore[attr-defined]
        return err

    def _close(self, a: S.Close) -> None:
        self._request(a.rid)
        self.kv.close(a.rid)
        del self.requests[a.rid]
