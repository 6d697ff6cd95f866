"""C7 topology providers: host sized from the machine minus a reserve; CUDA only with a GPU."""

from __future__ import annotations

import os

import pytest

from refimpl.topology import cuda_topology, host_topology, process_rss, scaled_topology
from spec.errors import BudgetBelowFloor, InvalidBytes, ProviderUnavailable


def test_host_topology_is_machine_minus_reserve() -> None:
    t = host_topology(reserve=1 << 20)
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert t.capacity == physical - (1 << 20) and t.granule == os.sysconf("SC_PAGE_SIZE")
    assert t.host_mapped_capacity == 0 and "unreported" in t.source


@pytest.mark.parametrize(("bad", "error", "match"), [(1 << 62, BudgetBelowFloor, "leave nothing"),
                                                      (-1, InvalidBytes, "reserve"), (1.5, InvalidBytes, "reserve"),
                                                      ("1", InvalidBytes, "reserve")])
def test_host_topology_rejects_bad_reserve(bad, error: type, match: str) -> None:
    with pytest.raises(error, match=match):  # a reserve beyond the machine, or not a byte count
        host_topology(reserve=bad)


def test_scaled_topology_names_its_source() -> None:
    t = scaled_topology(1 << 20, 4096)
    assert t.capacity == 1 << 20 and t.source.startswith("scaled")


def test_cuda_topology_or_skip() -> None:
    try:
        t = cuda_topology()
    except ProviderUnavailable as e:
        pytest.skip(f"no GPU here: {e}")
    assert t.capacity > 0 and "NVML" in t.source


def test_rss_figure_names_source() -> None:
    r = process_rss()
    assert r.nbytes > 0 and r.source == "/proc/self/status VmRSS" and r.conditions
