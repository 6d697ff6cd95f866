"""`pip install .` (not editable) works (issue #25): a wheel built from this tree, installed into a fresh venv.

The wheel is built with `pip wheel --no-deps` and installed with pip into a new virtual environment,
so its `ortmem` console script is the one pip generates. Its dependencies are not downloaded again:
a `.pth` file makes this environment's site-packages visible after the fresh one's own (a `.pth` in
a directory it adds is not processed, so this checkout's editable install stays invisible). Every
command runs from an empty folder, so nothing can be imported from the checkout.

Checked: `--version`; one verify phase (`verify --quick --checker admission`) exits 0 with the
drift phase saying what an installed copy cannot check instead of reporting every test missing;
`spec --write-docs` refuses with one line and exit 2, writing nothing into site-packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(cmd: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the fresh venv's bin folder, an empty working folder) with the wheel of this tree installed."""
    base = tmp_path_factory.mktemp("install")
    wheels, env, work = base / "wheels", base / "venv", base / "work"
    work.mkdir()
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)], base)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next(wheels.glob("ortmem-*.whl"))
    venv.EnvBuilder(with_pip=True).create(env)
    fresh = Path(sysconfig.get_path("purelib", vars={"base": str(env), "platbase": str(env)}))
    (fresh / "_ortmem_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    bin_dir = env / "bin"
    got = _run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], base)
    assert got.returncode == 0, got.stderr[-3000:]
    return bin_dir, work


@pytest.mark.slow
def test_installed_wheel_imports_from_site_packages_and_reports_its_version(installed) -> None:
    bin_dir, work = installed
    where = _run([str(bin_dir / "python"), "-c", "import refimpl, spec, invariants; print(refimpl.__file__)"], work)
    assert where.returncode == 0, where.stderr
    assert str(bin_dir.parent) in where.stdout and str(ROOT) not in where.stdout, where.stdout
    v = _run([str(bin_dir / "ortmem"), "--version"], work)
    assert v.returncode == 0 and v.stdout.strip() == "ortmem 0.1.0", (v.stdout, v.stderr)


@pytest.mark.slow
def test_installed_wheel_runs_a_verify_phase(installed) -> None:
    bin_dir, work = installed
    r = _run([str(bin_dir / "ortmem"), "verify", "--quick", "--checker", "admission", "--json", "r.json"], work)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "drift:" not in r.stdout, r.stdout[-3000:]  # no problem reported for missing docs or tests
    assert "drift not checked" in r.stdout and "an installed copy" in r.stdout
    import json

    report = json.loads((work / "r.json").read_text())
    assert report["ok"] and report["drift"] == [] and len(report["drift_unchecked"]) == 2
    assert report["campaigns"]["admission"]["examples"] > 0


@pytest.mark.slow
def test_write_docs_refuses_outside_a_checkout(installed) -> None:
    bin_dir, work = installed
    site = bin_dir.parent / "lib"
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    for argv in (["spec", "--write-docs"], ["simulate", "--write-docs"], ["explore", "--write-golden"],
                 ["trace", "--write-schema"]):
        r = _run([str(bin_dir / "ortmem"), *argv], work)
        assert r.returncode == 2, (argv, r.stdout, r.stderr)
        assert "installed copy" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().count("\n") == 0, r.stderr
    after = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    assert [p for p in after if p not in before] == []
