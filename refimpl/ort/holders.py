# Holders over real buffers: weight residency (initializers and a borrowed
# cache) and KV bundles (IOBinding into leased ping-pong buffers, grown in
# buckets). Each takes grants from the ProcessMemoryManager before it
# allocates (I2) and picks its own victims (C5); none calls spec code.
#
# Owns: the numpy buffers behind each lease and the lease ids. Must not
# touch: limits or admission policy (refimpl.ort.governed decides), other
# holders' leases. ORT is used only to wrap buffers as OrtValues.
#
# Reclaim from the weight holder goes through the one manager's pressure
# part (issue #10): a requester opens a pressure ticket on this holder's
# leases on the authority (`pmm.press`), and the holder's callback answers
# with the allocation ids of its own idle cache buckets, newest first. Model
# weights are pinned while loaded: that is the holder's own business, it never
# names them. The requester is credited exactly what the answer released.

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
import onnxruntime as ort

from refimpl.manager import ProcessMemoryManager
from spec.arith import kv_bytes
from spec.errors import InvalidTransition
from spec.types import Role, Tier

__all__ = ["WeightHolder", "KvBundle", "KvHolder"]

_ALIGN = 64


def _lease(pmm: ProcessMemoryManager, holder: int, auth: int, nbytes: int, role: Role) -> int:
    aid = pmm.reserve(holder, auth, Tier.HOST, nbytes, role)  # charge before allocate (I2)
    pmm.commit(holder, aid, nbytes)
    return aid


