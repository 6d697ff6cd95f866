"""`ortmem simulate`: every scenario's figures pinned at the reference geometry (DESIGN-FACTS section 9).

Exact ints where the arithmetic is exact; Fractions for ratios and speeds.
The upstream figures each test compares against are the section-9 ones;
where ours differ, the pinned value is ours and the scenario says why.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from refimpl.cli import main
from refimpl.simulate import QWEN14B_ZP, batching, file_vs_extents, manage_vs_decline, static_vs_elastic
from refimpl.simulate_plots import PLOT_FILES, write_plots


@pytest.fixture(scope="module")
def elastic():
    return static_vs_elastic()


@pytest.mark.parametrize("name, value", [
    ("KV stranded at load, static", 1_610_612_736),  # 196,608 x 8,192 (#857)
    ("KV stranded at load, elastic (one bucket)", 50_331_648),  # 256 tokens
    ("weight budget, static", 6_116_140_442),
    ("weight budget, static at ctx 1024", 7_525_426_586),
    ("weight budget, elastic at 16 tokens (512 MiB headroom)", 7_139_550_618),
    ("weight budget, elastic at 16 tokens (no headroom)", 7_676_421_530),
    ("KV committed, elastic at 2048 tokens", 402_653_184),
    ("weight budget, elastic at 2048 tokens", 6_787_229_082),
    ("streaming floor, static", 2_213_765_734),
    ("streaming floor, static at ctx 1024", 804_479_590),
    ("streaming floor, elastic at 16 tokens", 1_190_355_558),
    ("streaming floor, elastic at 2048 tokens", 1_542_677_094),
    ("streamed, static, LRU", 8_329_906_176),  # the whole model: LRU on a cyclic sweep misses everything
    ("streamed, elastic at 16 tokens, LRU", 8_329_906_176),
    ("streamed, static, pinned", 2_217_153_024),
    ("streamed, elastic at 16 tokens, pinned", 1_193_363_328),
    ("streamed, elastic at 2048 tokens, pinned", 1_545_194_112),
    ("streamed, static at ctx 1024, pinned", 807_978_112),
    ("floor reduction available (static / ctx 1024)", Fraction(2_213_765_734, 804_479_590)),
    ("reduction static -> elastic, pinned", Fraction(2_217_153_024, 1_193_363_328)),
    ("reduction static -> elastic, LRU", Fraction(1)),
])
def test_static_vs_elastic_figures(elastic, name: str, value) -> None:
    assert elastic.figure(name).value == value


def test_static_vs_elastic_matches_upstream_where_the_arithmetic_is_the_same(elastic) -> None:
    for name in ("KV stranded at load, static", "weight budget, static", "weight budget, static at ctx 1024",
                 "weight budget, elastic at 16 tokens (512 MiB headroom)",
                 "weight budget, elastic at 16 tokens (no headroom)"):
        assert elastic.figure(name).ratio == 1, name
    # Upstream's "2.75x available" is the floor ratio static / ctx 1024, to its two digits.
    assert round(float(elastic.figure("floor reduction available (static / ctx 1024)").value), 2) == 2.75


def test_pinned_reaches_the_floor_and_lru_does_not(elastic) -> None:
    slot = QWEN14B_ZP.granule
    for budget in ("static", "elastic at 16 tokens", "elastic at 2048 tokens"):
        floor = elastic.figure(f"streaming floor, {budget}").value
        pinned = elastic.figure(f"streamed, {budget}, pinned").value
        assert floor <= pinned < floor + 2 * slot, budget
    assert elastic.figure("streamed, static, LRU").value == QWEN14B_ZP.referenced
    assert "PINNED policy reaches the floor" in elastic.conclusions[0]


def test_elastic_budget_dips_only_during_growth_and_never_oversubscribes(elastic) -> None:
    s = elastic.series
    budget, headroom = QWEN14B_ZP.device_budget, QWEN14B_ZP.headroom
    assert all(w + kv + headroom <= budget for w, kv in zip(s["after"], s["kv"]))
    grown = [i for i in range(1, len(s["kv"])) if s["kv"][i] > s["kv"][i - 1]]
    assert grown == [256, 512, 768, 1024, 1280, 1536, 1792]  # token 257, 513, ... start a new bucket
    assert all(s["during"][i] < s["after"][i] for i in grown)  # the copy's peak was reclaimed from the cache


@pytest.fixture(scope="module")
def extents():
    return file_vs_extents()


@pytest.mark.parametrize("name, value", [
    ("external-data file", 16_652_453_888),
    ("referenced extents", 8_329_906_176),
    ("dead prefix (orphaned)", 8_322_547_712),
    ("file / referenced", Fraction(16_652_453_888, 8_329_906_176)),
    ("admission plan from file size", 16_654_173_726),  # roundup(file, 2 MiB) + 689,694
    ("admission plan from referenced extents", 8_332_674_590),  # roundup(referenced, 2 MiB) + 689,694
    ("streaming floor implied by file size (static budget)", 10_536_313_446),
    ("streaming floor implied by referenced extents (static budget)", 2_213_765_734),
])
def test_file_vs_extents_figures(extents, name: str, value) -> None:
    assert extents.figure(name).value == value


def test_file_vs_extents_reads_a_real_model_with_the_reference_proportion(extents) -> None:
    # The reader saw the scaled-down blob (gcd 2,048), so its own figures carry the exact proportion.
    assert "4,067,337 B referenced of a 8,131,081 B blob" in extents.conclusions[0]
    assert Fraction(4_067_337, 8_131_081) == Fraction(8_329_906_176, 16_652_453_888)
    assert round(float(extents.figure("file / referenced").value), 2) == 2.00


@pytest.fixture(scope="module")
def decline():
    return manage_vs_decline()


def test_manage_vs_decline_figures(decline) -> None:
    W = 8_329_906_176
    assert decline.figure("moved per step, managed (LRU copy)").value == W
    low = decline.figure("managed tok/s (low resident bandwidth)").value
    assert low == 1 / (Fraction(W, 5_600_000_000) + Fraction(W, 100_000_000_000))
    dec = decline.figure("declined tok/s (high resident bandwidth)").value
    assert dec == 1 / (Fraction(600_000_000, 5_600_000_000) + Fraction(W, 133_000_000_000))
    ratio = decline.figure("declined / managed (low)").value
    assert 8 < ratio < 9 and decline.figure("declined / managed (low)").upstream == 30  # direction, not size


def test_decline_rule_and_report(decline) -> None:
    assert "-> platform" in decline.conclusions[0] and "(batched) -> runtime" in decline.conclusions[0]
    assert "not enforced = ['weights']" in decline.conclusions[1]


def test_batching_figures() -> None:
    sc = batching()
    assert sc.figure("N_max at 2048 context (no headroom)").value == 19
    assert sc.figure("N_max at 2048 context (512 MiB headroom)").value == 17
    assert sc.figure("KV per sequence at 2048 context").value == 402_653_184
    assert sc.figure("per-token weight bytes at N=1, pinned").value == 1_009_059_328
    n19 = sc.figure("per-token weight bytes at N=19, pinned").value
    assert n19 == Fraction(8_256_505_856, 19)
    assert sc.series["fixed"][0] / sc.series["fixed"][-1] == pytest.approx(19)  # 1/N when nothing stays resident


def test_plots_one_png_per_scenario(tmp_path: Path, elastic, extents, decline) -> None:
    paths = write_plots(tmp_path, (elastic, extents, decline, batching()))
    assert sorted(p.name for p in paths) == sorted(PLOT_FILES.values())
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000, p


def test_cli_simulate_prints_upstream_beside_ours(capsys, tmp_path: Path) -> None:
    assert main(["simulate", "--scenario", "batching", "--plots", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "N_max at 2048 context" in out and "19 seqs" in out and "1.000" in out
    assert (tmp_path / PLOT_FILES["batching"]).is_file() and len(list(tmp_path.iterdir())) == 1


def test_verify_report_folder_gets_the_scenario_plots(tmp_path: Path, monkeypatch) -> None:
    # The verify run itself is tested in test_verify.py; here only what the report step writes.
    import refimpl.cli as cli
    from refimpl.verify import Report

    monkeypatch.setattr(cli, "verify", lambda profile, progress, jobs=None, checkers=None, **kw: Report(True, profile, (), {}, {}, (), 0.0))
    folder = tmp_path / "report"
    assert main(["verify", "--quick", "--report", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == sorted(["report.md", "report.json", *PLOT_FILES.values()])
