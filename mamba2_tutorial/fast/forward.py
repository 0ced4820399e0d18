"""``ssd_forward``: the drop-in Mamba-2 SSD forward, running the tuned kernels chosen for the problem size.

The same arguments, semantics and return convention as mamba_ssm's ``mamba_chunk_scan_combined`` (forward),
and the same results as the taught three-launch ``ssd_forward_taught`` up to float32 rounding. It runs two
stages, each picked by the :class:`~mamba2_tutorial.fast.config.FastConfig` of the problem
(:func:`~mamba2_tutorial.fast.tuning.ssd_config`: the shipped table of the GPU, by problem class):

    dt_out, dA_cumsum, chunk_init_states, final_states[, carry] = state stage   (kernels 1 and 2)
    out                                                        = scan stage    (kernel 3)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import torch

from ..kernels._host import strided_ok
from ..kernels.chunk_scan import launch_chunk_scan
from ..kernels.chunk_state import launch_chunk_state
from ..kernels.state_passing import launch_state_passing
from ..runtime.autograd import SSDOptions, needs_grad, ssd_autograd
from ..runtime.launch import resolve_backend
from ..runtime.validation import check_not_varlen, validate_kernel_inputs
from .backward import ssd_backward_fast
from .config import ChunkScan, Decay, FastConfig, Fused, ScanStage, Segmented, SharedScan, StateStage
from .scan_chunk import launch_scan_chunk
from .scan_shared import launch_scan_shared
from .segments import launch_chunk_state_segments
from .state_fused import launch_chunk_state_passing
from .tuning import ssd_config, table_for_device, with_segments

__all__ = ["Plan", "resolve", "run_scan", "run_state", "ssd_forward", "ssd_stages", "training_stages"]

_NO_LIMIT = (0.0, float("inf"))


class Plan(NamedTuple):
    """A config resolved for one call, once (:func:`resolve`): the two stages as they run, and what follows
    from them and the call. Every stage reads its settings here; none derives them again."""

    state: StateStage       # a segmented stage's count filled in; store_kd as it runs
    scan: ScanStage
    key_log2: bool          # the scan reads the key-log2 form kd: asked for, and dt_limit keeps dt >= 0
    store_kd: bool          # the state stage stores kd in place of dt_out, so the scan computes none
    store_states: bool      # under autograd, a segmented stage's scan makes the entering states the true ones


def resolve(cfg: FastConfig, b: int, h: int, nchunks: int, device, dt_limit, *,
            training: bool = False) -> Plan:
    """``cfg`` for a problem of ``b`` batch rows, ``h`` heads and ``nchunks`` chunks on ``device``. Under
    autograd (``training``) the backward needs the true dt, its cumsum and the state entering every chunk:
    the fused state stage stores them when it does not store kd in place of dt, so kd is not stored; the
    segmented one stores segment-local states, which the scan, given the carry, turns into the true ones as
    it reads them (``store_states``)."""
    cfg = with_segments(cfg, b, h, nchunks, table_for_device(torch.device(device)))
    key_log2 = isinstance(cfg.scan, ChunkScan) and cfg.scan.decay is Decay.KEY_LOG2 and min(dt_limit) >= 0
    state = cfg.state
    store_kd = key_log2 and isinstance(state, Fused) and state.store_kd and not training
    if isinstance(state, Fused) and state.store_kd != store_kd:
        state = dataclasses.replace(state, store_kd=store_kd)
    return Plan(state, cfg.scan, key_log2, store_kd, training and isinstance(state, Segmented))


def run_state(plan: Plan, x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where,
              poison=False):
    """The plan's state stage (Unfused, Fused or Segmented): ``(dt_out (kd with store_kd), dA_cumsum,
    chunk_init_states in x's dtype, final_states float32, carry (Segmented) or None)``."""
    state, store_kd = plan.state, plan.store_kd
    if isinstance(state, Segmented):
        return launch_chunk_state_segments(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit,
                                           initial_states, where, state.segments, poison, state.tiles,
                                           state.occupancy, state.form, store_kd)
    if isinstance(state, Fused):
        return (*launch_chunk_state_passing(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit,
                                            initial_states, where, poison, state.tiles, state.occupancy,
                                            state.form, store_kd), None)
    dt_out, dA_cumsum, states = launch_chunk_state(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit,
                                                   where, poison, state.occupancy)
    init, final = launch_state_passing(states, dA_cumsum, initial_states, where, poison, out_dtype=x.dtype)
    return dt_out, dA_cumsum, init, final, None


def run_scan(plan: Plan, x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison=False,
             carry=None):
    """The plan's scan stage (PlainScan, SharedScan or ChunkScan): the output (b, l, h, p) in x's dtype.
    With the plan's ``store_states`` (and a segmented stage's ``carry``) the scan also turns
    chunk_init_states' segment-local states into the true ones, in place."""
    scan = plan.scan
    if isinstance(scan, ChunkScan):
        bf16 = scan.cb_dtype == "bfloat16" and x.dtype != torch.float32  # float32 inputs keep a float32 C Bᵀ
        cb_dtype = torch.bfloat16 if bf16 else torch.float32
        return launch_scan_chunk(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison,
                                 scan.occupancy, cb_dtype, plan.key_log2, plan.store_kd, scan.unroll, carry,
                                 plan.store_states)
    if carry is not None:
        raise ValueError(f"a segmented state stage needs ChunkScan, got {scan!r}")
    if isinstance(scan, SharedScan):
        return launch_scan_shared(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison,
                                  scan.occupancy)
    return launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, poison=poison)


