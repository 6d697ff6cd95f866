# The weight and KV holders of the device path: the same holders as
# `refimpl.ort.holders` (same pressure answers, same two-phase KV growth),
# whose leases are on the DEVICE authority and whose memory is a device
# region of exactly the leased bytes (`refimpl.ort.device`), allocated after
# the reservation and before the commit (reserve -> allocate -> commit, I2;
# a failed allocation cancels the reservation), freed before the lease goes
# back (the ledger never charges less than is allocated).
#
# Weights: every initializer is written into the model's device region and
# given to ORT as a zero-copy DLPack OrtValue with `add_initializer`
# [ort:user-initializer]. ORT uses a user initializer, in place, only when its
# device is the one ORT plans for the tensor; otherwise it logs "Cannot use
# user supplied initializer ... planned memory location" at WARNING and loads
# its own copy from the model (session_state_utils.cc; observed on 1.32)
# [ort:user-initializer]. The CUDA EP takes shape-like inputs (Reshape's
# shape, for one) in host memory [ort:cuda-host-shape-inputs]: so integer
# initializers are given from a host copy instead, leased on the HOST
# authority by this holder (`host_planned`). Every byte ORT is given is
# leased where it lies.
#
# KV: one region per bucket holds both ping-pong sides of K and V; each
# binding binds past/present by pointer into it (IOBinding `bind_input` /
# `bind_output` on the memory's device), which ORT reads and writes in place
# when its kernels run on that device, so a decode never moves KV through the
# host [ort:iobinding-in-place]. The
# token input x and output y are host buffers bound as OrtValues. An input
# bound on another device than its consumer's is copied to that device when
# it is bound, not at each Run; an output produced on another device is
# copied into the bound buffer at the end of every Run [ort:iobinding-in-place].
# So `DeviceKvHolder.run` re-binds x right before each Run, after writing the
# step's token into it: binding once per bucket would make every CUDA Run read
# the x it was bound with (the bucket's zeros). The CPU stand-in, where x is
# not copied, cannot show the difference; `gpu_check.sh`'s bit-for-bit test
# does. Growth copies the old past device to device.
#
# On the CPU stand-in (`StandInMemory`) the same code binds 'cpu' pointers:
# it checks the wiring, not CUDA.
#
# Owns: the regions behind the device leases. Must not touch: admission,
# limits, the arena.

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort

from refimpl.manager import ProcessMemoryManager
from refimpl.ort.device import DeviceMemory, Region
from refimpl.ort.holders import KvBundle, KvHolder, WeightHolder
from spec.arith import kv_bytes
from spec.types import Role, Tier

__all__ = ["DeviceWeightHolder", "DeviceKvBundle", "DeviceKvHolder", "host_planned", "device_lease", "weight_layout"]

_ALIGN = 256  # CUDA's allocation alignment; also a multiple of every element size


def host_planned(arr: np.ndarray) -> bool:
    """Initializers an EP reads in host memory: integer tensors (shapes, axes, indices) on the CUDA EP."""
    return arr.dtype.kind in "iub"


def device_lease(pmm: ProcessMemoryManager, holder: int, auth: int, nbytes: int, role: Role,
                 memory: DeviceMemory) -> tuple[int, Region]:
    """Reserve on the device authority, allocate exactly the reserved bytes, commit (I2); no charge on failure."""
    aid = pmm.reserve(holder, auth, Tier.DEVICE, nbytes, role)
    try:
        region = memory.alloc(nbytes)
    except BaseException:
        pmm.cancel(holder, aid)
        raise
    pmm.commit(holder, aid, nbytes)
    return aid, region