class WeightHolder:
    """Model weights from leased buffers (pinned while loaded) plus a reclaimable cache of borrowed bytes."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int) -> None:
        self.pmm, self.auth = pmm, auth
        self.id = pmm.register_holder("weights")
        self.models: dict[str, tuple[int, list[object]]] = {}
        self.cache: list[tuple[int, np.ndarray]] = []  # newest last
        #: model -> (the leased weight bytes, [(initializer, offset, dtype, shape)]): what a replica copies
        self.layouts: dict[str, tuple[np.ndarray, list[tuple[str, int, np.dtype, tuple[int, ...]]]]] = {}
        self.opened = self.answered = self.credited = 0  # pressure tickets on this holder, as a requester saw them
        self._released: dict[int, int] = {}  # pressure id -> bytes its answer released (until the requester reads it)
        pmm.register_callback(self.id, self._on_pressure)

    def _lease(self, nbytes: int, pinned: bool) -> int:
        return _lease(self.pmm, self.id, self.auth, nbytes, Role.WEIGHTS)

    def _release(self, aid: int) -> None:
        self.pmm.release(self.id, aid)

    def admit(self, name: str, nbytes: int, arrays: dict[str, np.ndarray], so: ort.SessionOptions) -> int:
        """Lease `nbytes`, copy each initializer into the leased memory and hand it to the session."""
        aid = self._lease(nbytes, pinned=True)  # read by every Run of the model: never a victim (I6)
        # Page-aligned anonymous memory of exactly the leased size: ORT reads these bytes in place on every
        # Run (prepacking off) [ort:prepacking] [ort:zero-copy]. Private, with transparent huge pages asked for. Measured (d_model 1024, 16 MiB
        # of weights, sessions with their own copies run in random order, decode step medians minus ORT's
        # own mapping of the model file, two copies each): a shared 4 KiB-page mapping (mmap's default,
        # shmem, as it was) +60 to +79 us (4-5%); private 4 KiB pages +47 to +58 us; private with huge
        # pages -1 to +13 us, as close as two copies of ORT's own (0 to +3 us). In bench_decode
        # (`lease - bound`, all rounds): before, +41 to +45 us at d 1024 and +93 to +193 us at d 2048
        # (3 runs); after, -58 to -0.4 us at d 1024 and +4 to +60 us (0.1-1.3%) at d 2048 (5 runs).
        # Likely TLB misses: a weight row is 4 KiB, so the MatMuls touch one 4 KiB page per row.
        region = mmap.mmap(-1, max(1, nbytes), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_HUGEPAGE"):  # advice only: without THP the lease reads as before
            region.madvise(mmap.MADV_HUGEPAGE)
        backing = np.frombuffer(region, np.uint8, count=nbytes)
        keep: list[object] = [region]
        layout = []
        off = 0
        order = sorted(arrays.items(), key=lambda kv: -kv[1].nbytes)  # big weights first, at aligned offsets
        # 64 B (a cache line) per tensor when the rounding slack of the lease allows it, else the element.
        # Measured (bench_decode, thread CPU time, arm order alternating, the two orders' medians
        # averaged): the 18 us at d 256 that the old rotating benchmark showed is an order effect (the
        # arm run right after its twin finds the weights warm: -17 / +14 us by order, -2 us averaged).
        align = _ALIGN if sum(-(-a.nbytes // _ALIGN) * _ALIGN for _, a in order) <= nbytes else 0
        for key, arr in order:
            step = align or arr.itemsize
            off = -(-off // step) * step
            view = backing[off:off + arr.nbytes].view(arr.dtype).reshape(arr.shape)
            view[...] = arr
            layout.append((key, off, arr.dtype, arr.shape))
            value = ort.OrtValue.ortvalue_from_numpy(view)  # zero-copy over the leased bytes
            keep += [view, value]  # the session borrows both; they live as long as the lease
            so.add_initializer(key, value)
            off += arr.nbytes
        keep.append(backing)
        self.models[name] = (aid, keep)
        self.layouts[name] = (backing, layout)
        return aid

    def evict(self, name: str) -> None:
        """Give back a model's weight lease (a load that failed after admission, issue #14)."""
        aid, _ = self.models.pop(name)
        self.layouts.pop(name, None)
        self._release(aid)

    @property
    def cache_bytes(self) -> int:
        return sum(b.nbytes for _, b in self.cache)

    def fill(self, nbytes: int) -> None:
        if nbytes > 0:
            self.cache.append(self._bucket(nbytes))

    def _bucket(self, nbytes: int) -> tuple[int, Any]:
        """A cache bucket: its lease, then the memory behind it (host here; `refimpl.ort.device_holders`)."""
        return self._lease(nbytes, pinned=False), np.zeros(nbytes, np.uint8)

    def _drop(self, buf: Any) -> None:
        """Free a bucket's memory as its lease goes: host buffers go with their last reference (nothing to do)."""

    def reclaim(self, target: int) -> int:
        """Open a pressure ticket on this holder for `target` bytes; return what its answer credited (>= 0).

        The ticket is the manager's (`press`): it is delivered to this holder's callback with no lock
        held; a ticket still open afterwards (no answer) is cancelled and credits zero.
        """
        if target <= 0:
            return 0
        pid = self.pmm.press(self.id, self.auth, target)
        self.opened += 1
        if pid not in self._released:  # not answered: credit nothing, force nothing
            try:
                self.pmm.cancel_pressure(pid)
            except InvalidTransition:
                pass  # answered from outside this holder's callback: what it released is not ours to count
            return 0
        released = self.settled(pid)
        self.answered += 1
        self.credited += released
        return released

    def settled(self, pid: int) -> int:
        """What this holder's answer to ticket `pid` released (0 if it did not answer), forgotten once read."""
        return self._released.pop(pid, 0)

    def _on_pressure(self, pmm: ProcessMemoryManager, pid: int, target: int) -> None:
        """The pressure callback: answer with this holder's own idle cache buckets (never model weights)."""
        victims = self._pick(target)
        self._released[pid] = pmm.answer(self.id, pid, victims)  # validated by the manager; zero is legal
        self._freed(victims)

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
            self._drop(self.cache[i][1])  # memory first, then the charge: the ledger never under-counts
            self._release(aid)
            self.cache[i:i + 1] = [self._bucket(n - cut), self._bucket(cut)]
            picked.append(self.cache[i + 1][0])
        return tuple(picked)

    def _freed(self, victims: tuple[int, ...]) -> None:
        """After the manager accepted the answer (it released their leases): drop the victims' buffers."""
        gone = set(victims)
        for aid, buf in self.cache:
            if aid in gone:
                self._drop(buf)
        self.cache = [(aid, buf) for aid, buf in self.cache if aid not in gone]

    def close(self) -> None:
        for aid, _ in self.models.values():
            self._release(aid)
        self.models.clear()
        self.layouts.clear()
        for aid, buf in self.cache:
            self._drop(buf)
            self._release(aid)
        self.cache.clear()


