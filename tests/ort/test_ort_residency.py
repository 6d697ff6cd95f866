"""Real residency figures with their sources (issue #11 item 5; I8b).

Each reader is checked against an independent reading of the same kernel or
ORT figure; the campaign's residency observations carry real figures under
real sources, and invented ones only under an "injected:" label.
"""

from __future__ import annotations

import mmap
import os
import resource

import numpy as np

from refimpl.verify.sessions_checker import HEADROOM, _actions, observe
from refimpl.ort.generations import _Observe, script
from refimpl.ort.residency import INJECTED, arena_held, buffer_rss, file_rss, process_rss
from spec import sessions as S

PAGE = resource.getpagesize()


def _statm_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def test_process_rss_is_vmrss_with_its_source() -> None:
    fig = process_rss()
    assert fig is not None and "/proc/self/status VmRSS" in fig.source
    assert abs(fig.nbytes - _statm_rss()) < 4 << 20  # the same counter, read through statm


def test_file_rss_counts_exactly_the_touched_pages_of_a_mapped_file(tmp_path) -> None:
    path = os.path.join(str(tmp_path), "blob.bin")
    with open(path, "wb") as f:
        f.write(b"\x01" * (64 * PAGE))
    assert file_rss([path]).nbytes == 0  # not mapped
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        total = sum(m[i * PAGE] for i in range(16))  # touch 16 pages
        fig = file_rss([path])
        assert total == 16
        assert 16 * PAGE <= fig.nbytes <= 64 * PAGE and "smaps Rss" in fig.source  # readahead may add pages


def test_buffer_rss_covers_a_touched_buffer() -> None:
    buf = np.ones(8 << 20, np.uint8)
    fig = buffer_rss(buf)
    assert fig.nbytes >= buf.nbytes and "leased buffer" in fig.source


def test_arena_held_is_ortss_own_figure(world) -> None:
    past = np.zeros((1, 4, 15, 8), np.float32)
    fig = arena_held(world.sources["dec"], {"x": np.ones((1, 1, 32), np.float32), "past_key": past,
                                            "past_value": past})
    assert fig is not None and fig.nbytes > 0 and "mem_arena_held" in fig.source


def test_scripted_observations_are_real_figures(world) -> None:
    _, acts = script(0, world.facts, HEADROOM, world.sources)
    obs = [a() for a in acts if isinstance(a, _Observe)]
    assert obs
    for o in obs:
        assert o.source.startswith("/proc/self/"), o.source
        if "VmRSS" in o.source:
            assert abs(o.nbytes - _statm_rss()) < 16 << 20


def test_campaign_never_puts_an_invented_figure_under_a_real_source(world) -> None:
    from hypothesis import HealthCheck, given, settings

    s = S.new_sessions(world.topology(0), 256 * 1024)
    seen: list[S.ObserveResidency] = []

    @settings(max_examples=600, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(_actions(world, s))
    def draw(a) -> None:
        if isinstance(a, S.ObserveResidency):
            seen.append(a)

    draw()
    real = [a for a in seen if a.source.startswith("/proc/")]
    assert real and all(a.source.startswith((INJECTED, "/proc/self/")) or a.source == "" for a in seen)
    rss = _statm_rss()
    for a in real:
        if "VmRSS" in a.source:
            assert abs(a.nbytes - rss) < 16 << 20  # read, not invented


def test_observe_reads_the_model_files(world) -> None:
    o = observe(world, "a", "files", (world.sources["dec"],))
    assert o.nbytes == 0 and "smaps Rss" in o.source  # ORT read the file: no mapping of it stays