def weight_layout(arrays: dict[str, np.ndarray], nbytes: int) -> list[tuple[str, int, np.ndarray]]:
    """(name, offset, array), big ones first, 256 B aligned when the lease's rounding leaves room for it."""
    order = sorted(arrays.items(), key=lambda kv: -kv[1].nbytes)
    align = _ALIGN if sum(-(-a.nbytes // _ALIGN) * _ALIGN for _, a in order) <= nbytes else 0
    out, off = [], 0
    for key, arr in order:
        step = align or arr.itemsize
        off = -(-off // step) * step
        out.append((key, off, arr))
        off += arr.nbytes
    return out


class DeviceWeightHolder(WeightHolder):
    """Model weights in leased device regions, read in place by ORT; a cache of borrowed device bytes."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int, memory: DeviceMemory, host_auth: int) -> None:
        super().__init__(pmm, auth)
        self.memory, self.host_auth = memory, host_auth
        #: model -> (device region, [(initializer, offset, array)], host lease or None): what the tests perturb
        self.regions: dict[str, tuple[Region, list[tuple[str, int, np.ndarray]], int | None]] = {}

    def _bucket(self, nbytes: int) -> tuple[int, Any]:
        return device_lease(self.pmm, self.id, self.auth, nbytes, Role.WEIGHTS, self.memory)

    def _drop(self, buf: Any) -> None:
        if buf.live:
            self.memory.free(buf)

    def admit(self, name: str, nbytes: int, arrays: dict[str, np.ndarray], so: ort.SessionOptions) -> int:
        """Lease `nbytes` on the device, write every initializer there, give ORT zero-copy views of them."""
        aid, region = device_lease(self.pmm, self.id, self.auth, nbytes, Role.WEIGHTS, self.memory)
        host_aid = None
        keep: list[object] = [region]
        try:
            layout = weight_layout(arrays, nbytes)
            host = {k: a for k, a in arrays.items() if host_planned(a)}
            hbytes = sum(a.nbytes for a in host.values())
            if hbytes:  # the host copy given for host-planned tensors [ort:user-initializer]: leased on the host
                host_aid = self.pmm.reserve(self.id, self.host_auth, Tier.HOST, hbytes, Role.WEIGHTS)
                self.pmm.commit(self.id, host_aid, hbytes)
            hoff = 0
            hbuf = np.empty(hbytes, np.uint8)
            keep.append(hbuf)
            for key, off, arr in layout:
                self.memory.upload(region, off, arr)
                if key in host:
                    view = hbuf[hoff:hoff + arr.nbytes].view(arr.dtype).reshape(arr.shape)
                    view[...] = arr
                    hoff += arr.nbytes
                    value = ort.OrtValue.ortvalue_from_numpy(view)
                    keep += [view, value]
                else:
                    value = self.memory.value(region, off, arr.dtype, arr.shape)
                    keep.append(value)
                so.add_initializer(key, value)
        except BaseException:
            self.memory.free(region)
            self.pmm.release(self.id, aid)
            if host_aid is not None:
                self.pmm.release(self.id, host_aid)
            raise
        self.models[name] = (aid, keep)
        self.regions[name] = (region, layout, host_aid)
        return aid

    def evict(self, name: str) -> None:
        aid, _ = self.models.pop(name)
        region, _, host_aid = self.regions.pop(name)
        self.memory.free(region)  # the session over it is gone or never runs again
        self._release(aid)
        if host_aid is not None:
            self._release(host_aid)

    def close(self) -> None:
        for name in list(self.models):
            self.evict(name)
        super().close()


class DeviceKvBundle(KvBundle):
    """One request's K and V in one leased device region: both ping-pong sides, bound by pointer."""

    def __init__(self, heads: int, dh: int, cap: int, lease: int, session: ort.InferenceSession,
                 memory: DeviceMemory, region: Region, ro: ort.RunOptions | None, tokens: int = 0,
                 cur: int = 0) -> None:
        self.heads, self.dh, self.cap, self.lease, self.session = heads, dh, cap, lease, session
        self.memory, self.region, self.ro = memory, region, ro
        self.cur, self.tokens = cur, tokens
        self.x = np.zeros((1, 1, heads * dh), np.float32)  # host; copied up when bound [ort:iobinding-in-place]
        self.y = np.zeros((1, 1, heads * dh), np.float32)  # host; copied down each Run [ort:iobinding-in-place]
        self.bindings: list[object | None] = []

    def offset(self, name: str, side: int) -> int:
        """Where side `side` of K or V starts in the region (K0, K1, V0, V1, each of `cap` tokens)."""
        return ((0 if name == "key" else 2) + side) * self.heads * self.cap * self.dh * 4

    def view(self, name: str, side: int, t: int) -> np.ndarray:
        """A host copy of side `side` at `t` tokens (for checks; the decode path never reads KV on the host)."""
        return self.memory.download(self.region, self.offset(name, side), np.float32, (1, self.heads, t, self.dh))

    def bind(self) -> None:
        """This bucket's bindings, one per step position; past/present are pointers into the region."""
        x, y = ort.OrtValue.ortvalue_from_numpy(self.x), ort.OrtValue.ortvalue_from_numpy(self.y)
        self._keep = (x, y)
        self.x_value = x  # re-bound before every Run: a bound input of another device is copied when bound
        dev, did, base = self.memory.ort_device, self.memory.device_id, self.region.ptr
        self.bindings = [None] * self.tokens
        side = self.cur
        for t in range(self.tokens, self.cap):
            io = self.session.io_binding()
            io.bind_ortvalue_input("x", x)
            io.bind_ortvalue_output("y", y)
            for n in ("key", "value"):
                io.bind_input(f"past_{n}", dev, did, np.float32, [1, self.heads, t, self.dh],
                              base + self.offset(n, side))
                io.bind_output(f"present_{n}", dev, did, np.float32, [1, self.heads, t + 1, self.dh],
                               base + self.offset(n, 1 - side))
            self.bindings.append(io)
            side = 1 - side


class DeviceKvHolder(KvHolder):
    """KV bundles in leased device regions; growth copies device to device; every Run shrinks the EP arena."""

    def __init__(self, pmm: ProcessMemoryManager, auth: int, memory: DeviceMemory,
                 ro: ort.RunOptions | None) -> None:
        super().__init__(pmm, auth)
        self.memory, self.ro = memory, ro

    def _bundle(self, heads: int, dh: int, cap: int, bytes_per_token: int, session: Any, tokens: int = 0,
                cur: int = 0) -> DeviceKvBundle:
        lease, region = device_lease(self.pmm, self.id, self.auth, kv_bytes(cap, bytes_per_token), Role.KV,
                                     self.memory)
        return DeviceKvBundle(heads, dh, cap, lease, session, self.memory, region, self.ro, tokens, cur)

    def _give_back(self, b: DeviceKvBundle) -> None:
        self.memory.free(b.region)  # memory first, then the charge
        self.pmm.release(self.id, b.lease)

    def open(self, rid: int, heads: int, dh: int, cap: int, bytes_per_token: int,
             session: ort.InferenceSession) -> None:
        b = self._bundle(heads, dh, cap, bytes_per_token, session)
        try:
            b.bind()
        except BaseException:
            self._give_back(b)
            raise
        self.bundles[rid] = b

    def grow(self, rid: int, cap: int, bytes_per_token: int) -> DeviceKvBundle:
        old = self.bundles[rid]
        new = self._bundle(old.heads, old.dh, cap, bytes_per_token, old.session, old.tokens, old.cur)
        try:
            n = old.heads * old.tokens * old.dh * 4
            for name in ("key", "value"):  # device to device: the past never visits the host
                self.memory.copy(new.region, new.offset(name, old.cur), old.region, old.offset(name, old.cur), n)
            new.bind()
        except BaseException:
            self._give_back(new)
            raise
        return new

    def install(self, rid: int, new: DeviceKvBundle) -> None:
        old = self.bundles[rid]
        self.bundles[rid] = new
        self._give_back(old)  # only after the copy and the Run: peak = old + new

    def abandon(self, new: DeviceKvBundle) -> None:
        self._give_back(new)

    @staticmethod
    def run(b: DeviceKvBundle, x: np.ndarray, ro: ort.RunOptions | None = None) -> np.ndarray:
        t = b.tokens
        b.x[...] = x
        io = b.bindings[t]
        io.bind_ortvalue_input("x", b.x_value)  # copies this step's token up now [ort:iobinding-in-place]
        b.session.run_with_iobinding(io, ro or b.ro)
        b.cur, b.tokens = 1 - b.cur, t + 1
        return b.y

    def close(self, rid: int) -> None:
        self._give_back(self.bundles.pop(rid))
