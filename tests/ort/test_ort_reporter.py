# I8 reporter facts: the per-run transient peak (allocator method checked
# against the liveness method) and the host mapping granularity.

from __future__ import annotations

import json
import mmap
import os
import tempfile

import numpy as np
import pytest

from refimpl.ort import (
    PeakMethod,
    calibrate_transient_peak,
    empty_past,
    granularity,
    make_session,
    peaks_from_profile,
)

PASTS = [0, 16, 128, 1000]
ROWS = [1, 64, 512]


def _decoder_feeds(past: int) -> dict[str, np.ndarray]:
    x = np.random.default_rng(past).standard_normal((1, 1, 64)).astype(np.float32)
    return {"x": x, "past_key": empty_past(past=past), "past_value": empty_past(past=past)}


def _dynamic_feeds(rows: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)}


@pytest.fixture(scope="module")
def decoder_peaks(decoder):
    return calibrate_transient_peak(decoder, [_decoder_feeds(p) for p in PASTS])


@pytest.fixture(scope="module")
def dynamic_peaks(dynamic):
    return calibrate_transient_peak(dynamic, [_dynamic_feeds(r) for r in ROWS])


@pytest.mark.parametrize("peaks, i", [*(("decoder_peaks", i) for i in range(len(PASTS))),
                                      *(("dynamic_peaks", i) for i in range(len(ROWS)))],
                         ids=[*(f"decoder-past{p}" for p in PASTS), *(f"dynamic-rows{r}" for r in ROWS)])
def test_allocator_and_liveness_peaks_agree(request, peaks, i):
    report = request.getfixturevalue(peaks)[i]
    assert report.run_index == i
    # Measured gap on the decoder: 16-256 B (allocator counts a small
    # scratch allocation; liveness counts Reshape outputs that alias).
    assert report.method is PeakMethod.ALLOCATOR  # ORT >= 1.28 with the arena on
    assert report.transient_peak_bytes == report.allocator_peak_bytes
    assert report.liveness_peak_bytes == pytest.approx(report.allocator_peak_bytes, rel=0.01, abs=512)
    assert report.allocator_chunk_peak_bytes >= report.allocator_peak_bytes  # BFC rounds up


@pytest.mark.parametrize("i", range(len(ROWS)), ids=[f"rows{r}" for r in ROWS])
def test_dynamic_peak_is_three_live_activations(dynamic_peaks, i):
    # h, relu(h) and h*relu(h) are live together when Mul finishes.
    assert dynamic_peaks[i].liveness_peak_bytes == 3 * ROWS[i] * 64 * 4


def test_decoder_peak_grows_with_past(decoder_peaks):
    peaks = [r.transient_peak_bytes for r in decoder_peaks]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]


def test_calibration_deletes_its_profile(decoder, monkeypatch, tmp_path):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = set(os.listdir("."))
    calibrate_transient_peak(decoder, [_decoder_feeds(0)])
    assert list(tmp_path.iterdir()) == []
    assert set(os.listdir(".")) == before


def _profile_events(model, feeds_list, tmp_path) -> list[dict]:
    session = make_session(model, optimize=False, profile_prefix=tmp_path / "p")
    for feeds in feeds_list:
        session.run(None, feeds)
    with open(session.end_profiling(), encoding="utf-8") as f:
        return json.load(f)


def test_liveness_is_the_fallback_without_mem_fields(decoder, tmp_path):
    # What ORT < 1.28, or a session with the CPU arena off, writes.
    events = _profile_events(decoder, [_decoder_feeds(p) for p in PASTS], tmp_path)
    for e in events:
        for key in [k for k in e.get("args", {}) if k.startswith("mem_")]:
            del e["args"][key]
    reports = peaks_from_profile(decoder, events)
    assert [r.method for r in reports] == [PeakMethod.LIVENESS] * len(PASTS)
    assert all(r.allocator_peak_bytes is None and r.allocator_chunk_peak_bytes is None for r in reports)
    assert all(r.transient_peak_bytes == r.liveness_peak_bytes for r in reports)


def test_invalid_profile_without_mem_fields_or_node_names(decoder, tmp_path):
    events = _profile_events(decoder, [_decoder_feeds(0)], tmp_path)
    for e in events:
        e.get("args", {}).clear()
    with pytest.raises(ValueError, match="run 0: profile has neither mem_\\* fields nor events that map"):
        peaks_from_profile(decoder, events)


def test_host_granularity_is_the_page_size():
    report = granularity()
    assert report.granule_bytes == mmap.PAGESIZE
    assert report.granule_bytes > 0 and report.granule_bytes & (report.granule_bytes - 1) == 0
    assert "SC_PAGE_SIZE" in report.source
