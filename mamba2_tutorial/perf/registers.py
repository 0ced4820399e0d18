"""What packed rows cost the kernels themselves, read from the compiler on a machine without a GPU.

A packed row (``seq_idx``) runs exactly the launches of the unpacked row, so whatever time it adds is spent
inside the kernels. Its masks must not cost registers: a mask the compiler cannot keep in registers goes to
local memory (a spill) and is read back at every step. :func:`packed_costs` compiles every kernel that one
forward (and, with ``training``, its backward) launches for a config, packed and unpacked, for an sm_90 GPU
with ``tileiras`` (:func:`~mamba2_tutorial.runtime.compile.launch_resources`), and returns each kernel's
registers per thread and stack frame (spilled bytes). Notebook 13 prints it; ``tests/test_packed_spills.py``
holds every packed kernel to its unpacked frame.
"""

from __future__ import annotations

import dataclasses

import torch

from ..fast import FastConfig, Segmented, load_table
from ..fast.forward import ssd_forward
from ..lessons.inputs import SSDShape, make_inputs
from ..runtime.compile import launch_resources
from .bench import packed_seq_idx

__all__ = ["PACKED_COST_SHAPE", "format_packed_costs", "packed_costs", "table_config"]

#: the small problem the kernels are compiled for: one row of 1024 tokens, 8 heads of p = 64, n = 128, bf16,
#: packed from sequences of 100 to 400 tokens (registers and spills depend on the tiles, not on the length)
PACKED_COST_SHAPE = dict(batch=1, seqlen=1024, nheads=8, headdim=64, ngroups=1, dstate=128)
_PACKED_LENGTHS = (100, 400)


def table_config(name: str, segments: int = 2) -> FastConfig:
    """The config ``name`` of the shipped table, a segmented stage's segment count filled in with
    ``segments`` (the table's rule picks it per problem size)."""
    cfg = load_table().configs[name]
    if isinstance(cfg.state, Segmented) and cfg.state.segments is None:
        cfg = dataclasses.replace(cfg, state=dataclasses.replace(cfg.state, segments=segments))
    return cfg


def packed_costs(config: FastConfig, chunk_size: int, *, training: bool = False, arch: str = "sm_90",
                 seed: int = 0) -> dict[str, dict[str, dict[str, int]]]:
    """``{"unpacked": costs, "packed": costs}``, each ``{kernel name: {"registers", "frame_bytes"}}`` (the
    largest over a kernel's launches) of one forward of ``config`` at :data:`PACKED_COST_SHAPE` and
    ``chunk_size``, and of its backward too with ``training``. Nothing runs: the launches are recorded
    and compiled for ``arch`` on the CPU (``tileiras`` needed: :class:`TileirasNotFound` otherwise)."""
    shape = SSDShape(**PACKED_COST_SHAPE, chunk_size=chunk_size)
    inp = make_inputs(shape, seed=seed, dtype=torch.bfloat16, D=False)
    seq_idx = packed_seq_idx(shape.batch, shape.seqlen, seed=seed, lengths=_PACKED_LENGTHS)
    costs = {}
    for name, packed in (("unpacked", None), ("packed", seq_idx)):
        args = {k: inp[k].detach().clone().requires_grad_(training) for k in ("x", "dt", "A", "B", "C")}

        def run(args=args, packed=packed):
            y = ssd_forward(chunk_size=chunk_size, seq_idx=packed, config=config, backend="cpu", **args)
            if training:
                y.float().sum().backward()

        costs[name] = launch_resources(run, arch)
    return costs


def format_packed_costs(costs: dict[str, dict[str, dict[str, int]]]) -> str:
    """The table of :func:`packed_costs`: per kernel, registers per thread and spilled bytes per thread,
    unpacked then packed ("-" where a kernel runs only one way)."""
    unpacked, packed = costs["unpacked"], costs["packed"]

    def cell(r, key):
        return f"{r[key]:>8d}" if r else f"{'-':>8s}"

    lines = [f"{'kernel (compiled for sm_90)':32s} {'registers':>17s}   {'spilled bytes':>17s}",
             f"{'':32s} {'unpacked':>8s} {'packed':>8s}   {'unpacked':>8s} {'packed':>8s}"]
    for kernel in dict.fromkeys([*unpacked, *packed]):
        u, k = unpacked.get(kernel), packed.get(kernel)
        lines.append(f"{kernel:32s} {cell(u, 'registers')} {cell(k, 'registers')}   "
                     f"{cell(u, 'frame_bytes')} {cell(k, 'frame_bytes')}")
    return "\n".join(lines)
