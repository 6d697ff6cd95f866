"""`ortmem serve --workers N`: per-worker quota, budget and events; Ctrl-C shuts down with no process left, no
model folder left, and exit 130 (through the console script's launcher, tests/test_cli_conventions.py's SCRIPT)."""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import time
from refimpl.hierarchy.driver import live_processes


def test_serve_prints_workers_and_stops_cleanly_on_ctrl_c(tmp_path) -> None:
    p = subprocess.Popen([sys.executable, "-c", "from refimpl.cli_main import run; run()", "serve", "--workers", "2",
                          "--quota", "16", "--interval", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, env={**os.environ, "COLUMNS": "200", "TMPDIR": str(tmp_path)})
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    seen, deadline = b"", time.monotonic() + 30
    try:
        while seen.count(b"worker 2 (pid") < 5 and time.monotonic() < deadline:  # load, then requests
            if sel.select(timeout=1.0):
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                seen += chunk
        assert seen.count(b"worker 2 (pid") >= 5, seen.decode(errors="replace")
        assert b"quota" in seen and b"budget" in seen and b"events:" in seen
        os.killpg(p.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground group
        rest, _ = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
    out = (seen + rest).decode(errors="replace")
    assert p.returncode == 130, out  # interrupted (the README's exit codes), after a clean shutdown
    assert "shutdown clean: no process left" in out and "Traceback" not in out
    assert not list(tmp_path.glob("ortmem-serve-*")), "the temporary model folder was left behind"
    assert live_processes(session=p.pid) == []
    assert "ledger" in out and "models {'m" in out  # the workers served real models
    compared = re.search(r"outputs: (\d+) requests compared with an ungoverned session, (\d+) differ", out)
    assert compared is not None and int(compared[1]) > 0 and compared[2] == "0", out


# --- real ORT models in the workers (C10: each worker's manager bounded by its slice) -----------------------

import shutil  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from refimpl.hierarchy.driver import Hierarchy, leftovers  # noqa: E402
from refimpl.ort.served import build_served_models, needs, reference_outputs  # noqa: E402
from spec.errors import CapacityDenied, InvalidTransition, ModelFileInvalid  # noqa: E402

MIB = 1 << 20


@pytest.fixture(scope="module")
def paths() -> Iterator[list[str]]:
    d = tempfile.mkdtemp(prefix="h12m-")
    yield build_served_models(d, (256, 768))
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def hier() -> Iterator[Hierarchy]:
    d = tempfile.mkdtemp(prefix="h12s-")
    h = Hierarchy(d, 12, preload=("refimpl.ort.served",)).start()  # workers fork with ORT imported once
    yield h
    h.close()
    shutil.rmtree(d, ignore_errors=True)
    assert leftovers(h.pids, h.starts) == [], "a hierarchy process outlived the test"


def _units(path: str) -> int:
    n = needs(path)
    return -(-n.weights // MIB) + -(-n.peak // MIB)


def _within_slice(h: Hierarchy, wid: int) -> dict[str, int]:
    """The worker's own ledger (bytes) never holds more than its slice, nor its authority more than its capacity."""
    led = h.wop(wid, "ledger")
    assert led["workload"] <= led["slice"], led
    assert led["used"] <= led["capacity"], led
    return led


def test_worker_serves_a_real_model_inside_its_slice_bit_for_bit(hier: Hierarchy, paths: list[str]) -> None:
    wid = hier.spawn()
    small = paths[0]
    cost = _units(small)
    assert hier.wop(wid, "cost", small) == {"weights": 1, "arena": cost - 1}
    assert hier.wop(wid, "request", cost) == ["granted", cost]
    assert hier.wop(wid, "load", "m", small) == {"weights": 1, "arena": cost - 1}
    led = _within_slice(hier, wid)
    assert led["workload"] == cost * MIB == led["slice"]  # weights and peak charged before the session existed
    w = hier.wop(wid, "snapshot")
    assert (w["committed"], w["reserved"], w["models"]) == (cost, 0, {"m": cost})
    rids = list(range(7))
    got = {int(k): v for k, v in hier.wop(wid, "infer", "m", rids).items()}
    _within_slice(hier, wid)
    assert hier.wop(wid, "unload", "m") == cost
    assert hier.wop(wid, "ledger")["workload"] == 0  # released on unload
    assert hier.wop(wid, "snapshot")["models"] == {}
    hier.close()
    assert got == reference_outputs(small, rids)  # the governed session's outputs equal ORT's own, bit for bit
    assert len(set(got.values())) == len(rids)  # distinct requests, distinct outputs: the comparison can fail


def test_load_that_does_not_fit_is_refused_and_charges_nothing(hier: Hierarchy, paths: list[str]) -> None:
    wid = hier.spawn()
    wide = paths[1]
    cost = _units(wide)
    assert hier.wop(wid, "request", cost - 1) == ["granted", cost - 1]
    before = (hier.wop(wid, "snapshot"), hier.wop(wid, "ledger"), hier.snapshot()["workers"][wid]["quota"])
    with pytest.raises(CapacityDenied, match=f"needs {cost} units, budget {cost - 1}"):
        hier.wop(wid, "load", "w", wide)
    assert (hier.wop(wid, "snapshot"), hier.wop(wid, "ledger"), hier.snapshot()["workers"][wid]["quota"]) == before
    assert hier.wop(wid, "request", 1) == ["granted", 1]  # the missing unit arrives: now it fits exactly
    hier.wop(wid, "load", "w", wide)
    assert _within_slice(hier, wid)["workload"] == cost * MIB


@pytest.mark.parametrize("bad", ["/nonexistent/model.onnx", "", 7])
def test_invalid_model_path_is_refused_unchanged(hier: Hierarchy, paths: list[str], bad: object) -> None:
    wid = hier.spawn()
    hier.wop(wid, "request", 4)
    before = (hier.wop(wid, "snapshot"), hier.wop(wid, "ledger"))
    with pytest.raises(ModelFileInvalid, match="does not exist"):
        hier.wop(wid, "load", "m", bad)
    with pytest.raises(InvalidTransition, match="not loaded"):
        hier.wop(wid, "infer", "m", [1])
    assert (hier.wop(wid, "snapshot"), hier.wop(wid, "ledger")) == before


def test_defer_then_grant_lets_the_second_worker_load(hier: Hierarchy, paths: list[str]) -> None:
    a, b = hier.spawn(), hier.spawn()
    wide = paths[1]
    cost = _units(wide)  # 6 of a 12 MiB serving quota
    assert hier.wop(a, "request", 12 - 1) == ["granted", 11]
    hier.wop(a, "load", "w", wide)
    with pytest.raises(CapacityDenied):
        hier.wop(b, "load", "w", wide)
    result = hier.wop(b, "request", cost)
    assert result[0] == "deferred"  # only 1 MiB free at the coordinator
    assert hier.wop(b, "snapshot")["slice"] == 0  # a deferring worker keeps no uncommitted quota
    hier.wop(a, "unload", "w")
    hier.wop(a, "return", 11)
    assert hier.op("arbitrate") == [result[1]]
    deadline = time.monotonic() + 10
    while hier.wop(b, "snapshot")["slice"] < cost and time.monotonic() < deadline:
        time.sleep(0.02)
    hier.wop(b, "load", "w", wide)
    assert _within_slice(hier, b)["workload"] == cost * MIB
    got = hier.wop(b, "infer", "w", [3, 4])
    hier.close()
    assert {int(k): v for k, v in got.items()} == reference_outputs(wide, [3, 4])
