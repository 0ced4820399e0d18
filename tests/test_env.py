"""The environment report: pure decision logic with fake facts, and the real report on this machine."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from mamba2_tutorial.lessons import env
from mamba2_tutorial.lessons.env import Problem, diagnose
from mamba2_tutorial.runtime.platforms import cutile_available

HEALTHY = dict(
    cuda_available=True, capability=(9, 0), driver="580.95.05", gpu_name="NVIDIA H200", torch_cuda="13.0",
    cuda_tile="1.7.0", tileiras="/opt/bin/tileiras", tileiras_version="13.4.92",
)


def codes(problems: list[Problem]) -> list[str]:
    return [p.code for p in problems]


def test_healthy_gpu_and_plain_cpu_machines_have_nothing_to_fix():
    assert diagnose(**HEALTHY) == []
    cpu_only = dict(cuda_available=False, torch_cuda=None, tileiras="/x/tileiras", tileiras_version="13.4.92")
    assert diagnose(**cpu_only) == []
    # a 13.4+ CUDA_HOME is fine
    assert diagnose(**HEALTHY, cuda_home="/usr/local/cuda-13.4", cuda_home_version="13.4.1") == []


def test_old_gpu_gets_a_capability_message():
    problems = diagnose(**{**HEALTHY, "capability": (7, 5), "gpu_name": "Tesla T4"})
    assert codes(problems) == ["capability"]
    msg = problems[0].message
    assert "Tesla T4" in msg and "7.5" in msg and "sm_75" in msg and "8.0" in msg and "CPU tier" in msg


def test_capability_8_0_is_enough():
    assert diagnose(**{**HEALTHY, "capability": (8, 0)}) == []


@pytest.mark.parametrize("driver", ["550.1", "535.183.01", "470"])
def test_old_driver_gets_an_r580_message(driver):
    problems = diagnose(**{**HEALTHY, "driver": driver})
    assert codes(problems) == ["driver"]
    assert driver in problems[0].message and "r580" in problems[0].message


def test_unknown_driver_version_falls_back_to_the_cuda_version_it_supports():
    no_version = {**HEALTHY, "driver": None}
    problems = diagnose(**no_version, driver_cuda="12.8")
    assert codes(problems) == ["driver"] and "12.8" in problems[0].message and "r580" in problems[0].message
    assert diagnose(**no_version, driver_cuda="13.0") == []
    assert diagnose(**no_version, driver_cuda=None) == []
    # a known driver version wins over the CUDA version
    assert diagnose(**HEALTHY, driver_cuda="12.8") == []


def test_missing_tileiras_says_how_to_install_it():
    problems = diagnose(**{**HEALTHY, "tileiras": None, "tileiras_version": None})
    assert codes(problems) == ["tileiras"]
    assert 'pip install "cuda-tile[tileiras]==1.7.*"' in problems[0].message
    # it matters without a GPU too (the compile check)
    assert codes(diagnose(cuda_available=False, torch_cuda=None, tileiras=None)) == ["tileiras"]


def test_old_tileiras_version():
    problems = diagnose(**{**HEALTHY, "tileiras_version": "13.3.36"})
    assert codes(problems) == ["tileiras_version"]
    assert "13.3.36" in problems[0].message and "13.4" in problems[0].message


def test_old_cuda_home_warns_about_return_code_5():
    problems = diagnose(**HEALTHY, cuda_home="/usr/local/cuda-13.0", cuda_home_version="13.0")
    assert codes(problems) == ["cuda_home"]
    msg = problems[0].message
    assert "/usr/local/cuda-13.0" in msg and "return code 5" in msg and "13.4" in msg and "CUDA_HOME" in msg
    # an unreadable toolkit version is not reported as old
    assert diagnose(**HEALTHY, cuda_home="/somewhere", cuda_home_version=None) == []


def test_driver_with_a_cpu_build_of_torch():
    problems = diagnose(
        cuda_available=False, driver="580.1", torch_cuda=None, tileiras="/t", tileiras_version="13.4"
    )
    assert codes(problems) == ["torch_cpu_build"]
    assert "download.pytorch.org" in problems[0].message


def test_cuda_tile_missing_or_wrong_version():
    assert codes(diagnose(**{**HEALTHY, "cuda_tile": None})) == ["cuda_tile"]
    problems = diagnose(**{**HEALTHY, "cuda_tile": "1.6.0"})
    assert codes(problems) == ["cuda_tile"] and "1.6.0" in problems[0].message


def test_everything_wrong_at_once_lists_every_problem():
    problems = diagnose(
        cuda_available=True, capability=(6, 1), driver="470.2", gpu_name="GTX 1080", torch_cuda="12.1",
        cuda_tile="1.7.0", tileiras=None, cuda_home="/usr/local/cuda-12.4", cuda_home_version="12.4",
    )
    assert codes(problems) == ["capability", "driver", "tileiras", "cuda_home"]
    assert all(p.message and str(p) == p.message for p in problems)


def test_parse_helpers():
    assert env.parse_version("13.4.92") == (13, 4, 92)
    assert env.parse_version("2.13.0+cpu") == (2, 13, 0)
    assert env.parse_version("") is None and env.parse_version("none") is None
    assert env.parse_driver_version("580.95.05\n580.95.05\n") == "580.95.05"
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\nGCC version:"
    assert env.parse_driver_version(proc) == "550.54.15"
    assert env.parse_driver_version("NVIDIA-SMI has failed") is None
    assert env.parse_driver_version(None) is None
    out = "tileiras: NVIDIA (R) Cuda Tile IR\nCuda compilation tools, release 13.4, V13.4.92\n"
    assert env.parse_tileiras_version(out) == "13.4.92"
    assert env.parse_tileiras_version("Cuda compilation tools, release 13.3") == "13.3"
    assert env.parse_tileiras_version("garbage") is None


def test_cuda_home_toolkit_version(tmp_path):
    assert env.cuda_home_toolkit_version(None) is None
    assert env.cuda_home_toolkit_version(tmp_path) is None  # nothing to read
    (tmp_path / "version.txt").write_text("CUDA Version 12.4.131\n")
    assert env.cuda_home_toolkit_version(tmp_path) == "12.4.131"
    (tmp_path / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.2"}}))
    assert env.cuda_home_toolkit_version(tmp_path) == "13.0.2"


def _fake_choice(name, reason):
    return lambda: SimpleNamespace(name=name, reason=reason)


@pytest.mark.gpu
def test_report_on_a_usable_gpu():
    """On the GPU machine: the facts are read, the GPU tier is chosen, and nothing blocks it."""
    report = env.environment_report()
    assert report.cuda_available and report.gpu_count >= 1 and report.gpu_name
    assert tuple(report.capability) >= (8, 0)
    assert report.driver is not None and env.parse_version(report.driver)[0] >= 580, report.driver
    if report.driver_cuda is not None:  # read through a private torch hook that a build may lack
        assert env.parse_version(report.driver_cuda) >= (13, 0), report.driver_cuda
    assert report.tileiras_version and env.parse_version(report.tileiras_version)[:2] >= (13, 4)
    assert report.tier == "gpu", report.tier_reason
    blocking = {"capability", "driver", "tileiras", "tileiras_version", "cuda_tile"}
    assert not blocking & set(codes(report.problems)), [p.message for p in report.problems]
    print(report)


def test_report_on_this_machine():
    report = env.environment_report()
    assert report.tier in ("gpu", "cpu", "none") and report.tier_reason.strip()
    assert (report.tier == "none") == (not cutile_available()), report.tier_reason
    assert report.verdict.startswith("NOT READY" if report.tier == "none" else "READY"), report.verdict
    assert report.python and report.torch == torch.__version__ and report.package
    assert report.cuda_available == torch.cuda.is_available()
    if not report.cuda_available:
        assert report.tier in ("cpu", "none") and report.gpu_name is None and report.capability is None
    else:
        assert report.gpu_name and len(report.capability) == 2
    if report.tileiras_path is not None:
        assert report.tileiras_version, "tileiras was found but `tileiras --version` did not parse"
    text = str(report)
    assert "Tier: " in text and report.tier.upper() in text and "torch" in text and "tileiras" in text
    assert text.endswith(f"Verdict: {report.verdict}")
    md = report._repr_markdown_()
    assert "| torch |" in md and "**Tier:" in md
    assert json.loads(json.dumps(report.as_dict()))["tier"] == report.tier
    assert all(isinstance(p, Problem) and p.message for p in report.problems)


def test_report_takes_the_tier_from_select_backend():
    report = env.environment_report(select_backend=_fake_choice("gpu", "an sm_90 GPU with tileiras 13.4"))
    assert (report.tier, report.tier_reason) == ("gpu", "an sm_90 GPU with tileiras 13.4")
    assert "Tier: GPU: an sm_90 GPU with tileiras 13.4" in str(report)


def test_report_lists_problems(monkeypatch):
    monkeypatch.setattr(env, "this_platform", lambda: ("Linux", "x86_64"))  # a platform with cuTile wheels
    monkeypatch.setattr(env, "find_tileiras", lambda: None)
    report = env.environment_report(select_backend=_fake_choice("cpu", "no GPU"))
    assert "tileiras" in [p.code for p in report.problems]
    assert "To fix:" in str(report) and "cuda-tile[tileiras]" in str(report)


def test_main_prints_and_exits_0(capsys):
    assert env.main([]) == 0
    out = capsys.readouterr().out
    assert "environment report" in out and "Tier:" in out
    assert env.main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tier"] in ("gpu", "cpu", "none") and "problems" in data and "Verdict: " in out
