"""``ssd_forward``: the drop-in Mamba-2 SSD forward, running the tuned kernels chosen for the problem size.

The same arguments, semantics and return convention as mamba_ssm's ``mamba_chunk_scan_combined`` (forward),
and the same results as the taught three-launch ``ssd_forward_taught`` up to float32 rounding. It runs two
stages, each picked by the :class:`~mamba2_tutorial.fast.config.FastConfig` of the problem
(:func:`~mamba2_tutorial.fast.tuning.ssd_config`: the shipped table of the GPU, by problem class), resolved
once for the call (:func:`~mamba2_tutorial.fast.plan.resolve`) and run from the call's inputs grouped whole
(:mod:`~mamba2_tutorial.fast.stages`):

    dt_out, dA_cumsum, chunk_init_states, final_states, carry = run_state(plan, StateCall)  (kernels 1, 2)
    out                                                      = run_scan(plan, ScanCall)     (kernel 3)
"""

from __future__ import annotations

import functools

import torch

from ..kernels._host import strided_ok
from ..kernels.chunk_state import launch_chunk_state
from ..kernels.state_passing import launch_state_passing
from ..reference.packed import packed_results
from ..runtime.autograd import SSDOptions, needs_grad, ssd_autograd
from ..runtime.launch import resolve_backend
from ..runtime.validation import validate_kernel_inputs, validate_packing
from .backward import ssd_backward_fast
from .config import FUSED_WALKS, FastConfig
from .plan import Plan, ScanCall, StateCall, resolve
from .stages import packs_in_kernels, run_scan, run_state, training_stages
from .tuning import ssd_config
from .varlen import varlen_states

__all__ = ["Plan", "ScanCall", "StateCall", "resolve", "run_scan", "run_state", "ssd_forward", "ssd_stages",
           "training_stages"]

_NO_LIMIT = (0.0, float("inf"))


