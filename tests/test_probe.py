"""``benchmarks/probe.py``'s combination step (``--combine``): which single levers it combines, and how.

The probe itself needs a GPU; what it decides to measure next does not."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from mamba2_tutorial.kernels.configs import FAST_16BIT_CB, SSDConfig

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("probe", ROOT / "benchmarks" / "probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_config_field_has_a_lever_group(probe):
    fields = {f.name for f in dataclasses.fields(SSDConfig)}
    grouped = [k for group in probe.GROUPS.values() for k in group]
    assert sorted(grouped) == sorted(fields)  # each field in exactly one group


def test_lever_names_the_group_of_a_single_lever(probe):
    base = probe.VARIANTS["ship b8"]
    assert probe.lever(base, probe.VARIANTS["s25 b8 rg2 occ2"]) == (
        "scan", {"scan_row_group": 2, "scan_hints": (2, None)})
    assert probe.lever(base, probe.VARIANTS["s27 b8 split2"])[0] == "state"
    assert probe.lever(base, probe.VARIANTS["s25 b8 cb early"]) == ("streams", {"scan_cb_early": True})
    assert probe.lever(base, probe.VARIANTS["s27 b8 split2 cb early"]) is None  # two groups: a combination
    assert probe.lever(base, base) is None
    # every variant of the device scripts is one lever or a combination; none changes a field outside GROUPS
    for name, cfg in probe.VARIANTS.items():
        if name.startswith(("s25 b8", "s26 b8", "s27 b8")):
            probe.lever(base, cfg)


def test_combinations_pair_the_faster_levers_one_per_group(probe):
    chain = {"ship b8": 0.645,
             "s25 b8 rg2 occ2": 0.630, "s25 b8 rg4 occ1 nww8": 0.625, "s25 b8 scan occ2": 0.640,  # scan
             "s27 b8 split2": 0.615, "s26 b8 tail same": 0.6449,                                    # state
             "s25 b8 cb early": 0.638, "s25 b8 batch2": 0.70,                                       # streams
             "s27 b8 split2 cb early": 0.60}                                                        # a combo
    combos = probe.combinations("ship b8", chain)
    # scan: the two fastest of three; state: split2 only (tail same is within the 0.5% margin); streams: cb
    # early only (batch2 is slower); every choice of at most one per group over two groups or more:
    # 2 x 1 + 2 x 1 + 1 x 1 + 2 x 1 x 1 = 7
    assert len(combos) == 7
    assert not any("scan occ2" in name or "tail same" in name or "batch2" in name for name in combos)
    full = combos["s25 b8 rg4 occ1 nww8 + s27 b8 split2 + s25 b8 cb early"]
    assert full == SSDConfig(**(vars(FAST_16BIT_CB) | dict(
        scan_row_group=4, scan_hints=(1, None, 8), state_tail=((64, 128, 128), (2, None)),
        state_tail_segments=2, scan_cb_early=True)))
    assert probe.combinations("ship b8", {"ship b8": 0.645, "s25 b8 rg2 occ2": 0.70}) == {}


def test_best_per_shape_ships_a_lever_only_past_the_noise(probe, tmp_path):
    def rec(ms, ok=True):
        return {"ms": {"chain": ms}, "ok": ok, "err": 3e-3}

    results = {"ship b8": {"b8-l4096-h80": rec(0.645), "b2-l8192-h128-g8": rec(0.546)},
               "s27 b8 split2": {"b8-l4096-h80": rec(0.615), "b2-l8192-h128-g8": rec(0.545)},
               "s25 b8 rg2 occ2": {"b8-l4096-h80": rec(0.600, ok=False)},  # failed its check: never shipped
               "s27 b8 split2 + s25 b8 cb early": {"b8-l4096-h80": rec(0.610)}}
    assert probe.best_per_shape(results, "ship b8") == {
        "b8-l4096-h80": "s27 b8 split2 + s25 b8 cb early",  # the fastest that passed
        "b2-l8192-h128-g8": "ship b8"}                     # 0.2% faster: noise, keep what ships
    combo = probe.combinations("ship b8", {"ship b8": 0.645, "s27 b8 split2": 0.615, "s25 b8 cb early": 0.63})
    path = tmp_path / "best.json"
    probe.write_best(results, "ship b8", combo, str(path))
    from mamba2_tutorial import bench

    configs = bench.read_configs(path)
    assert configs[(8, 4096, 80, 64, 1, 128, 256)] == combo["s27 b8 split2 + s25 b8 cb early"]
    assert configs[(2, 8192, 128, 64, 8, 128, 128)] == probe.VARIANTS["ship b8"]


def test_the_probe_runs_end_to_end_on_the_cpu_executor(probe, tmp_path, monkeypatch):
    # --dry-run: the script's whole path (check, stages, chain, combinations, probe.json, best.json) on the
    # CPU executor at a small preset, so a broken script is found here and not after the device time is spent
    import json

    from mamba2_tutorial import bench

    combo = {"s27 b8 split2 + s25 b8 cb early": probe.VARIANTS["s27 b8 split2 cb early"]}
    seen = []

    def fake_combinations(base_name, chain_ms):
        seen.append((base_name, sorted(chain_ms)))
        return combo

    monkeypatch.setattr(probe, "combinations", fake_combinations)
    probe.main(["--dry-run", "--shapes", "small", "--only", "ship b8,s25 b8 cb early,s27 b8 split2",
                "--combine", "ship b8", "--out", str(tmp_path)])
    assert seen == [("ship b8", ["s25 b8 cb early", "s27 b8 split2", "ship b8"])]
    out = json.loads((tmp_path / "probe.json").read_text())
    assert out["device"].startswith("CPU dry run") and not out["failed"]
    assert set(out["results"]) == {"ship b8", "s25 b8 cb early", "s27 b8 split2", *combo}
    stages = {"chunk_state_passing", "chunk_scan", "chain"}
    for per in out["results"].values():
        assert per["small"]["ok"] and set(per["small"]["ms"]) == stages
    assert "s27 b8 split2 + s25 b8 cb early" in out["variants"]
    configs = bench.read_configs(tmp_path / "best.json")
    assert list(configs) == [(2, 200, 8, 16, 2, 24, 64)]
    with pytest.raises(SystemExit):
        probe.main(["--dry-run", "--combine", "no such base"])


def test_device_scripts_parse_and_combine_on_known_bases(probe):
    # the device-call scripts are only ever run on the GPU machine: check here that bash can parse them and
    # that every --combine base they name is a probe variant
    import re
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    scripts = sorted((ROOT / "benchmarks").glob("*_gpu*.sh"))
    assert {p.name for p in scripts} >= {"probes_gpu.sh", "bench_gpu.sh", "attempt25_gpu.sh"}
    bases = set()
    for path in scripts:
        run = subprocess.run([bash, "-n", str(path)], capture_output=True, text=True, timeout=30)
        assert run.returncode == 0, (path.name, run.stderr)
        bases |= set(re.findall(r'--combine "([^"]+)"', path.read_text()))
    assert bases == {"ship b8", "ship b1", "ship g8"} and bases <= set(probe.VARIANTS)
