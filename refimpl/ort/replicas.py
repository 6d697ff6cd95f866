# Weight replicas in the weight cache: borrowed bytes that ORT really reads
# (issue #11 item 3) [ort:prepacking].
#
# The weight holder's cache is borrowed, reclaimable memory. Where a cache
# bucket has room for a whole copy of a loaded model's weights, the copy is
# placed there and a replica session is built over it (initializers from the
# cache bytes via `add_initializer`, prepacking off, so every Run reads them
# [ort:prepacking]):
# decodes of that model run on the replica (think: a NUMA-local copy). When a
# pressure answer takes any byte of the bucket (a victim, or a split that
# re-leases it), the replica is dropped before the bytes go and every open
# request of the model is re-bound to the primary session, which reads the
# pinned weight lease. The outputs are identical either way (same bytes, same
# options); what changes is which leased bytes ORT reads [ort:prepacking].
#
# Owns: the replica placements and sessions. Must not touch: any lease (the
# cache's leases are the weight holder's; a replica is a use of them, not a
# charge), admission or limits.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime as ort

__all__ = ["Replicas"]

_ALIGN = 64


class _Replica:
    __slots__ = ("model", "aid", "buf", "start", "end", "session", "views")

    def __init__(self, model: str, aid: int, buf: np.ndarray, start: int, end: int) -> None:
        self.model, self.aid, self.buf, self.start, self.end = model, aid, buf, start, end
        self.session: Any = None
        self.views: list[Any] = []


class Replicas:
    """Which models have a replica in the cache, and the session each model's decodes run on."""

    def __init__(self, weights: Any, make_options: Callable[[], ort.SessionOptions]) -> None:
        self.weights, self.make_options = weights, make_options
        self.by_model: dict[str, _Replica] = {}
        self.placed = self.dropped = 0

    def place(self, models: dict[str, Any]) -> list[str]:
        """Put a replica of each managed model without one into cache room; return the models that got one."""
        got = []
        for name, rec in models.items():
            if (name in self.by_model or rec.weights_lease is None or rec.session is None
                    or not rec.measured.facts.bytes_per_token):  # replicas serve decodes only
                continue
            layout = self.weights.layouts.get(name)
            if layout is None:
                continue
            size = layout[0].nbytes
            spot = self._room(size)
            if spot is None:
                continue
            aid, buf, start = spot
            r = _Replica(name, aid, buf, start, start + size)
            region = buf[start:start + size]
            region[...] = layout[0]  # the weights' bytes, copied into the borrowed cache memory
            so = self.make_options()
            for key, off, dtype, shape in layout[1]:
                view = region[off:off + int(np.prod(shape)) * np.dtype(dtype).itemsize].view(dtype).reshape(shape)
                value = ort.OrtValue.ortvalue_from_numpy(view)
                r.views += [view, value]
                so.add_initializer(key, value)
            r.session = ort.InferenceSession(rec.measured.path, so, providers=rec.session.get_providers()[:1])
            self.by_model[name] = r
            self.placed += 1
            got.append(name)
        return got

    def _room(self, size: int) -> tuple[int, np.ndarray, int] | None:
        for aid, buf in self.weights.cache:
            used = [r.end for r in self.by_model.values() if r.buf is buf]
            base = buf.__array_interface__["data"][0]
            start = max(used, default=0)
            start += (-(base + start)) % _ALIGN
            if start + size <= buf.nbytes:
                return aid, buf, start
        return None

    def stale(self) -> list[str]:
        """Models whose replica lost its bytes (the bucket was a victim or was split): drop them."""
        live = {id(buf): aid for aid, buf in self.weights.cache}
        gone = [m for m, r in self.by_model.items() if live.get(id(r.buf)) != r.aid]
        for m in gone:
            self.drop(m)
        return gone

    def before_reclaim(self, target: int) -> None:
        """Drop every replica whose bucket the holder's answer to `target` bytes may take (before the bytes go)."""
        for m in [m for m, r in self.by_model.items() if self._at_risk(r, target)]:
            self.drop(m)

    def _at_risk(self, r: _Replica, target: int) -> bool:
        got = 0
        for aid, buf in reversed(self.weights.cache):  # the holder's own order: newest first
            if got >= target:
                return False
            if buf is r.buf:
                return True
            got += buf.nbytes
        return False

    def drop(self, model: str) -> None:
        r = self.by_model.pop(model)
        r.session, r.views = None, []
        self.dropped += 1

    def session_of(self, model: str, primary: Any) -> Any:
        r = self.by_model.get(model)
        return primary if r is None else r.session
