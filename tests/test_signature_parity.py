"""Our signature derivation (``mamba2_tutorial.runtime.signature``) against cuTile's own (``ct.launch``'s C
code).

The CPU executor's type check and every ahead-of-time compile (``python -m mamba2_tutorial compile``, the
registers and stack frames in docs/perf-history.md) use our derivation; a GPU launch uses cuTile's. Where they
disagree, the cubin we read is not the one the GPU runs. On the CPU, cuTile's derivation runs through a
stand-in CUDA driver (``tests/driverless.py``) in a subprocess; on a GPU, on real CUDA tensors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).with_name("signature_corpus.py")


def _report(differences) -> str:
    lines = [f"{len(differences)} case(s) where the two signatures differ; the first:"]
    for d in differences[:3]:
        lines += [f"  kernel {d['kernel']} with {d['args']}", f"    ours:   {d['ours']}",
                  f"    cutile: {d['cutile']}"]
    lines.append("Fix mamba2_tutorial/runtime/signature.py (array_constraint) to follow cuTile's rule.")
    return "\n".join(lines)


@pytest.mark.cutile  # the corpus script imports cuda.tile in a subprocess
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_signatures_match_cutiles_own_derivation(seed):
    run = subprocess.run([sys.executable, str(CORPUS), "--seed", str(seed), "--rounds", "150"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the corpus script failed:\n{run.stderr[-3000:]}"
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["cases"] > 500  # 150 rounds of 4-5 random cases, plus every kernel spec
    assert not report["differences"], _report(report["differences"])


def test_stand_in_driver_refuses_a_process_that_loaded_a_real_one():
    code = (
        "import sys, types\n"
        "sys.modules['cuda.tile._load_libcuda'] = types.ModuleType('cuda.tile._load_libcuda')\n"
        "sys.path.insert(0, 'tests')\n"
        "from driverless import install_stand_in_driver\n"
        "try:\n"
        "    install_stand_in_driver()\n"
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parent.parent)
    assert "refused: cuTile has already loaded the CUDA driver" in run.stdout, run.stderr[-2000:]


def test_as_cuda_array_rejects_device_tensors_and_keeps_scalars():
    import torch
    from driverless import as_cuda_array

    wrapped = as_cuda_array((torch.zeros(3), [torch.ones(2)], 5, 0.5))
    assert wrapped[0].__dlpack_device__() == (2, 0) and wrapped[2:] == (5, 0.5)
    assert wrapped[1][0].tensor.shape == (2,)
    with pytest.raises(ValueError, match="takes CPU tensors"):
        as_cuda_array(torch.zeros(2, device="meta"))


@pytest.mark.gpu
def test_signatures_match_ct_launch_on_the_gpu():
    from cuda.tile.compilation import CallingConvention, KernelSignature

    sys.path.insert(0, str(CORPUS.parent))
    import signature_corpus

    def real(kernel, args):
        return KernelSignature.from_kernel_args(kernel, args, CallingConvention.cutile_python_v2())

    pairs = signature_corpus.cases(seed=3, n=150, device="cuda")
    differences = signature_corpus.differences(pairs, real)
    assert not differences, _report(differences)