def ssd_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
                cu_seqlens=None, dt_softplus=False, dt_limit=_NO_LIMIT, return_final_states=False,
                return_varlen_states=False, *, backend="auto", config: FastConfig | None = None,
                _poison=False):
    """Mamba-2 SSD forward with the tuned cuTile kernels: ``out`` or ``(out, final_states)``.

    Arguments (in their positions) and results as ``mamba_chunk_scan_combined``: x (b, l, h, p), dt (b, l, h),
    A (h,), B and C (b, l, g, n); optional D (h,) or (h, p), z (b, l, h, p), dt_bias (h,), initial_states
    (b, h, p, n). Packed sequences as mamba_ssm: ``seq_idx`` (b, l) int32, non-decreasing (no state and no
    decay crosses a change of seq_idx; ``initial_states`` enters sequence 0), with ``cu_seqlens``
    (number of sequences + 1,) and ``return_varlen_states`` (b = 1) each sequence's final state as the last
    result, (number of sequences, h, p, n). A config whose stages pack (a fused or segmented state stage, a
    whole-chunk or shared scan: ``packs_in_kernels``) resets the state inside the kernels, with the launches
    of the unpacked batch (``fast/resets.py``), forward and, under autograd, backward
    (``fast/backward.py``); ``return_varlen_states`` reads each sequence's final state from the stored
    entering states (``fast/varlen.py``). The taught stages, and ``return_varlen_states`` under autograd
    (the varlen states would not be differentiable), run every sequence alone (:func:`_each_sequence`).
    out (b, l, h, p) in x's dtype; final_states (b, h, p, n) float32. x, B, C (and z) share one dtype:
    float32, float16 or bfloat16 (mma operands; every product accumulates in float32). ``chunk_size`` (Q)
    must be a power of two; the sequence length l is arbitrary. All arguments are checked before any kernel
    runs. ``backend``: "auto" (the GPU when usable, else the CPU tile executor), "gpu" or "cpu".

    ``config``: a :class:`~mamba2_tutorial.fast.config.FastConfig` in place of the shipped one for this size
    (``ssd_config``); ``FastConfig()`` runs the taught kernels. Differentiable: when an input requires a
    gradient, the forward keeps what the backward needs (:mod:`mamba2_tutorial.runtime.autograd`) and the
    backward runs the cuTile backward kernels. ``_poison`` (tests only) fills every
    intermediate with NaN first, so that an element no block wrote shows up in the result.
    """
    b, l, h, p, _g, n = validate_kernel_inputs(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states,
                                               dt_limit)
    packing = validate_packing(seq_idx, cu_seqlens, return_varlen_states, b, l, x.device)
    cfg = config if config is not None else ssd_config(b, l, h, p, n, chunk_size, x.dtype, x.device)
    training = needs_grad(x, dt, A, B, C, D, z, dt_bias, initial_states)
    if packing is not None and (not packs_in_kernels(cfg) or (return_varlen_states and training)):
        tensors = dict(x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states)
        return _each_sequence(packing, tensors, return_final_states, chunk_size=chunk_size,
                              dt_softplus=dt_softplus, dt_limit=dt_limit, backend=backend, config=config,
                              _poison=_poison)
    seq_idx = None if packing is None else strided_ok(packing.seq_idx)
    where = resolve_backend(backend, x)
    x, dt, A, B, C, D, z, dt_bias, initial_states = (
        strided_ok(t) for t in (x, dt, A, B, C, D, z, dt_bias, initial_states))
    if training:   # the autograd Function; packed rows reset inside the forward's and the backward's kernels
        backward = ssd_backward_fast if seq_idx is None else functools.partial(ssd_backward_fast,
                                                                               seq_idx=seq_idx)
        opts = SSDOptions(chunk_size, dt_softplus, tuple(dt_limit), where, training_stages(cfg, seq_idx),
                          _poison, backward)
        return ssd_autograd(x, dt, A, B, C, D, z, dt_bias, initial_states, opts, return_final_states)
    # the varlen states read the true dt and entering states, which the plan resolved for training keeps
    plan = resolve(cfg, b, h, -(-l // chunk_size), x.dtype, x.device, dt_limit, training=return_varlen_states)
    dt_out, dA_cumsum, chunk_init_states, final_states, carry = run_state(plan, StateCall(
        x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, _poison, seq_idx))
    out = run_scan(plan, ScanCall(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, _poison, carry,
                                  seq_idx))
    if packing is None or not packing.return_varlen_states:
        return (out, final_states) if return_final_states else out
    states = varlen_states(packing, x, B, dt_out, dA_cumsum, chunk_init_states)
    return packed_results(out, final_states, states, return_final_states, True)


#: the tensors of ``ssd_forward`` with a position axis, (b, l, ...): cut at every sequence's bounds
_PER_POSITION = ("x", "dt", "B", "C", "z")


def _each_sequence(packing, tensors: dict, return_final_states: bool, **options):
    """A packed batch, every sequence of every row run alone through :func:`ssd_forward` (each with the
    config of its own size) and put back in place: nothing crosses a boundary, one inside a chunk included,
    and under autograd the gradients flow back through the same cuts. Sequence 0 of a row starts from the
    row's initial state, the others from zero. One set of launches per sequence: a row of many short
    sequences is bound by the host's launch time (the float64 oracle is
    :func:`~mamba2_tutorial.reference.packed.ssd_each_sequence`).

    ``tensors``: ``ssd_forward``'s tensors by name (x, dt, A, B, C; D, z, dt_bias, initial_states where
    given); ``options``: its other keyword arguments (``chunk_size`` among them) but ``return_final_states``,
    given to every sequence's call as they are."""
    initial_states = tensors.get("initial_states")
    rows, finals, varlen = [], [], []
    for row, bounds in enumerate(packing.bounds):
        pieces = []
        for start, end in bounds:
            first = int(packing.seq_idx[row, start]) == 0
            alone = {k: (v[row:row + 1, start:end] if k in _PER_POSITION and v is not None else v)
                     for k, v in tensors.items()}
            alone["initial_states"] = (initial_states[row:row + 1]
                                       if initial_states is not None and first else None)
            y_i, final_i = ssd_forward(**alone, return_final_states=True, **options)
            pieces.append(y_i)
            varlen.append(final_i[0])
        rows.append(torch.cat(pieces, dim=1))
        finals.append(final_i)
    varlen_states = torch.stack(varlen) if packing.return_varlen_states else None
    return packed_results(torch.cat(rows, dim=0), torch.cat(finals, dim=0), varlen_states,
                          return_final_states, packing.return_varlen_states)


def ssd_stages(x, dt, A, B, C, chunk_size, *, backend="gpu", config: FastConfig | None = None) -> dict:
    """The launches of ``ssd_forward`` (no D, z, dt_bias, initial states) as separately callable stages, for
    the benchmark's per-kernel breakdown.

    Returns ``{stage name: callable}`` in the order ``ssd_forward`` runs them: ``"chunk_state"`` and
    ``"state_passing"`` (Unfused), or ``"chunk_state_passing"`` (Fused and Segmented: one stage), then
    ``"chunk_scan"`` (with ChunkScan: C Bᵀ, kd if needed, then the scan). Each stage's inputs are made once,
    here, by running the stages before it, so each callable times its own launches alone. Also ``"chain"``
    (``ssd_forward`` with this config, returns y) and ``"meta"``, the keyword arguments of
    ``roofline.kernel_costs`` for these stages."""
    b, l, h, p, _g, n = validate_kernel_inputs(x, dt, A, B, C, chunk_size)
    where = resolve_backend(backend, x)
    cfg = config if config is not None else ssd_config(b, l, h, p, n, chunk_size, x.dtype, x.device)
    x, dt, A, B, C = (strided_ok(t) for t in (x, dt, A, B, C))
    plan = resolve(cfg, b, h, -(-l // chunk_size), x.dtype, x.device, _NO_LIMIT)
    stages: dict = {}
    if isinstance(plan.state, FUSED_WALKS):
        def state():
            return run_state(plan, StateCall(x, dt, A, B, chunk_size, None, False, _NO_LIMIT, None, where))
        dt_out, dA_cumsum, init, _, carry = state()
        stages["chunk_state_passing"] = state
        meta = {"state_bytes": 0, "init_state_bytes": init.element_size(), "fused": True}
    else:
        def stage1():
            return launch_chunk_state(x, dt, A, B, chunk_size, None, False, _NO_LIMIT, where,
                                      occupancy=plan.state.occupancy)
        dt_out, dA_cumsum, states = stage1()

        def stage2():
            return launch_state_passing(states, dA_cumsum, None, where, out_dtype=x.dtype)
        init, _ = stage2()
        carry = None
        stages |= {"chunk_state": stage1, "state_passing": stage2}
        meta = {"state_bytes": states.element_size(), "init_state_bytes": init.element_size()}

    def scan():
        return run_scan(plan, ScanCall(x, dt_out, dA_cumsum, C, B, init, None, None, where, False, carry))
    stages["chunk_scan"] = scan

    def chain():
        return ssd_forward(x, dt, A, B, C, chunk_size, backend=where, config=cfg)

    return stages | {"chain": chain, "meta": meta}