class KvBundle:
    """One request's K and V, each as two flat ping-pong buffers of `cap` tokens (ORT-NOTES 3c).

    Bound once per bucket: when the bucket is made, one IOBinding per token
    position of the bucket is built over the bundle's own buffers (x, y, past
    and present views; the OrtValue of a side at n tokens is shared by the
    present of step n-1 and the past of step n). A decode step then only
    writes its input into the bound x buffer and runs the binding for its
    position: no IOBinding or OrtValue is built on the decode path.
    """

    def __init__(self, heads: int, dh: int, cap: int, lease: int, session: ort.InferenceSession,
                 tokens: int = 0, cur: int = 0) -> None:
        self.heads, self.dh, self.cap, self.lease, self.session = heads, dh, cap, lease, session
        self.bufs = {n: [np.zeros(heads * cap * dh, np.float32) for _ in range(2)] for n in ("key", "value")}
        self.cur = cur  # which ping-pong side holds the past
        self.tokens = tokens
        self.x = np.zeros((1, 1, heads * dh), np.float32)  # the bound token input, written in place
        self.y = np.zeros((1, 1, heads * dh), np.float32)  # the bound output, overwritten by every step
        self.bindings: list[object | None] = []  # index t: the binding of the step that reads t tokens

    def view(self, name: str, side: int, t: int) -> np.ndarray:
        return self.bufs[name][side][: self.heads * t * self.dh].reshape(1, self.heads, t, self.dh)

    def bind(self) -> None:
        """Build this bucket's bindings, one per step position from `tokens` to `cap - 1` (once per bucket)."""
        values: dict[tuple[str, int, int], object] = {}

        def value(name: str, side: int, t: int) -> object:
            key = (name, side, t)
            if key not in values:
                arr = self.view(name, side, t) if t else np.zeros((1, self.heads, 0, self.dh), np.float32)
                values[key] = (ort.OrtValue.ortvalue_from_numpy(arr), arr)  # keep the array alive with it
            return values[key][0]

        x, y = ort.OrtValue.ortvalue_from_numpy(self.x), ort.OrtValue.ortvalue_from_numpy(self.y)
        self._keep = (values, x, y)
        self.bindings = [None] * self.tokens
        side = self.cur
        for t in range(self.tokens, self.cap):
            io = self.session.io_binding()
            io.bind_ortvalue_input("x", x)
            io.bind_ortvalue_output("y", y)
            for n in ("key", "value"):
                io.bind_ortvalue_input(f"past_{n}", value(n, side, t))
                io.bind_ortvalue_output(f"present_{n}", value(n, 1 - side, t + 1))
            self.bindings.append(io)
            side = 1 - side


class KvHolder:
    """KV bundles in leased buffers, grown bucket by bucket with the old bucket live during the copy."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int) -> None:
        self.pmm, self.auth = pmm, auth
        self.id = pmm.register_holder("kv")
        self.bundles: dict[int, KvBundle] = {}
        pmm.register_callback(self.id, self._on_pressure)

    def _on_pressure(self, pmm: ProcessMemoryManager, pid: int, target: int) -> None:
        """Every KV lease backs an open request's bucket, in use until it closes: no victim (zero is legal, C5)."""
        pmm.answer(self.id, pid, ())

    def open(self, rid: int, heads: int, dh: int, cap: int, bytes_per_token: int,
             session: ort.InferenceSession) -> None:
        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)
        try:
            b = KvBundle(heads, dh, cap, lease, session)
            b.bind()
        except BaseException:
            self.pmm.release(self.id, lease)  # nothing of a failed open stays charged
            raise
        self.bundles[rid] = b

    def grow(self, rid: int, cap: int, bytes_per_token: int) -> KvBundle:
        """Lease and fill the next bucket; the old one stays the request's until `install` (two-phase)."""
        old = self.bundles[rid]
        lease = _lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV)
        try:
            new = KvBundle(old.heads, old.dh, cap, lease, old.session, old.tokens, old.cur)
            n = old.heads * old.tokens * old.dh
            for name in ("key", "value"):
                new.bufs[name][old.cur][:n] = old.bufs[name][old.cur][:n]
            new.bind()
        except BaseException:
            self.pmm.release(self.id, lease)  # the old bucket stays the request's, the new one goes back
            raise
        return new

    def install(self, rid: int, new: KvBundle) -> None:
        """The grown bucket served a Run: it becomes the request's, and the old lease goes back."""
        old = self.bundles[rid]
        self.bundles[rid] = new
        self.pmm.release(self.id, old.lease)  # only after the copy and the Run: peak = old + new

    def abandon(self, new: KvBundle) -> None:
        """The grown bucket's Run failed: give its lease back; the request keeps its old bucket."""
        self.pmm.release(self.id, new.lease)

    def step(self, rid: int, x: np.ndarray, ro: ort.RunOptions | None = None) -> np.ndarray:
        """One decode step through this bucket's binding for the position; returns the bound output (a view)."""
        return self.run(self.bundles[rid], x, ro)

    @staticmethod
    def run(b: KvBundle, x: np.ndarray, ro: ort.RunOptions | None = None) -> np.ndarray:
        """Run `b`'s binding for its position; the bundle advances only if ORT's Run returns."""
        t = b.tokens
        b.x[...] = x
        b.session.run_with_iobinding(b.bindings[t], ro)  # a failure leaves cur/tokens: the past side is intact
        b.cur, b.tokens = 1 - b.cur, t + 1
        return b.y

    def present(self, rid: int) -> tuple[np.ndarray, np.ndarray]:
        b = self.bundles[rid]
        return b.view("key", b.cur, b.tokens), b.view("value", b.cur, b.tokens)

    def close(self, rid: int) -> None:
        self.pmm.release(self.id, self.bundles.pop(rid).lease)
