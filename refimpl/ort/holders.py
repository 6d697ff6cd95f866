# Holders over real buffers: weight residency (initializers and a borrowed
# cache) and KV bundles (IOBinding into leased ping-pong buffers, grown in
# buckets). Each takes grants from the ProcessMemoryManager before it
# allocates (I2) and picks its own victims (C5); none calls spec code.
#
# Owns: the numpy buffers behind each lease and the lease ids. Must not
# touch: limits or admission policy (refimpl.ort.governed decides), other
# holders' leases. ORT is used only to wrap buffers as OrtValues.
#
# Reclaim from the weight holder goes through the pressure protocol: every
# weight lease is mirrored in a `ReclaimChannel` (model weights pinned, cache
# buckets unpinned and idle); a requester opens a pressure ticket and the
# holder's callback answers with its own cache buckets, newest first.

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from refimpl.governor import ProcessMemoryManager
from refimpl.reclaim import ReclaimChannel
from spec.arith import kv_bytes
from spec.types import Role, Tier

__all__ = ["WeightHolder", "KvBundle", "KvHolder"]


def _lease(pmm: ProcessMemoryManager, holder: int, auth: int, nbytes: int, role: Role) -> int:
    aid = pmm.reserve(holder, auth, Tier.HOST, nbytes, role)  # charge before allocate (I2)
    pmm.commit(holder, aid, nbytes)
    return aid


class WeightHolder:
    """Model weights from leased buffers (pinned while loaded) plus a reclaimable cache of borrowed bytes."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int, capacity: int) -> None:
        self.pmm, self.auth = pmm, auth
        self.id = pmm.register_holder("weights")
        self.models: dict[str, tuple[int, list[object]]] = {}
        self.cache: list[tuple[int, np.ndarray]] = []  # newest last
        self.channel = ReclaimChannel(capacity)  # the pressure protocol's view of this holder's leases
        self.tickets: dict[int, int] = {}  # PMM lease id -> mirror ticket id
        self.channel.serve(self._pick, self._freed)

    def _lease(self, nbytes: int, pinned: bool) -> int:
        aid = _lease(self.pmm, self.id, self.auth, nbytes, Role.WEIGHTS)
        self.tickets[aid] = self.channel.lease(nbytes, pinned)
        return aid

    def _release(self, aid: int) -> None:
        self.pmm.release(self.id, aid)
        tid = self.tickets.pop(aid, None)
        if tid is not None:
            self.channel.unlease(tid)

    def admit(self, name: str, nbytes: int, arrays: dict[str, np.ndarray], so: ort.SessionOptions) -> int:
        """Lease `nbytes`, copy each initializer into the leased memory and hand it to the session."""
        aid = self._lease(nbytes, pinned=True)  # read by every Run of the model: never a victim (I6)
        backing = np.empty(nbytes, np.uint8)
        keep, off = [], 0
        for key, arr in sorted(arrays.items(), key=lambda kv: -kv[1].itemsize):  # offsets stay aligned
            view = backing[off:off + arr.nbytes].view(arr.dtype).reshape(arr.shape)
            view[...] = arr
            value = ort.OrtValue.ortvalue_from_numpy(view)  # zero-copy over the leased bytes
            keep += [view, value]  # the session borrows both; they live as long as the lease
            so.add_initializer(key, value)
            off += arr.nbytes
        keep.append(backing)
        self.models[name] = (aid, keep)
        return aid

    def evict(self, name: str) -> None:
        """Give back a model's weight lease (a load that failed after admission, issue #14)."""
        aid, _ = self.models.pop(name)
        self._release(aid)

    @property
    def cache_bytes(self) -> int:
        return sum(b.nbytes for _, b in self.cache)

    def fill(self, nbytes: int) -> None:
        if nbytes > 0:
            self.cache.append((self._lease(nbytes, pinned=False), np.zeros(nbytes, np.uint8)))

    def reclaim(self, target: int) -> int:
        """Open a pressure ticket on this holder for `target` bytes; return what its answer credited."""
        return self.channel.reclaim(target)

    def _pick(self, target: int) -> tuple[int, ...]:
        """The pressure callback's choice: cache buckets newest first, the last one split to fit (C5)."""
        picked, got = [], 0
        for aid, buf in reversed(self.cache):
            if got >= target:
                break
            picked.append(aid)
            got += buf.nbytes
        if got > target:  # split the oldest picked bucket: keep the part not asked for
            aid = picked.pop()
            i = next(i for i, (a, _) in enumerate(self.cache) if a == aid)
            n = self.cache[i][1].nbytes
            cut = n - (got - target)
            self._release(aid)
            self.cache[i:i + 1] = [(self._lease(n - cut, False), np.zeros(n - cut, np.uint8)),
                                   (self._lease(cut, False), np.zeros(cut, np.uint8))]
            picked.append(self.cache[i + 1][0])
        return tuple(self.tickets[aid] for aid in picked)

    def _freed(self, victims: tuple[int, ...]) -> None:
        """After the governor accepted the answer: free the victims' PMM leases and buffers."""
        gone = set(victims)
        keep = []
        for aid, buf in self.cache:
            if self.tickets.get(aid) in gone:
                self.pmm.release(self.id, aid)
                del self.tickets[aid]
            else:
                keep.append((aid, buf))
        self.cache = keep

    def close(self) -> None:
        for aid, _ in self.models.values():
            self._release(aid)
        self.models.clear()
        for aid, _ in self.cache:
            self._release(aid)
        self.cache.clear()


