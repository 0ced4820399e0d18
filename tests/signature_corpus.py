"""A corpus of kernel launch arguments, and the comparison of two signature derivations over it.

Run as a script (``python tests/signature_corpus.py --seed 0``) it installs the stand-in CUDA driver
(:mod:`tests/driverless.py`), derives every case's signature both ways, CPU tensors only, and prints
a JSON report: ``tests/test_signature_parity.py`` runs it in a subprocess, since the stand-in driver must own
the process. The GPU test imports :func:`cases` and :func:`differences` and uses real CUDA tensors.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Annotated

import cuda.tile as ct
import torch

if __name__ == "__main__":  # run as a script from anywhere: the package is one level up
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


@ct.kernel
def plain(a, b, s, f, flag, K: ct.Constant[int]):
    pass


@ct.kernel
def wide(a: ct.IndexedWithInt64, n: ct.ScalarInt64):
    pass


@ct.kernel
def static_shape(a: Annotated[ct.Array, ct.ArrayAnnotation(static_shape_dims=(0, -1))]):
    pass


@ct.kernel
def static_stride(a: Annotated[ct.Array, ct.ArrayAnnotation(static_stride_dims=(0,))]):
    pass


@ct.kernel
def listed(xs, T: ct.Constant[int]):
    pass


DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8, torch.bool)
SIZES = (1, 2, 3, 5, 8, 16, 17, 24, 32)
VIEWS = ("contiguous", "permuted", "narrowed", "offset", "broadcast", "overlapping", "stepped")


def random_array(rng: random.Random, device: str) -> torch.Tensor:
    """A tensor of random dtype, rank 0-6 and sizes, seen through one of VIEWS (odd strides, a base pointer
    off 16-byte alignment, stride 0, elements that overlap)."""
    dtype = rng.choice(DTYPES)
    ndim = rng.choice((0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6))
    shape = [rng.choice(SIZES) for _ in range(ndim)]

    def zeros(size):
        return torch.zeros(size, dtype=dtype, device=device)

    view = rng.choice(VIEWS)
    if ndim >= 2 and view == "permuted":
        order = list(range(ndim))
        rng.shuffle(order)
        return zeros(shape).permute(*order)
    if ndim >= 1 and view == "narrowed":
        d = rng.randrange(ndim)
        return zeros(shape).narrow(d, 0, max(1, shape[d] // 2))
    if ndim >= 1 and view == "offset":
        numel = 1
        for s in shape:
            numel *= s
        k = rng.randrange(1, 8)
        return zeros(numel + 8)[k:k + numel].view(shape)
    if ndim >= 1 and view == "broadcast":
        d = rng.randrange(ndim)
        return zeros([1 if i == d else s for i, s in enumerate(shape)]).expand(*shape)
    if ndim >= 2 and view == "overlapping":
        return zeros(shape[0] + shape[1]).as_strided((shape[0], shape[1]), (1, 1))
    if ndim >= 1 and view == "stepped":
        d = rng.randrange(ndim)
        step = rng.choice((2, 3))
        index = [slice(None)] * ndim
        index[d] = slice(None, None, step)
        return zeros([s * step if i == d else s for i, s in enumerate(shape)])[tuple(index)]
    return zeros(shape)


def cases(seed: int, n: int, device: str = "cpu") -> list[tuple]:
    """(kernel, args) pairs: ``n`` rounds of random arrays through the five annotation kinds above, then
    every kernel spec of the package with its example arguments."""
    from mamba2_tutorial import all_kernel_specs

    rng = random.Random(seed)
    out: list[tuple] = []
    for _ in range(n):
        out.append((plain, (random_array(rng, device), random_array(rng, device), rng.randrange(100), 0.5,
                            True, 16)))
        out.append((wide, (random_array(rng, device), 7)))
        a = random_array(rng, device)
        if a.dim() >= 1:
            out.append((static_shape, (a,)))
            out.append((static_stride, (a,)))
        first = random_array(rng, device)
        items = [first] + [first.clone() if rng.random() < 0.5 else torch.zeros_like(first)
                           for _ in range(rng.randrange(3))]
        out.append((listed, (items, 4)))
    for spec in all_kernel_specs():
        args = spec.make_args()[1]
        if device != "cpu":
            args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
        out.append((spec.kernel, tuple(args)))
    return out


def _describe(value):
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype)[6:]
        return f"{dtype}{tuple(value.shape)} strides {value.stride()} base%16={value.data_ptr() % 16}"
    if isinstance(value, list | tuple):
        return type(value)(_describe(v) for v in value)
    return value


def differences(pairs, real_signature) -> list[dict]:
    """Cases where :func:`mamba2_tutorial.runtime.signature.kernel_signature` and ``real_signature(kernel,
    args)`` disagree: different parameters, or only one of them raising."""
    from mamba2_tutorial.runtime.signature import kernel_signature

    found = []
    for kernel, args in pairs:
        got = {}
        for name, derive in (("ours", kernel_signature), ("cutile", real_signature)):
            try:
                got[name] = derive(kernel, args).parameters
            except Exception as exc:  # noqa: BLE001 - an error on both sides is agreement
                got[name] = f"raises {type(exc).__name__}"
        ours, real = got["ours"], got["cutile"]
        both_raise = isinstance(ours, str) and isinstance(real, str)
        if not both_raise and ours != real:
            found.append({"kernel": kernel._annotated_function.pyfunc.__name__,
                          "args": repr(_describe(args)), "ours": repr(ours), "cutile": repr(real)})
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args(argv)
    from driverless import install_stand_in_driver, launch_signature

    install_stand_in_driver()
    pairs = cases(args.seed, args.rounds)
    print(json.dumps({"cases": len(pairs), "differences": differences(pairs, launch_signature)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
