"""The fast forward's two stages, each run from a call (:mod:`~mamba2_tutorial.fast.plan`) and the plan:

    dt_out, dA_cumsum, chunk_init_states, final_states, carry = run_state(plan, StateCall)  (kernels 1, 2)
    out                                                      = run_scan(plan, ScanCall)     (kernel 3)

Each routes the plan's stage to its launcher, which takes the call whole with the stage config (the chunk
scan: the plan, which holds its stage and the flags derived for it). The taught launchers (Unfused,
PlainScan) keep their plain signatures and get the call's fields.
"""

from __future__ import annotations

from ..kernels.chunk_scan import launch_chunk_scan
from ..kernels.chunk_state import launch_chunk_state
from ..kernels.state_passing import launch_state_passing
from ..runtime.autograd import SSDInputs, SSDOptions
from .config import ChunkScan, FastConfig, Fused, Segmented, SharedScan
from .plan import Plan, ScanCall, StateCall, resolve
from .scan_chunk import launch_scan_chunk
from .scan_shared import launch_scan_shared
from .segments import launch_chunk_state_segments
from .state_fused import launch_chunk_state_passing

__all__ = ["packs_in_kernels", "run_scan", "run_state", "training_stages"]


def packs_in_kernels(cfg: FastConfig) -> bool:
    """Whether ``cfg``'s stages take packed rows (``seq_idx``) inside their kernels: a fused or segmented
    state stage and a whole-chunk or shared scan. The taught stages (Unfused, PlainScan) do not; with them a
    packed batch runs sequence by sequence."""
    return isinstance(cfg.state, (Fused, Segmented)) and isinstance(cfg.scan, (ChunkScan, SharedScan))


def run_state(plan: Plan, call: StateCall):
    """The plan's state stage (Unfused, Fused or Segmented): ``(dt_out (kd with store_kd), dA_cumsum,
    chunk_init_states in x's dtype, final_states float32, carry (Segmented) or None)``."""
    state = plan.state
    if call.seq_idx is not None and not isinstance(state, (Fused, Segmented)):
        raise ValueError(f"packed rows (seq_idx) need a fused or segmented state stage, got {state!r}")
    if isinstance(state, Segmented):
        return launch_chunk_state_segments(call, state)
    if isinstance(state, Fused):
        return (*launch_chunk_state_passing(call, state), None)
    c = call
    dt_out, dA_cumsum, states = launch_chunk_state(c.x, c.dt, c.A, c.B, c.chunk_size, c.dt_bias,
                                                   c.dt_softplus, c.dt_limit, c.backend, c.poison,
                                                   state.occupancy)
    init, final = launch_state_passing(states, dA_cumsum, c.initial_states, c.backend, c.poison,
                                       out_dtype=c.x.dtype)
    return dt_out, dA_cumsum, init, final, None


def run_scan(plan: Plan, call: ScanCall):
    """The plan's scan stage (PlainScan, SharedScan or ChunkScan): the output (b, l, h, p) in x's dtype.
    With the plan's ``store_states`` (and a segmented stage's ``call.carry``) the scan also turns
    chunk_init_states' segment-local states into the true ones, in place."""
    scan = plan.scan
    if call.seq_idx is not None and not isinstance(scan, (ChunkScan, SharedScan)):
        raise ValueError(f"packed rows (seq_idx) need ChunkScan or SharedScan, got {scan!r}")
    if isinstance(scan, ChunkScan):
        return launch_scan_chunk(call, plan)
    if call.carry is not None:
        raise ValueError(f"a segmented state stage needs ChunkScan, got {scan!r}")
    if isinstance(scan, SharedScan):
        return launch_scan_shared(call, scan)
    c = call
    return launch_chunk_scan(c.x, c.dt_out, c.dA_cumsum, c.C, c.B, c.chunk_init_states, c.D, c.z, c.backend,
                             poison=c.poison)


def training_stages(cfg: FastConfig, seq_idx=None):
    """The forward under autograd with ``cfg``'s stages: ``stages`` for
    :class:`~mamba2_tutorial.runtime.autograd.SSDOptions`, resolved for training (:func:`resolve`): what the
    backward reads is stored, and y is the output before the gate. ``seq_idx`` (b, l) int32: packed rows,
    reset inside the kernels (the config's stages must pack: :func:`packs_in_kernels`)."""

    def stages(inputs: SSDInputs, o: SSDOptions):
        x, dt, A, B, C, D, dt_bias, initial_states = inputs
        b, l, h = x.shape[:3]
        plan = resolve(cfg, b, h, -(-l // o.chunk_size), x.dtype, x.device, o.dt_limit, training=True)
        dt_out, dA_cumsum, init, final, carry = run_state(plan, StateCall(
            x, dt, A, B, o.chunk_size, dt_bias, o.dt_softplus, o.dt_limit, initial_states, o.backend,
            o.poison, seq_idx))
        y = run_scan(plan, ScanCall(x, dt_out, dA_cumsum, C, B, init, D, None, o.backend, o.poison, carry,
                                    seq_idx))
        return dt_out, dA_cumsum, init, final, y

    return stages