class KvBundle:
    """One request's K and V, each as two flat ping-pong buffers of `cap` tokens (ORT-NOTES 3c)."""

    def __init__(self, heads: int, dh: int, cap: int, lease: int) -> None:
        self.heads, self.dh, self.cap, self.lease = heads, dh, cap, lease
        self.bufs = {n: [np.zeros(heads * cap * dh, np.float32) for _ in range(2)] for n in ("key", "value")}
        self.cur = 0  # which ping-pong side holds the past
        self.tokens = 0

    def view(self, name: str, side: int, t: int) -> np.ndarray:
        return self.bufs[name][side][: self.heads * t * self.dh].reshape(1, self.heads, t, self.dh)


class KvHolder:
    """KV bundles in leased buffers, grown bucket by bucket with the old bucket live during the copy."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int) -> None:
        self.pmm, self.auth = pmm, auth
        self.id = pmm.register_holder("kv")
        self.bundles: dict[int, KvBundle] = {}

    def open(self, rid: int, heads: int, dh: int, cap: int, bytes_per_token: int) -> None:
        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)
        self.bundles[rid] = KvBundle(heads, dh, cap, lease)

    def grow(self, rid: int, cap: int, bytes_per_token: int) -> None:
        old = self.bundles[rid]
        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)
        new = KvBundle(old.heads, old.dh, cap, lease)
        n = old.heads * old.tokens * old.dh
        for name in ("key", "value"):
            new.bufs[name][old.cur][:n] = old.bufs[name][old.cur][:n]
        new.cur, new.tokens = old.cur, old.tokens
        self.bundles[rid] = new
        self.pmm.release(self.id, old.lease)  # only after the copy: peak = old + new

    def step(self, rid: int, session: ort.InferenceSession, x: np.ndarray) -> np.ndarray:
        """One decode step through IOBinding: past from one side, present written into the other."""
        b = self.bundles[rid]
        src, dst, t = b.cur, 1 - b.cur, b.tokens
        io = session.io_binding()
        io.bind_cpu_input("x", x)
        y = np.empty((1, 1, b.heads * b.dh), np.float32)
        io.bind_ortvalue_output("y", ort.OrtValue.ortvalue_from_numpy(y))
        for n in ("key", "value"):
            past = b.view(n, src, t)
            if t == 0:
                io.bind_cpu_input(f"past_{n}", np.zeros((1, b.heads, 0, b.dh), np.float32))
            else:
                io.bind_ortvalue_input(f"past_{n}", ort.OrtValue.ortvalue_from_numpy(past))
            io.bind_ortvalue_output(f"present_{n}", ort.OrtValue.ortvalue_from_numpy(b.view(n, dst, t + 1)))
        session.run_with_iobinding(io)
        b.cur, b.tokens = dst, t + 1
        return y

    def present(self, rid: int) -> tuple[np.ndarray, np.ndarray]:
        b = self.bundles[rid]
        return b.view("key", b.cur, b.tokens), b.view("value", b.cur, b.tokens)

    def close(self, rid: int) -> None:
        self.pmm.release(self.id, self.bundles.pop(rid).lease)
