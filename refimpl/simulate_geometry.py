"""The reference geometry of `ortmem simulate` (DESIGN-FACTS section 9) and the one sweep every scenario uses.

Inputs only: the figures the design gives for qwen14b-zp on the 8 GB card,
plus the stated model assumptions (the 2 MiB unit, the bandwidth model's
inputs). Nothing here is adjusted to make a figure match.
"""

from __future__ import annotations

from functools import lru_cache

import attrs

from spec.streaming import Policy, SweepResult, sweep, weight_units

__all__ = ["Geometry", "QWEN14B_ZP", "MiB", "streamed"]

MiB = 1 << 20


@attrs.frozen
class Geometry:
    """DESIGN-FACTS section 9; `layer_bytes` is derived: (referenced - lm_head) / layers, exact."""

    device_budget: int = 7_726_753_178
    kv_bytes_per_token: int = 196_608
    max_context: int = 8_192
    layers: int = 48
    head_bytes: int = 389_283_840  # lm_head, int4
    referenced: int = 8_329_906_176  # bytes the graph's external-data entries reference (#853)
    file_bytes: int = 16_652_453_888  # size of the external-data file
    granule: int = 2 * MiB  # mapping granule on the card (~10.67 tokens of KV per 2 MiB)
    headroom: int = 512 * MiB  # the default headroom of #866
    bucket: int = 256  # elastic KV growth step in tokens; the floor is one bucket (upstream's ~50 MB)
    # Bandwidth model (#877 / #880, section 9 floors): bytes/s.
    link_bandwidth: int = 5_600_000_000  # host-mapped read (#877 / #880)
    resident_bandwidth: tuple[int, int] = (100_000_000_000, 133_000_000_000)
    demand_paged: int = 600_000_000  # WDDM demand paging moved ~0.6 GB/step (measured, used as an input)

    @property
    def layer_bytes(self) -> int:
        n, rest = divmod(self.referenced - self.head_bytes, self.layers)
        if rest:
            raise ValueError("referenced - lm_head does not split evenly over the layers")
        return n

    @property
    def dead_prefix(self) -> int:
        return self.file_bytes - self.referenced

    def units(self) -> tuple[int, ...]:
        return _units(self.layers, self.layer_bytes, self.head_bytes, self.granule)

    def describe(self) -> str:
        return (f"qwen14b-zp (DESIGN-FACTS section 9): W = {self.referenced:,} B referenced "
                f"({self.layers} layers x {self.layer_bytes:,} B + lm_head {self.head_bytes:,} B, read once per "
                f"step in {self.granule // MiB} MiB units); device budget {self.device_budget:,} B; KV "
                f"{self.kv_bytes_per_token:,} B/token, max context {self.max_context:,}; headroom "
                f"{self.headroom // MiB} MiB; KV bucket {self.bucket} tokens")


QWEN14B_ZP = Geometry()


@lru_cache(maxsize=4)
def _units(layers: int, layer_bytes: int, head_bytes: int, granule: int) -> tuple[int, ...]:
    return weight_units(layers, layer_bytes, head_bytes, granule)


def streamed(g: Geometry, budget: int, policy: Policy) -> SweepResult:
    """One steady-state decode step of the reference weights through a cache of `budget` bytes (spec.streaming)."""
    return sweep(g.units(), budget, policy)
