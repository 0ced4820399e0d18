"""The fast path's kernels as compile specs: exactly what the shipped configs launch.

For every problem class of every shipped tuning table, a small problem of that class (its dtype and chunk
size, the layout's p, n and length) runs ``ssd_forward`` with the class's config, the forward as training
runs it (``training_stages``; specs named ``...train...``) and, where the config packs rows in its kernels,
the forward on a packed batch (``seq_idx``; ``...packed...``), for inference and for training, through the
launch recorder
(``runtime.launch.recording``): nothing executes, and each launch's kernel, compiler hint, grid and arguments
are kept. Distinct (kernel, hint, argument signature) launches become :class:`KernelSpec` entries, so that
``python -m mamba2_tutorial compile`` compiles what a user can launch, and nothing no config runs.
"""

from __future__ import annotations

import functools

import torch

from ..runtime.launch import recording
from ..runtime.specs import KernelSpec
from .stages import packs_in_kernels
from .tuning import load_table, table_names, with_segments

__all__ = ["SPECS", "shipped_specs"]


def _problem(key: str) -> dict:
    """A small problem of class ``key`` ("dtype/size/layout/q..."): sizes that make the layout what it says,
    with every optional input (D, z, dt_bias with softplus), as a Mamba-2 layer passes them."""
    dtype_name, _size, layout, q = key.split("/")
    Q = 128 if q == "q<=128" else 256
    b, h, p, n = (1, 8, 64, 128) if layout == "long" else (2, 8, 128 if layout == "wide" else 64, 128)
    nchunks = 32 if layout == "long" else 3
    l = nchunks * Q - Q // 2                                           # a ragged last chunk
    dtype = getattr(torch, dtype_name)
    gen = torch.Generator().manual_seed(0)
    return dict(x=torch.randn(b, l, h, p, generator=gen).to(dtype), dt=torch.rand(b, l, h, generator=gen),
                A=-torch.rand(h, generator=gen), B=torch.randn(b, l, 1, n, generator=gen).to(dtype),
                C=torch.randn(b, l, 1, n, generator=gen).to(dtype), chunk_size=Q,
                D=torch.randn(h, generator=gen), z=torch.randn(b, l, h, p, generator=gen).to(dtype),
                dt_bias=torch.randn(h, generator=gen), dt_softplus=True)


def _packed(inp: dict):
    """seq_idx for the problem ``inp``: each row packed from two sequences, the boundary inside a chunk."""
    b, l = inp["x"].shape[:2]
    seq_idx = torch.zeros(b, l, dtype=torch.int32)
    seq_idx[:, l // 3:] = 1
    return seq_idx


#: tile sizes: a variant at other tile sizes is the same code, so the compile check takes it once
_TILE_PARAMS = {"Q", "TK", "TM", "TN", "TP", "NS", "TR"}


def _variant(kernel, args) -> tuple:
    """What makes a launch a different program: each tensor's dtype and rank, each flag's value, the hint;
    not the tile sizes (and not the problem's sizes)."""
    code = kernel._pyfunc.__code__
    names = code.co_varnames[:code.co_argcount]
    return (kernel._pyfunc.__name__, repr(kernel._compiler_options)) + tuple(
        (a.dtype, a.dim()) if isinstance(a, torch.Tensor) else (None if name in _TILE_PARAMS else a)
        for name, a in zip(names, args))


def _training_forward(inp: dict, cfg, seq_idx=None) -> None:
    """The forward's kernels as training launches them (``training_stages``: the fused state stage keeps dt,
    the segmented one's scan stores the true entering states), on packed rows with ``seq_idx``. (The
    backward's kernels are their modules' specs, packed rows among them.)"""
    from ..runtime.autograd import SSDInputs, SSDOptions
    from .forward import training_stages

    stages = training_stages(cfg, seq_idx)
    opts = SSDOptions(inp["chunk_size"], inp["dt_softplus"], (0.0, float("inf")), "cpu", stages)
    stages(SSDInputs(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], inp["D"], inp["dt_bias"], None), opts)


@functools.lru_cache(maxsize=1)
def shipped_specs() -> tuple[KernelSpec, ...]:
    """One spec per distinct launch of the shipped configs (see the module docstring), in a stable order."""
    from .forward import ssd_forward

    specs: dict = {}
    for table_name in table_names():
        table = load_table(table_name)
        for key in sorted(table.classes):
            inp = _problem(key)
            b, l, h = inp["x"].shape[:3]
            cfg = with_segments(table.config(key), b, h, -(-l // inp["chunk_size"]), table)
            runs = (("", lambda inp=inp, cfg=cfg: ssd_forward(**inp, backend="cpu", config=cfg)),
                    (".train", lambda inp=inp, cfg=cfg: _training_forward(inp, cfg)))
            if packs_in_kernels(cfg):
                runs += ((".packed", lambda inp=inp, cfg=cfg: ssd_forward(**inp, seq_idx=_packed(inp),
                                                                          backend="cpu", config=cfg)),
                         (".packed.train",
                          lambda inp=inp, cfg=cfg: _training_forward(inp, cfg, _packed(inp))))
            for suffix, run in runs:
                launches: list = []
                with recording(lambda kernel, grid, args, seen=launches: seen.append((kernel, grid, args))):
                    run()
                for kernel, grid, args in launches:
                    base = kernel._pyfunc.__name__
                    ident = _variant(kernel, args)
                    if ident in specs:
                        continue
                    where = key.replace("/", ".").replace("<=", "le").replace(">=", "ge")
                    name = f"fast.{table_name}.{where}{suffix}.{base}"
                    specs[ident] = KernelSpec(name, kernel, lambda grid=grid, args=args: (grid, args))
    return tuple(specs.values())


class _LazySpecs:
    """``SPECS`` for :func:`mamba2_tutorial.runtime.specs.all_kernel_specs`, built on first use."""

    def __iter__(self):
        return iter(shipped_specs())

    def __len__(self):
        return len(shipped_specs())

    def __bool__(self):
        return True


SPECS = _LazySpecs()