def ssd_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
                cu_seqlens=None, dt_softplus=False, dt_limit=_NO_LIMIT, return_final_states=False,
                return_varlen_states=False, *, backend="auto", config: FastConfig | None = None,
                _poison=False):
    """Mamba-2 SSD forward with the tuned cuTile kernels: ``out`` or ``(out, final_states)``.

    Arguments (in their positions) and results as ``mamba_chunk_scan_combined``: x (b, l, h, p), dt (b, l, h),
    A (h,), B and C (b, l, g, n); optional D (h,) or (h, p), z (b, l, h, p), dt_bias (h,), initial_states
    (b, h, p, n). ``seq_idx``, ``cu_seqlens`` and ``return_varlen_states`` (packed sequences of different
    lengths) are not supported yet: anything but None / False raises NotImplementedError.
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
    check_not_varlen(seq_idx, cu_seqlens, return_varlen_states)
    b, l, h, p, g, n = validate_kernel_inputs(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states,
                                              dt_limit)
    where = resolve_backend(backend, x)
    cfg = config if config is not None else ssd_config(b, l, h, p, g, n, chunk_size, x.dtype, x.device)
    x, dt, A, B, C, D, z, dt_bias, initial_states = (
        strided_ok(t) for t in (x, dt, A, B, C, D, z, dt_bias, initial_states))
    if needs_grad(x, dt, A, B, C, D, z, dt_bias, initial_states):   # training: the autograd Function
        opts = SSDOptions(chunk_size, dt_softplus, tuple(dt_limit), where, training_stages(cfg), _poison,
                          ssd_backward_fast)
        return ssd_autograd(x, dt, A, B, C, D, z, dt_bias, initial_states, opts, return_final_states)
    plan = resolve(cfg, b, h, -(-l // chunk_size), x.device, dt_limit)
    dt_out, dA_cumsum, chunk_init_states, final_states, carry = run_state(
        plan, x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, _poison)
    out = run_scan(plan, x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, _poison, carry)
    return (out, final_states) if return_final_states else out


def training_stages(cfg: FastConfig):
    """The forward under autograd with ``cfg``'s stages: ``stages`` for
    :class:`~mamba2_tutorial.runtime.autograd.SSDOptions`, resolved for training (:func:`resolve`): what the
    backward reads is stored, and y is the output before the gate."""

    def stages(x, dt, A, B, C, D, dt_bias, initial_states, o: SSDOptions):
        b, l, h = x.shape[:3]
        plan = resolve(cfg, b, h, -(-l // o.chunk_size), x.device, o.dt_limit, training=True)
        dt_out, dA_cumsum, init, final, carry = run_state(plan, x, dt, A, B, o.chunk_size, dt_bias,
                                                          o.dt_softplus, o.dt_limit, initial_states,
                                                          o.backend, o.poison)
        y = run_scan(plan, x, dt_out, dA_cumsum, C, B, init, D, None, o.backend, o.poison, carry)
        return dt_out, dA_cumsum, init, final, y

    return stages


def ssd_stages(x, dt, A, B, C, chunk_size, *, backend="gpu", config: FastConfig | None = None) -> dict:
    """The launches of ``ssd_forward`` (no D, z, dt_bias, initial states) as separately callable stages, for
    the benchmark's per-kernel breakdown.

    Returns ``{stage name: callable}`` in the order ``ssd_forward`` runs them: ``"chunk_state"`` and
    ``"state_passing"`` (Unfused), or ``"chunk_state_passing"`` (Fused and Segmented: one stage), then
    ``"chunk_scan"`` (with ChunkScan: C Bᵀ, kd if needed, then the scan). Each stage's inputs are made once,
    here, by running the stages before it, so each callable times its own launches alone. Also ``"chain"``
    (``ssd_forward`` with this config, returns y) and ``"meta"``, the keyword arguments of
    ``roofline.kernel_costs`` for these stages."""
    b, l, h, p, g, n = validate_kernel_inputs(x, dt, A, B, C, chunk_size)
    where = resolve_backend(backend, x)
    cfg = config if config is not None else ssd_config(b, l, h, p, g, n, chunk_size, x.dtype, x.device)
    x, dt, A, B, C = (strided_ok(t) for t in (x, dt, A, B, C))
    plan = resolve(cfg, b, h, -(-l // chunk_size), x.device, _NO_LIMIT)
    stages: dict = {}
    if isinstance(plan.state, Fused):
        def state():
            return run_state(plan, x, dt, A, B, chunk_size, None, False, _NO_LIMIT, None, where)
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
        return run_scan(plan, x, dt_out, dA_cumsum, C, B, init, None, None, where, False, carry)
    stages["chunk_scan"] = scan

    def chain():
        return ssd_forward(x, dt, A, B, C, chunk_size, backend=where, config=cfg)

    return stages | {"chain": chain, "meta": meta}
