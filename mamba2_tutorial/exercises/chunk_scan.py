"""Exercise 7: the chunk-scan kernel in cuTile (step 4 of the chunked SSD: the outputs).

The learner writes ``chunk_scan_kernel(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q, TP, TN,
HEADS_PER_GROUP)`` (the last four ``ct.Constant[int]``), launched on the grid ``(b, nchunks, h)``. Block
(bi, c, hi) computes the outputs of chunk c of head hi, for the positions s = 0 .. Q-1 of the chunk::

    y[s] = sum_{k <= s} (C_s . B_k) * exp(dA_cs[s] - dA_cs[k]) * dt_k * x_k    the dual form in the chunk
         + exp(dA_cs[s]) * C_s . state                                        the state entering the chunk

as two tile matrix products: ``P = (C Bᵀ) ∘ decay ∘ dt`` (Q × Q, zero above the diagonal) times ``x``, plus
``exp(dA_cs)[:, None] * (C @ stateᵀ)``, where ``state = chunk_init_states[bi, c, hi]`` (p × n). This is
:func:`mamba2_tutorial.reference.chunk_scan` without D and the z gate.

Shapes: x (b, l, h, p), C and B (b, l, g, n) (head hi reads group ``hi // HEADS_PER_GROUP``), dt_out and
dA_cumsum (b, h, nchunks, Q) float32, chunk_init_states (b, nchunks, h, p, n) float32; y (b, l, h, p) in x's
dtype, filled with a sentinel (-2**13) before the launch.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from ..kernels._host import next_power_of_two
from ._experiments import (
    AsIf,
    Confusion,
    Diagnosis,
    Experiment,
    Lab,
    Linearity,
    Reading,
    as_float32,
    by_head,
    chunk0_everywhere,
    close,
    counted,
    decay_index,
    decay_power,
    exchanged_axes,
    low_precision,
    misplaced,
    nan_on_cpu,
    once,
    positions,
    read_clamp,
    read_one_slice,
    replace,
    reshaped_for_transpose,
    rounded_decays,
    same_batch,
    same_chunks,
    same_for_every_head,
    scaled_up,
    shifted_chunks,
    small_integers,
    tame_decay,
)
from ._harness import (
    UNWRITTEN,
    Case,
    Probe,
    check_kernel_on_backends,
    compare,
    prefilled,
    register,
    run_kernel,
    unwritten,
)
from .state_passing import one_decay

CHECK = "check_chunk_scan_kernel"

_NUDGE = (
    "work out one output by hand for the failing case: y[s] = sum over k <= s of (C_s . B_k) * "
    "exp(dA_cs[s] - dA_cs[k]) * dt_k * x_k, plus exp(dA_cs[s]) * (C_s . state). Which term is off?"
)
_RECIPE = (
    "block (bi, c, hi), group g = hi // HEADS_PER_GROUP.\n"
    "  1. loads, all with padding_mode=ct.PaddingMode.ZERO: x as (1, Q, 1, TP) at (bi, c, hi, 0) -> (Q, TP); "
    "C and B as (1, Q, 1, TN) at (bi, c, g, 0) -> (Q, TN); the state as (1, 1, 1, TP, TN) at "
    "(bi, c, hi, 0, 0) -> (TP, TN); dt_out and dA_cumsum as (1, 1, 1, Q) at (bi, hi, c, 0) -> (Q,).\n"
    "  2. CB = ct.mma(C, ct.transpose(B), ct.zeros((Q, Q), dtype=ct.float32)).\n"
    "  3. pos = ct.arange(Q, dtype=ct.int32); causal = pos[:, None] >= pos[None, :]; "
    "decay = ct.exp(ct.minimum(dA[:, None] - dA[None, :], 0.0)); "
    "P = ct.where(causal, CB * decay * dt[None, :], 0.0).\n"
    "  4. y = ct.mma(P.astype(x.dtype), x, zeros (Q, TP) float32) + ct.mma(C, "
    "ct.transpose(state.astype(C.dtype)), zeros (Q, TP) float32) * ct.exp(dA)[:, None].\n"
    "  5. ct.store(y_array, (bi, c, hi, 0), y.astype(y_array.dtype).reshape((1, Q, 1, TP)))."
)
_PAD_HINT = (
    "loads that run past the end of an array (the ragged last chunk along l, and the p or n axis when "
    "TP > p or TN > n) need padding_mode=ct.PaddingMode.ZERO: the default padding is UNDETERMINED (NaN on "
    "the CPU executor), and a NaN in a padded row of x or B reaches every output of the chunk through "
    "the matrix products (0 * NaN is NaN). A mask of your own in place of the padding must keep exactly "
    "the positions c*Q + k < l, l = x.shape[1] (a ct.where, since 0 * NaN is NaN)."
)
_DECAY_HINT = (
    "the decay from source k to target s is exp(dA_cs[s] - dA_cs[k]), a number in (0, 1] for k <= s; "
    "above the diagonal (k > s, the future) P must be 0: ct.where(causal, ..., 0.0)."
)
_MMA_CAST = ("the mma operands take the input's dtype (P.astype(x.dtype), state.astype(C.dtype)) and "
             "accumulate into float32 tiles")
register(CHECK, "ex07", _RECIPE)

# name, b, l, h, p, g, n, Q, dtype, dt scale, A scale (p and n not powers of two: TP, TN > p, n)
_SPECS = [
    ("ragged: l=37, Q=8, g=2, p=5, n=7", 2, 37, 4, 5, 2, 7, 8, torch.float32, 1.0, 1.0),
    ("exact multiple: l=32, Q=16, g=3", 1, 32, 6, 4, 3, 8, 16, torch.float32, 1.0, 1.0),
    ("one short chunk: l=5, Q=8", 2, 5, 2, 3, 1, 6, 8, torch.float32, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 1, 24, 3, 4, 1, 5, 8, torch.float32, 20.0, 50.0),
    ("bfloat16 inputs, ragged: l=29", 2, 29, 4, 6, 2, 8, 8, torch.bfloat16, 1.0, 1.0),
]



def _cases(device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_cumsum, chunk_state, state_passing

    cases = []
    for i, (name, b, l, h, p, g, n, Q, dtype, dts, As) in enumerate(_SPECS):
        seed = 700 + i
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        C = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0) * dts
        A = -torch.exp(torch.rand(h, generator=gen)) * As
        initial = torch.randn(b, h, p, n, generator=gen)
        dt_out, dA_cs = chunk_cumsum(dt, A, Q)
        entering, _ = state_passing(chunk_state(x, B, dt_out, dA_cs), dA_cs, initial)
        inputs = {"x": x, "dt_out": dt_out, "dA_cumsum": dA_cs, "C": C, "B": B, "chunk_init_states": entering}
        cases.append(Case(name, seed, {k: v.to(device) for k, v in inputs.items()}))
    return cases


LOG2E = 1.4426950408889634

_KEYS = ("x", "dt_out", "dA_cumsum", "C", "B", "chunk_init_states")


def _run(kernel, backend: str, device: str, case: Case):
    """Launch the learner's kernel on any inputs {x, dt_out, dA_cumsum, C, B, chunk_init_states}: {y}.

    p and n are read from x and B, so chunk_init_states may be given transposed, (..., n, p)."""

    def run(inputs):
        x, dt_out, dA, C, B, S = (inputs[k].to(device) for k in _KEYS)
        b, l, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        y = prefilled((b, l, h, p), dtype=x.dtype, device=device)
        args = (x, dt_out.float(), dA.float(), C, B, S.float(), y, Q, next_power_of_two(p),
                next_power_of_two(n), h // g)
        run_kernel(CHECK, kernel, (b, nc, h), args, case, _NUDGE, backend)
        return {"y": y}

    return run


def _reference(inputs):
    from mamba2_tutorial.reference import chunk_scan

    return {"y": chunk_scan(*(inputs[k].double().cpu() for k in _KEYS))}


def _read_state_rows(hint: str):
    """With x = 0 (the state term alone): y right at some positions of every chunk and 0 at the others, so
    the state term reaches only those rows (a mask, or a single row, where every position reads the state)."""

    def read(lab, inputs, got):
        y, want = got["y"].double(), lab.reference(inputs)["y"].double()
        if not bool(torch.isfinite(y).all()):
            return None
        l, Q = y.shape[1], inputs["dt_out"].shape[-1]
        q = torch.arange(l) % Q                               # each position's place in its chunk
        scale = 1e-5 * max(1.0, float(want.abs().max()))
        right = torch.isclose(y, want, rtol=1e-4, atol=scale).movedim(1, 0).flatten(1).all(1)   # (l,)
        zero = (y.abs() <= scale).movedim(1, 0).flatten(1).all(1) & ~right
        if not bool(right.any()) or not bool(zero.any()) or not bool((right | zero).all()):
            return None
        kept = sorted({int(v) for v in q[right]} - {int(v) for v in q[zero]})
        gone = sorted({int(v) for v in q[zero]})
        if not kept or set(kept) & set(gone):
            return None                      # not the same rows in every chunk
        said = ", ".join(map(str, kept[:6])) + (", ..." if len(kept) > 6 else "")
        return (f"With x = 0 (the state term alone), your y is right at position(s) {said} of every "
                f"chunk and 0 at the others: the state term reaches only those rows. Every position s of "
                f"the chunk reads the entering state, decayed by exp(dA_cs[s]); P @ x carries only the "
                f"chunk's own inputs, not the state.\n      {hint}", None)

    return read


def _dt_into_C(b):
    """C scaled row by row by its position's dt, and dt = 1: the answer of a kernel that folds dt into C."""
    x, dt = b["x"], b["dt_out"]
    l, h = x.shape[1], x.shape[2]
    group = torch.arange(h) // (h // b["C"].shape[2])                # head -> its group
    C, B = b["C"][:, :, group], b["B"][:, :, group]                   # one group per head: (b, l, h, n)
    per_pos = dt.flatten(2)[:, :, :l].transpose(1, 2)                # (b, l, h)
    C = (C.double() * per_pos[..., None].double()).to(C.dtype)
    return replace(b, C=C, B=B.clone(), dt_out=torch.ones_like(dt))


def _no_state(b):
    return replace(b, chunk_init_states=torch.zeros_like(b["chunk_init_states"]))


def _no_input(b):
    return replace(b, x=torch.zeros_like(b["x"]))


def _transposed_state(b):
    """The entering state stored transposed, (..., n, p): None unless the tiles are square."""
    S = b["chunk_init_states"]
    if next_power_of_two(S.shape[-1]) != next_power_of_two(S.shape[-2]):
        return None
    return replace(b, chunk_init_states=S.transpose(-1, -2).contiguous())


def _first_position_only(b):
    """x zero except at each chunk's first position: no output may see a later position."""
    x = torch.zeros_like(b["x"])
    Q = b["dt_out"].shape[-1]
    x[:, ::Q] = b["x"][:, ::Q]
    return replace(b, x=x)


def _last_position_only(b):
    """x zero except at each chunk's last position (a control: a kernel whose later positions leak into
    earlier outputs is wrong here)."""
    x = torch.zeros_like(b["x"])
    Q, l = b["dt_out"].shape[-1], b["x"].shape[1]
    x[:, Q - 1::Q] = b["x"][:, Q - 1::Q]
    if l % Q:
        x[:, l - 1] = b["x"][:, l - 1]
    return replace(b, x=x)


def _future_leak(experiment):
    """``experiment`` (right with x only at each chunk's first position), reported only where a later
    position does reach an earlier output: with x only at each chunk's last position (and no entering state)
    the right y is 0 before it, and the kernel's is not. A kernel that gets the later keys wrong some other
    way (their decay, say) is right on the first positions too, but leaks nothing."""

    def run(lab, base):
        found = experiment(lab, base)
        if found is None:
            return None
        changed = _last_position_only(_no_state(base))
        got = lab.run(changed)
        if got is None:
            return None
        y = got["y"].double()
        Q, l = base["dt_out"].shape[-1], y.shape[1]
        pos = torch.arange(l)
        before = (pos % Q != Q - 1) & (pos != l - 1)              # the positions before each chunk's last
        leaked = y[:, before].abs().amax() > max(lab.atol, 1e-6)
        return found if bool(leaked) else None

    return run


def _read_last_sources(lab, inputs, got):
    """With the entering state 0 and x only at each chunk's last position (``_last_position_only``): the
    right output is 0 everywhere but at those positions. A kernel whose output is 0 there too, and right
    elsewhere, never lets the chunk's last source positions reach y: they are left out, not leaking."""
    y, want = got["y"].double(), lab.reference(inputs)["y"].double()
    if not bool(torch.isfinite(y).all()):
        return None
    scale = 1e-5 * max(1.0, float(want.abs().max()))
    hit = want.abs().movedim(1, 0).flatten(1).amax(1) > scale              # (l,): positions the answer holds
    if not bool(hit.any()):
        return None
    silent = (y.abs() <= scale).movedim(1, 0).flatten(1).all(1)
    rest_right = torch.isclose(y, want, rtol=1e-4, atol=scale).movedim(1, 0).flatten(1).all(1)
    # the same values at each chunk's FIRST position instead: a kernel missing only the later sources is right
    # there (a missing diagonal is not)
    Q, x = inputs["dt_out"].shape[-1], inputs["x"]
    moved = torch.zeros_like(x)
    firsts, lasts = x[:, ::Q], x[:, Q - 1::Q]
    moved[:, ::Q][:, :lasts.shape[1]] = lasts
    if lasts.shape[1] < firsts.shape[1]:                     # a ragged last chunk: its last position is l - 1
        moved[:, (firsts.shape[1] - 1) * Q] = x[:, -1]
    if not lab.right(replace(inputs, x=moved)):
        return None
    if bool((silent[hit]).all()) and bool(rest_right[~hit].all()):
        return ("With the entering state = 0 and x only at each chunk's last position, your output is 0 "
                "everywhere, where the answer holds that position's own term: your kernel leaves out the "
                "chunk's last source positions k (a loop over blocks of sources whose last block is never "
                "added: it stops early, or y is stored inside the loop before the last block's P @ x is "
                "added).\n      y = P @ x sums over every "
                "source k <= s of the chunk: the whole (Q, Q) P at once, or every block of sources added "
                "before the one store.", None)
    return None


def _read_cut(lab, inputs, got):
    """y right at the positions before some t < l and exactly 0 from t on (t not a chunk boundary a chunk
    index explains): a mask or a bound cuts the sequence at t, and t is named when it is one of the case's
    other sizes (a length read from the wrong axis)."""
    g, w = got["y"].double(), lab.reference(inputs)["y"]
    l = g.shape[1]
    wrong = ~torch.isclose(g, w, rtol=lab.rtol, atol=lab.atol * max(1.0, float(w.abs().max())))
    rows = wrong.transpose(0, 1).reshape(l, -1).any(1)
    if not bool(rows.any()):
        return None
    t = int(rows.nonzero()[0])
    if t == 0 or t == l - 1 or not bool((g[:, t:] == 0).all()) or not bool((w[:, t:] != 0).any()):
        return None  # (only the last position: read_one_slice says so)
    x, B, dt_out = inputs["x"], inputs["B"], inputs["dt_out"]
    sizes = {"b (x.shape[0])": x.shape[0], "h (x.shape[2])": x.shape[2], "p (x.shape[3])": x.shape[3],
             "g (B.shape[2])": B.shape[2], "n (B.shape[3])": B.shape[3], "Q": dt_out.shape[3],
             "nchunks (dt_out.shape[2])": dt_out.shape[2]}
    same = [k for k, v in sizes.items() if v == t]
    also = f" ({t} is {' and '.join(same)}: a length read from another axis?)" if same else ""
    return (f"Your y is right at positions 0..{t - 1} of the sequence and 0 from position {t} on, where the "
            f"sequence has l = {l} positions: a mask or a bound cuts it at {t}{also}.\n      The positions "
            f"inside the sequence are c*Q + s < l with l = x.shape[1]; y needs no mask of its own (the "
            f"loads' zero padding and the store's bounds take care of the ragged end).", None)


_LAYOUT_HINT = ("x is (b, l, h, p), C and B are (b, l, g, n), chunk_init_states is (b, nchunks, h, p, n): "
                "a chunk is tile (bi, c, hi, 0) of x, (bi, c, hi // HEADS_PER_GROUP, 0) of C and B, and "
                "(bi, c, hi, 0, 0) of the states; the index and the tile shape list one entry per axis, in "
                "the array's order.")
_TRANSPOSE_HINT = ("to turn a (Q, TN) tile into (TN, Q) use ct.transpose(t); t.reshape((TN, Q)) keeps the "
                   "elements in memory order and mixes positions with columns. C Bᵀ is ct.mma(C, "
                   "ct.transpose(B), acc).")


def _parity(b, same: bool):
    """C and B with C_s . B_k = 0 whenever s - k is even (``same``: ... whenever s - k is odd): C_s and B_k
    use unit vectors chosen by the parity of the position."""
    C, B = torch.zeros_like(b["C"]), torch.zeros_like(b["B"])
    if C.shape[-1] < 2:
        return None
    l = C.shape[1]
    even = torch.arange(l) % 2 == 0
    C[:, even, :, 0], C[:, ~even, :, 1] = 1.0, 1.0
    if same:
        B[:, even, :, 0], B[:, ~even, :, 1] = 1.0, 1.0
    else:
        B[:, even, :, 1], B[:, ~even, :, 0] = 1.0, 1.0
    return replace(b, C=C, B=B)


def _only_diagonal(b):
    """Every position forgets all before it (a step of -60 in dA_cumsum per position): P is its diagonal."""
    Q = b["dt_out"].shape[-1]
    dA = (-60.0 * torch.arange(1, Q + 1, dtype=torch.float32)).expand_as(b["dA_cumsum"]).clone()
    return _no_state(replace(b, dA_cumsum=dA))


def _unit_CB(b):
    """C = B = the same unit vector at every position: C_s . B_k = 1 for every s and k."""
    C = torch.zeros_like(b["C"])
    C[..., 0] = 1.0
    return replace(b, C=C, B=C.clone())


def _one_source(b):
    """The state term and C Bᵀ, the decay and dt out of the way (state 0, C_s . B_k = 1, dA_cumsum = 0,
    dt = 1) and x = 1 at position Q // 2 of chunk 0 only: then P is 1 on and below the diagonal, and the
    right y is 1 at positions Q // 2 .. Q-1 of chunk 0 and 0 elsewhere."""
    Q = b["dt_out"].shape[-1]
    x = torch.zeros_like(b["x"])
    x[:, Q // 2] = 1.0
    return _unit_CB(replace(_no_state(b), x=x, dA_cumsum=torch.zeros_like(b["dA_cumsum"]),
                            dt_out=torch.ones_like(b["dt_out"])))


def _read_one_source(lab, inputs, got):
    """Where and how strongly the one nonzero input reaches the outputs (see :func:`_one_source`)."""
    Q = inputs["dt_out"].shape[-1]
    y = got["y"].double()
    if not bool(torch.isfinite(y).all()) or y.shape[1] < Q:
        return None
    first = y[:, :Q]  # chunk 0: (b, Q, h, p)
    if bool((y[:, Q:].abs() > 1e-6).any()):
        return None
    per_pos = first[0, :, 0, 0]
    if not bool(torch.isclose(first, per_pos[None, :, None, None].expand_as(first), atol=1e-5).all()):
        return None  # not the same for every batch entry, head and element: not a matter of P alone
    k0 = Q // 2
    pos = torch.arange(Q)
    held = per_pos.abs() > 1e-6
    where = (f"With the entering state = 0, C_s . B_k = 1, no decay, dt = 1 (so that P is 1 on and below "
             f"the diagonal) and x = 1 at position {k0} of chunk 0 only, your output is nonzero at positions "
             f"{positions(held)}")
    if bool((held == (pos <= k0)).all()):
        return (f"{where}, where it should be at {k0}..{Q - 1}: your output at s takes the inputs AFTER s, "
                f"so your P is transposed (Pᵀ @ x) or its mask keeps k >= s.\n      P[s, k] is the weight "
                f"of source k in target s, 0 above the diagonal: y = ct.mma(P, x, acc) with causal = "
                f"pos[:, None] >= pos[None, :].", None)
    tail = per_pos[k0:]
    if bool((held == (pos >= k0)).all()) and not bool(torch.isclose(tail, torch.ones_like(tail),
                                                                    atol=1e-4).all()):
        if bool(torch.isclose(tail, tail[:1].expand_as(tail), rtol=1e-4).all()):
            return (f"{where}, as it should, but with the value {float(tail[0]):.4g} where it is 1: every "
                    f"entry of your P is scaled by that factor, so one of P's factors is not 1 where "
                    f"C_s . B_k = 1, the decay is exp(0) = 1 and dt = 1.\n      P[s, k] = (C_s . B_k) * "
                    f"exp(dA_cs[s] - dA_cs[k]) * dt_k, nothing more.", None)
        values = ", ".join(f"{float(v):.3g}" for v in tail[:4])
        rest = tail[1:]
        if len(rest) > 0 and bool(torch.isclose(rest, torch.ones_like(rest), atol=1e-4).all()):
            return (f"{where}, as it should, but the value at position {k0} itself is "
                    f"{float(tail[0]):.4g} where it is 1, and the later positions are right: only P's "
                    f"diagonal entry P[s, s] is off. The term for the current position, computed apart from "
                    f"the others, is not C_s . B_s * dt_s (a sum over a row, or another product, in its "
                    f"place).\n      P[s, s] = (C_s . B_s) * dt_s like every other entry: one masked product "
                    f"with the diagonal kept, pos[:, None] >= pos[None, :], needs no term of its own.", None)
        e = math.e
        if len(rest) > 0 and bool(torch.isclose(rest, torch.full_like(rest, e), rtol=1e-4).all()):
            more = ", ..." if Q - k0 > 4 else ""
            return (f"{where}, as it should, but with the values {values}{more}: e = exp(1) below the "
                    f"diagonal, where the decay is exp(0) = 1: your kernel takes the exp of a decay that "
                    f"already is exp(dA_cs[s] - dA_cs[k]) (exp applied twice).\n      P[s, k] = (C_s . B_k) "
                    f"* exp(dA_cs[s] - dA_cs[k]) * dt_k: one exp.", None)
        return (f"{where}, as it should, but with the values {values}{', ...' if Q - k0 > 4 else ''} where "
                f"they are all 1: something rescales P's entries (a normalization of its rows, a softmax?)."
                f"\n      P[s, k] = (C_s . B_k) * exp(dA_cs[s] - dA_cs[k]) * dt_k, nothing more: unlike "
                f"attention, the SSD does not normalize its weights.", None)
    return None


#: dt at every position in :func:`_state_decay_probe`
STATE_PROBE_DT = 1.5


def _state_probe_dA(Q: int) -> torch.Tensor:
    """dA_cumsum of one chunk in :func:`_state_decay_probe`: the running sum of steps -0.1, -0.2, -0.3,
    -0.1, ... (uneven, so that a decay from the wrong position cannot pass for another)."""
    steps = 0.1 + 0.1 * (torch.arange(Q, dtype=torch.float64) % 3)
    return -torch.cumsum(steps, 0)


def _state_decay_probe(b):
    """The state term alone, built so that C_s . state_p = 1 for every position s and element p (x = 0, C a
    unit vector, the entering state 1 in column 0), in float32: the right y at position s is then the decay
    the state has reached there, exp(dA_cs[s]), the same for every p. dt = 1.5 (the state term has none)."""
    C = torch.zeros(b["C"].shape)
    C[..., 0] = 1.0
    S = torch.zeros_like(b["chunk_init_states"])
    S[..., 0] = 1.0
    dA = b["dA_cumsum"]
    row = _state_probe_dA(dA.shape[-1]).to(dA.dtype)
    B = torch.randn(b["B"].shape, generator=torch.Generator().manual_seed(76))
    return replace(b, x=torch.zeros(b["x"].shape), C=C, B=B, chunk_init_states=S,
                   dA_cumsum=row.expand_as(dA).clone(), dt_out=torch.full_like(b["dt_out"], STATE_PROBE_DT))


def _read_state_decay(lab, inputs, got):
    """Which function of dA_cumsum the state term applies at each position (:func:`_state_decay_probe`)."""
    Q = inputs["dt_out"].shape[-1]
    y = got["y"].double()
    if y.shape[1] < Q or not bool(torch.isfinite(y).all()):
        return None
    tile = y[0, :Q, 0, :]  # chunk 0 of batch entry 0, head 0: (Q, p)
    v = _state_probe_dA(Q)
    said = (f"With x = 0, C_s . state_p = 1 for every position s and element p, and dA_cumsum = "
            f"{v[0]:.1f}, {v[1]:.1f}, {v[2]:.1f}, ... at positions 0, 1, 2, ... (so that y[s] is the decay "
            f"the entering state has reached at s, exp(dA_cs[s])), your y")
    hint = ("the state entering the chunk has decayed by exp(dA_cs[s]) at position s (the decay from the "
            "chunk's start to s, position s's own step included): y += ct.exp(dA_cs)[:, None] * "
            "(C @ stateᵀ), one factor per ROW s.")
    p = tile.shape[1]

    def near(a, b):
        return bool(torch.isclose(a, b.expand_as(a), rtol=2e-3, atol=1e-6).all())

    if p > 1 and near(tile, tile[:, :1]):
        f = tile[:, 0]
        forms = [
            (torch.ones(Q, dtype=torch.float64), "1 at every position: the state term is not decayed"),
            (-torch.exp(v), "-exp(dA_cs[s]): the state term is subtracted"),
            (2 * torch.exp(v), "2 exp(dA_cs[s]): the state term is added twice (a line repeated?)"),
            (1 + torch.exp(v), "1 + exp(dA_cs[s]): the state term is added twice, once undecayed (as the "
             "mma's accumulator, say)"),
            (torch.exp(v - v[-1]), "exp(dA_cs[s] - dA_cs[Q-1]): the decay measured against the chunk's end, "
             "where the state term needs it from the chunk's start"),
            (torch.full((Q,), math.exp(STATE_PROBE_DT), dtype=torch.float64), f"exp(dt) (dt = "
             f"{STATE_PROBE_DT:g} here): dt where dA_cs belongs"),
            (torch.exp(-v), "exp(-dA_cs[s]): the exponent's sign is flipped"),
            (torch.exp2(v), "2**dA_cs[s]: ct.exp2 takes the place of ct.exp"),
            (torch.exp(v * LOG2E), "exp(dA_cs[s] * log2(e)): the exponent scaled by log2(e) = 1.4427 for "
             "ct.exp2, but taken with ct.exp (exp(v) = 2**(v * log2(e)): the scale goes with ct.exp2 only)"),
            (torch.exp(v / LOG2E), "exp(dA_cs[s] / log2(e)): the exponent divided by log2(e), where ct.exp "
             "takes it as it is"),
            (v, "dA_cs[s] itself: the exp is missing"),
            (torch.exp(v[-1:]).expand(Q), "exp(dA_cs[Q-1]) at every position: the decay across the whole "
             "chunk, where position s has decayed only by exp(dA_cs[s])"),
            (torch.exp(v[:1]).expand(Q), "exp(dA_cs[0]) at every position: the first position's decay for "
             "all"),
            (torch.exp(v[-1] - v), "exp(dA_cs[Q-1] - dA_cs[s]): the decay from s to the chunk's END (the "
             "chunk state's weight), where the state term needs the decay from the chunk's start to s"),
            (torch.exp(v - v[0]), "exp(dA_cs[s] - dA_cs[0]): the decay from position 0, which leaves out "
             "position 0's own step (dA_cs[s] already counts from the chunk's start)"),
            (STATE_PROBE_DT * torch.exp(v), f"dt_s * exp(dA_cs[s]) (dt = {STATE_PROBE_DT:g} here): dt "
             f"multiplies the state term, which has none (the entering state already holds every dt)"),
            (torch.exp(torch.cat([v.new_zeros(1), v[:-1]])), "exp(dA_cs[s-1]): the decay of the position "
             "before, one off"),
            (torch.exp(torch.cat([v[1:], v[-1:]])), "exp(dA_cs[s+1]): the decay of the position after, one "
             "off"),
        ]
        for want, meaning in forms:
            if near(f, want):
                return f"{said} is {meaning}.\n      {hint}", None
        ratio = f / torch.exp(v)
        once_ = torch.isclose(ratio, torch.ones_like(ratio), rtol=2e-3)
        twice = torch.isclose(ratio, torch.full_like(ratio, 2.0), rtol=2e-3)
        if bool(once_.any()) and bool(twice.any()) and bool((once_ | twice).all()):
            return (f"{said} is exp(dA_cs[s]) at positions {positions(once_)} and twice that at positions "
                    f"{positions(twice)}: those rows get the state term twice (added inside a loop over "
                    f"key blocks, say, where it belongs once per row, outside that loop).\n      {hint}",
                    None)
        return None
    if 1 < p <= Q and near(tile, tile[:1, :]) and near(tile[0], torch.exp(v[:p])):
        return (f"{said} changes along p, not along s: at element p it is exp(dA_cs[p]), so the decay "
                f"scales the columns (exp(dA_cs)[None, :]) where it belongs to the rows.\n      {hint} "
                f"(Scaling the columns compiles only when Q == TP, as in this case.)", None)
    return None


def _read_row_scale(lab, inputs, got):
    """With the entering state = 0: every row s of y (a target position) scaled by exp(dA_cs[s]), the state
    term's decay, where P @ x has its own decay inside P."""
    want = lab.reference(inputs)["y"].double()
    y = got["y"].double()
    if not bool(torch.isfinite(y).all()) or close(y, want, lab.rtol, lab.atol):
        return None
    b, l, h, _ = y.shape
    dA = inputs["dA_cumsum"].double().flatten(2)[:, :, :l].transpose(1, 2)  # (b, l, h): dA_cs per position
    decay = torch.exp(dA)[..., None]
    if close(y, want * (1 + decay), lab.rtol, lab.atol):
        return ("With the entering state = 0, your output is the right one with every row s (target "
                "position) multiplied by 1 + exp(dA_cs[s]): P @ x is added twice, once more through the "
                "state term (its mma started from P @ x's tile: ct.mma(C, stateᵀ, acc) returns acc + "
                "C @ stateᵀ, so acc comes back scaled by the decay with it).\n      Start the state term's "
                "mma from "
                "ct.zeros((Q, TP), dtype=ct.float32), then y = P @ x + exp(dA_cs)[:, None] * (C @ stateᵀ).",
                None)
    if float((decay - 1).abs().max()) < 1e-3 or not close(y, want * decay, lab.rtol, lab.atol):
        return None
    return ("With the entering state = 0, your output is the right one with every row s (target position) "
            "multiplied by exp(dA_cs[s]): the state term's decay also multiplies P @ x, e.g. (P @ x + "
            "past) * exp(dA_cs)[:, None] where only past belongs inside.\n      y = P @ x + "
            "exp(dA_cs)[:, None] * (C @ stateᵀ): P carries its own decay exp(dA_cs[s] - dA_cs[k]), so the "
            "chunk-start decay multiplies the state term alone.", None)


def _read_output_factor(lab, inputs, got):
    """The whole output, both terms, scaled row by row (target position s) by an input of that position:
    dt_s or a power of it, or exp(dA_cs[s]) (a factor applied to y after the two terms are added)."""
    want = lab.reference(inputs)["y"].double()
    y = got["y"].double()
    if not bool(torch.isfinite(y).all()) or close(y, want, lab.rtol, lab.atol):
        return None
    b, l, h, _ = y.shape
    per_position = {k: inputs[k].double().flatten(2)[:, :, :l].transpose(1, 2)[..., None]  # (b, l, h, 1)
                    for k in ("dt_out", "dA_cumsum")}
    dt, dA = per_position["dt_out"], per_position["dA_cumsum"]
    factors = ((dt, "dt_s"), (dt * dt, "dt_s²"), (1 / dt, "1 / dt_s"), (torch.exp(dA), "exp(dA_cs[s])"))
    for factor, said in factors:
        if float((factor - 1).abs().max()) > 1e-3 and close(y, want * factor, lab.rtol, lab.atol):
            return (f"Your output is the right one with every row s (target position) multiplied by {said}, "
                    f"the state term and P @ x alike: a factor of position s applied to y after the two "
                    f"terms are added (or to both).\n      y = P @ x + exp(dA_cs)[:, None] * (C @ stateᵀ), "
                    f"nothing applied after: dt_k belongs to the SOURCE positions, inside P (P = CB * decay "
                    f"* dt[None, :]), and exp(dA_cs[s]) to the state term alone.", None)
    return None


def _intra_only(inputs, decay) -> torch.Tensor:
    """y = P @ x without the state term, float64, with P[s, k] = (C_s . B_k) · decay[s, k] · dt_k for k <= s;
    ``decay(a)``: a (b, h, nchunks, Q) dA_cumsum -> (b, h, nchunks, Q, Q) [s, k]."""
    x, dt, a = (inputs[k].double().cpu() for k in ("x", "dt_out", "dA_cumsum"))
    C, B = inputs["C"].double().cpu(), inputs["B"].double().cpu()
    b, l, h, p = x.shape
    g = C.shape[2]
    nc, Q = a.shape[2], a.shape[3]

    def chunks(t):
        return torch.nn.functional.pad(t, (0, 0, 0, 0, 0, nc * Q - l)).view(b, nc, Q, t.shape[2], t.shape[3])

    CB = torch.einsum("bcsgn,bckgn->bcgsk", chunks(C), chunks(B)).repeat_interleave(h // g, dim=2)
    P = CB * decay(a).transpose(1, 2) * dt.transpose(1, 2)[..., None, :] * torch.ones(Q, Q).tril()
    return torch.einsum("bchsk,bckhp->bcshp", P, chunks(x)).reshape(b, nc * Q, h, p)[:, :l]


def _read_intra_decay(lab, inputs, got):
    """With the entering state = 0: P @ x with another decay than exp(dA_cs[s] - dA_cs[k])."""
    y = got["y"].double().cpu()
    if not bool(torch.isfinite(y).all()):
        return None
    forms = [
        (lambda a: torch.exp(a[..., -1:, None] - a[..., None, :]).expand(*a.shape, a.shape[-1]),
         "exp(dA_cs[Q-1] - dA_cs[k]), the decay from k to the chunk's END (the chunk state's weight, or a "
         "row maximum subtracted as in a softmax: over all k, the largest dA_cs[s] - dA_cs[k] is dA_cs[s] - "
         "dA_cs[Q-1]), the same in every row s"),
        (lambda a: torch.exp(a[..., :, None] + a[..., None, :]),
         "exp(dA_cs[s] + dA_cs[k]): a + where the decay from k to s has a -, exp(dA_cs[s] - dA_cs[k])"),
        (lambda a: torch.exp(-a[..., None, :]).expand(*a.shape, a.shape[-1]),
         "exp(-dA_cs[k]): the target's dA_cs[s] is missing from the exponent"),
        (lambda a: torch.exp(a[..., :, None]).expand(*a.shape, a.shape[-1]),
         "exp(dA_cs[s]): the decay from the chunk's start to s (the state term's), the source's dA_cs[k] "
         "missing"),
    ]
    for decay, said in forms:
        if close(y, _intra_only(inputs, decay), lab.rtol, lab.atol):
            return (f"With the entering state = 0, your output is P @ x with the decay {said}.\n      "
                    f"{_DECAY_HINT}", None)
    return None


def _p_matrix(lab, base):
    """P as the kernel builds it, read column by column: with no entering state, no decay, dt = 1, float32
    inputs and x = e_j at position k = r*p + j of every chunk (zero elsewhere), y = P @ x holds P's columns
    r*p .. r*p + p - 1; ceil(Q / p) runs read all of chunk 0's P (batch entry 0, head 0). Then which
    matrix it is (None when none of the ways P goes wrong)."""
    Q, x = base["dt_out"].shape[-1], base["x"]
    l, p = x.shape[1], x.shape[-1]
    if l < Q:
        return None
    inputs = replace(_no_state(base), C=base["C"].float(), B=base["B"].float(),
                     dA_cumsum=torch.zeros_like(base["dA_cumsum"]), dt_out=torch.ones_like(base["dt_out"]))
    P = torch.zeros(Q, Q, dtype=torch.float64)
    for first in range(0, Q, p):
        unit = torch.zeros(x.shape)
        for start in range(0, l, Q):
            for k in range(first, min(first + p, Q, l - start)):
                unit[:, start + k, :, k - first] = 1.0
        got = lab.run(replace(inputs, x=unit))
        if got is None or not bool(torch.isfinite(got["y"]).all()):
            return None
        cols = min(p, Q - first)
        P[:, first:first + cols] = got["y"][0, :Q, 0, :cols].double()
    C, B = inputs["C"][0, :Q, 0].double(), inputs["B"][0, :Q, 0].double()
    CB = C @ B.T
    s, k = torch.arange(Q)[:, None], torch.arange(Q)[None, :]
    low = (k <= s).double()
    if close(P, CB * low, 1e-3, 1e-4):
        return None
    said = ("With no entering state, no decay, dt = 1 and x a unit vector at one position at a time (so that "
            "y = P @ x reads P column by column), your P is")
    forms = [
        (CB.T * low, "B_s . C_k under the mask: C and B exchanged (B Cᵀ)"),
        (C @ C.T * low, "C_s . C_k under the mask: C in B's place"),
        (B @ B.T * low, "B_s . B_k under the mask: B in C's place"),
        (CB * (k < s).double(), "C_s . B_k for k < s only: the mask leaves out the diagonal k = s"),
        (CB * low + torch.diag(torch.diag(CB)), "C_s . B_k under the mask, with the diagonal k = s counted "
         "twice: a term for the current position added to P @ x, which already holds it"),
        (CB * (k >= s).double(), "C_s . B_k for k >= s: the mask keeps the future and drops the past"),
        (CB * (k > s).double(), "C_s . B_k for k > s only, 0 for k <= s: the mask is inverted, it keeps the "
         "future and drops the past and the diagonal (ct.where's two branches swapped, or its comparison "
         "flipped)"),
        (CB * (k <= s + 1).double(), "C_s . B_k for k <= s + 1: the mask keeps one future position"),
        (CB, "C_s . B_k for every k: no causal mask"),
        (CB.clamp(min=0) * low, "C_s . B_k where it is positive and 0 where it is negative: a clamp (or "
         "ReLU) on C Bᵀ"),
        (CB * low / C.shape[-1] ** 0.5, "C_s . B_k / sqrt(n): a scale as in attention"),
        (CB * (k == s).double(), "C_s . B_k on the diagonal k = s only, 0 below it: the mask compares with "
         "== where >= belongs (pos[:, None] >= pos[None, :] keeps every k <= s)"),
        ((C * B).sum(-1)[:, None] * low, "C_s . B_s for every k <= s, each row's own product: C and B are "
         "multiplied at the same position and summed over n (a per-position dot product, broadcast along k), "
         "where P pairs every target s with every source k"),
        ((C * B).sum(-1)[None, :] * low, "C_k . B_k for every s >= k, each column's own product: C and B are "
         "multiplied at the same position and summed over n (a per-position dot product, broadcast along s), "
         "where P pairs every target s with every source k"),
        (torch.diag((CB * low).sum(0)), "0 off the diagonal, with the column sums sum_s P[s, k] on it: your "
         "product sums P[s, k] x_k over the TARGETS s (axis 0 of P), which gives one row per source k, "
         "where y[s] sums over the sources k (axis 1 of P): ct.sum(..., axis=1), or simply ct.mma(P, x)"),
    ]
    if next_power_of_two(C.shape[-1]) == Q:  # Cᵀ B compiles on (Q, TN) tiles when TN == Q
        pad = Q - C.shape[-1]
        CtB = torch.nn.functional.pad(C, (0, pad)).T @ torch.nn.functional.pad(B, (0, pad))
        forms.append((CtB * low, "(Cᵀ B)[s, k] under the mask: the product sums over the positions, not "
                      "over n (ct.mma(ct.transpose(C), B) where ct.mma(C, ct.transpose(B)) belongs)"))
    hint = ("P[s, k] = (C_s . B_k) * exp(dA_cs[s] - dA_cs[k]) * dt_k for k <= s and 0 above the diagonal: "
            "CB = ct.mma(C, ct.transpose(B), acc), a (Q, Q) tile, masked with ct.where(pos[:, None] >= "
            "pos[None, :], ..., 0.0).")
    for want, meaning in forms:
        if not close(want, CB * low) and close(P, want, 1e-3, 1e-4):
            return f"{said} {meaning}.\n      {hint}", None
    if float(P.abs().max()) < 1e-6:
        return (f"{said} 0 everywhere: P @ x never reaches y, so y holds the state term alone. The "
                f"intra-chunk term is left out (a `y = ...` that replaced `y = y + ...`), or every entry of "
                f"P is 0 (a decay clamped to 0, ct.minimum(ct.exp(v), 0.0) where ct.exp(ct.minimum(v, 0.0)) "
                f"belongs).\n      y = P @ x + exp(dA_cs)[:, None] * (C @ stateᵀ), both terms.", None)
    T = Q // 2
    while T >= 2:  # only the last T keys (source columns) reach y: an accumulator restarted per key block
        if close(P, CB * low * (k >= Q - T).double(), 1e-3, 1e-4):
            return (f"{said} right in its last {T} columns (sources k = {Q - T}..{Q - 1}) and 0 in the "
                    f"others: only the last block of {T} keys reaches y, so the accumulator over the key "
                    f"blocks starts again (set to zeros) inside the loop over them.\n      Start the "
                    f"accumulator once, before the loop over key blocks, and add every block's P @ x into "
                    f"it.", None)
        T //= 2
    tol = 1e-3 * max(1.0, float(CB.abs().max()))
    wrong = (P - CB * low).abs() > tol
    parts = [f"{int(wrong[m].sum())} of {int(m.sum())} entries {name}"
             for m, name in ((k < s, "below the diagonal"), (k == s, "on the diagonal"),
                             (k > s, "above the diagonal (where P is 0)")) if bool(wrong[m].any())]
    return (f"{said} wrong at {', '.join(parts)}; the right P there is (C_s . B_k) for k <= s and 0 above.\n"
            f"      {hint}", None)


def _first_state_zero(b):
    """chunk_init_states with chunk 0's entering state zero (None when it already is)."""
    S = b["chunk_init_states"]
    if not bool(S[:, 0].abs().max() > 0):
        return None
    out = S.clone()
    out[:, 0] = 0.0
    return replace(b, chunk_init_states=out)


def _same_chunks_state(b):
    """The entering state the same in every chunk (each a copy of chunk 0's; None with one chunk)."""
    S = b["chunk_init_states"]
    if S.shape[1] < 2:
        return None
    return replace(b, chunk_init_states=S[:, :1].expand_as(S).clone())


def _exact(b):
    """x, C, B and a nonzero state small integers, dt in {0.5, 1}, no decay: every product and sum exact in
    bfloat16."""
    S = b["chunk_init_states"]
    return replace(b, x=small_integers(b["x"], 71), C=small_integers(b["C"], 72),
                   B=small_integers(b["B"], 73),
                   chunk_init_states=small_integers(S, 74) if bool(S.any()) else S,
                   dt_out=small_integers(b["dt_out"], 75, 1, 2) / 2,
                   dA_cumsum=torch.zeros_like(b["dA_cumsum"]))


def _same_chunks(b, keys):
    """The inputs ``keys`` (along l) with every chunk a copy of chunk 0's (None with one chunk)."""
    return same_chunks(b, keys, b["dt_out"].shape[-1])


def _read_nonfinite(lab, inputs, got):
    """With x = 0 and no entering state, outputs that are not finite (see the steps)."""
    if bool(torch.isfinite(got["y"]).all()):
        return None
    return ("With x = 0 and the entering state = 0 your output holds NaN or inf, where it is 0: P holds an "
            "inf (or NaN) that meets the zeros of x (0 * inf is NaN), e.g. -inf where the mask should put 0, "
            "or an exp that overflows above the diagonal.\n      Mask P with ct.where(causal, ..., 0.0), "
            "zero and not -inf (there is no softmax here), and clamp the exponent: ct.exp(ct.minimum(v, "
            "0.0)).", None)


def _diagnosis(kernel, backend: str, device: str, case: Case) -> Diagnosis:
    """The experiments of exercise 7, in the order they run (see :mod:`._experiments`)."""
    lab = Lab(_run(kernel, backend, device, case), _reference)
    zero = torch.zeros_like

    def same_groups(b, keys):
        return replace(b, **{k: b[k][:, :, :1].expand_as(b[k]).clone() for k in keys})

    group_hint = "head hi reads group hi // HEADS_PER_GROUP (consecutive heads share a group), for C and B."
    state_decay_hint = ("the entering state has decayed by exp(dA_cs[s]) when it reaches position s: "
                        "multiply ROW s of C @ stateᵀ by it, ct.exp(dA_cs)[:, None].")
    state_hint = ("the chunk also sees the state entering it: y += exp(dA_cs)[:, None] * (C @ stateᵀ), one "
                  "ct.mma of C with the transposed state tile, added once.")
    index_hint = ("dA_cumsum is (b, h, nchunks, Q): this block's decays are dA_cumsum[bi, hi, c, :], at the "
                  "HEAD hi (not the group hi // HEADS_PER_GROUP that C and B use).")
    state_steps = [  # run on the case with x = 0: the state term alone
        *counted("chunk_init_states", "the state term", state_hint),
        AsIf("each chunk's entering state taken from the chunk before (chunk 0's = 0)",
             shifted_chunks("chunk_init_states", 1), "your kernel reads chunk c - 1's entering state in "
             "chunk c: chunk_init_states[c] already is the state ENTERING chunk c (the state passing shifted "
             "it)",
             state_hint),
        AsIf("each chunk's entering state taken from the chunk after (the last chunk's = 0)",
             shifted_chunks("chunk_init_states", -1), "your kernel reads chunk c + 1's entering state in "
             "chunk c (the state LEAVING chunk c): chunk_init_states[c] is the state entering chunk c",
             state_hint),
        AsIf("chunk 0's entering state = 0", lambda b: _first_state_zero(b), "your kernel leaves the state "
             "term out in chunk 0 (an if that skips it for c == 0): chunk 0's entering state is the initial "
             "state, which need not be 0", state_hint),
        Reading(lambda b: b, _read_state_rows(state_hint)),
        Reading(_state_decay_probe, _read_state_decay),
        Confusion("C", "B", "the state term reads the state out with C: exp(dA_cs)[:, None] * (C @ stateᵀ); "
                  "B writes into the state, in the chunk state kernel."),
        Experiment("With x = 0 (the state term alone) and the entering state the same in every chunk",
                   _same_chunks_state, "so the state term reads the entering state of another chunk",
                   "chunk_init_states is (b, nchunks, h, p, n): chunk c's entering state is tile (bi, c, hi, "
                   "0, 0), the same chunk index c as x's (the state passing already shifted it by one)."),
        Experiment("With x = 0 (the state term alone) and the entering state the same for every head",
                   lambda b: same_for_every_head(b, "chunk_init_states", 2),
                   "so the state term reads the entering state of another head",
                   "the entering state is per HEAD: tile (bi, c, hi, 0, 0), not the group."),
        Experiment("With x = 0 (the state term alone) and the entering state stored transposed in memory",
                   _transposed_state, "your kernel multiplies C by the state untransposed",
                   "C_s . state is C (Q, TN) times stateᵀ (TN, TP): ct.mma(C, ct.transpose(state), acc). "
                   "(Without the transpose it compiles only when TP == TN, as in this case.)", undo=True),
        Experiment("With x = 0 (the state term alone) and dA_cumsum = 0",
                   lambda b: replace(b, dA_cumsum=zero(b["dA_cumsum"])),
                   "so the decay of the state term is wrong", state_decay_hint,
                   then=decay_power(state_decay_hint)),
        Experiment("With x = 0 (the state term alone) and C the same for every group",
                   lambda b: same_groups(b, ("C",)), "so the state term reads C of the wrong group",
                   group_hint),
    ]
    input_steps = [  # run on the case with a zero entering state: the chunk's own inputs alone
        *chunk0_everywhere(("x", "B"), lambda b: b["dt_out"].shape[3],
                           "chunk c's sources k are the positions c*Q + k: x and B at tile (bi, c, ., 0) in "
                           "tiles of Q positions, or c*Q + k in a loop over single positions."),
        Linearity(["x"], ["y"], "x", "your kernel applies a nonlinearity to x (silu? the gate is not part of "
                  "this kernel)", "y is linear in x: P @ x with x as it is loaded, cast only for the mma.",
                  setting="the entering state = 0 and "),
        Experiment("With the entering state = 0 and x the same in every chunk (each a copy of chunk 0's)",
                   lambda b: _same_chunks(b, ("x",)), "so your kernel reads x of another chunk",
                   "x is (b, l, h, p): chunk c of head hi is tile (bi, c, hi, 0) in tiles of (1, Q, 1, TP), "
                   "the same chunk index c as C's and B's."),
        Experiment("With the entering state = 0 and x the same for every head (each a copy of head 0's)",
                   lambda b: same_for_every_head(b, "x", 2), "so your kernel reads x of another head",
                   "x is (b, l, h, p): chunk c of head hi is tile (bi, c, hi, 0) in tiles of (1, Q, 1, TP), "
                   "at the HEAD hi; only C and B are per group (hi // HEADS_PER_GROUP).",
                   controls=[lambda b: same_groups(b, ("C", "B"))]),
        Reading(lambda b: b, _read_row_scale),
        Experiment("With the entering state = 0 and C and B exchanged",
                   lambda b: replace(b, C=b["B"].clone(), B=b["C"].clone()), "your kernel computes B Cᵀ",
                   "C reads (the query, row s), B writes (the key, column k): CB = ct.mma(C, "
                   "ct.transpose(B), acc), P[s, k] = (C_s . B_k) * ...", undo=True),
        Confusion("C", "B", "C reads (the query, row s), B writes (the key, column k): CB = ct.mma(C, "
                  "ct.transpose(B), acc), one load of each."),
        Experiment("With the entering state = 0 and dA_cumsum multiplied by log2(e)",
                   lambda b: replace(b, dA_cumsum=b["dA_cumsum"] * LOG2E),
                   "your kernel computes 2**v where the decay is exp(v)",
                   "ct.exp2(v) is 2**v: write ct.exp(v), or ct.exp2(v * LOG2E) with LOG2E = "
                   "1.4426950408889634.", undo=True),
        Experiment("With the entering state = 0 and dA_cumsum's sign flipped",
                   lambda b: replace(b, dA_cumsum=-b["dA_cumsum"]),
                   "the decay's exponent has its sign flipped", _DECAY_HINT, undo=True),
        Reading(_last_position_only, _read_last_sources),
        _future_leak(Experiment(
            "With the entering state = 0 and x zero except at each chunk's first position",
            _first_position_only, "so later positions leak into earlier outputs: P is not zero above the "
            "diagonal (k > s) (the check confirmed it: with x only at each chunk's last position, your "
            "output is not 0 at the positions before it)", _DECAY_HINT, controls=[_last_position_only])),
        Experiment("With the entering state = 0 and C_s . B_k = 0 whenever s - k is even (the diagonal "
                   "among them)", lambda b: _parity(b, same=False),
                   "so the diagonal k = s is what goes wrong (the check confirmed it: with only the diagonal "
                   "left, your output is wrong): it is left out (a strict mask, pos[:, None] > pos[None, :]) "
                   "or counted twice (a term for the current position added to P @ x, which already holds "
                   "it)", "y_s includes position s itself, once: P[s, s] = (C_s . B_s) * dt_s under the mask "
                   "pos[:, None] >= pos[None, :], and nothing added for it beside P @ x.",
                   controls=[_only_diagonal, lambda b: _parity(b, same=True)]),
        Experiment("With the entering state = 0 and dt_out the same for every head (each a copy of head 0's)",
                   lambda b: same_for_every_head(b, "dt_out", 1), "so your kernel reads dt of another head",
                   "dt_out is (b, h, nchunks, Q): this block's step sizes are at (bi, hi, c, 0) in tiles of "
                   "(1, 1, 1, Q), the HEAD hi, not the group."),
        Experiment("With the entering state = 0 and dt the same at every position (1.5, 1.75, ... by head)",
                   lambda b: replace(b, dt_out=by_head(b["dt_out"], 1)),
                   "so dt reaches the wrong elements when it differs from position to position",
                   "dt_k belongs to the SOURCE position k, a column of P: P = CB * decay * dt[None, :] "
                   "(dt[:, None] would scale the rows, the targets s)."),
        Experiment("With the entering state = 0 and dt = 1 at every position",
                   lambda b: replace(b, dt_out=torch.ones_like(b["dt_out"])),
                   "so the factor dt is wrong (missing, or applied more than once: the check confirmed it, "
                   "with dt = 0.5 at every position your output is wrong)",
                   "each source position k enters as dt_k * x_k: scale the columns of P by dt, once.",
                   controls=[lambda b: replace(b, dt_out=torch.full_like(b["dt_out"], 0.5))]),
        Experiment("With the entering state = 0 and dA_cumsum = 0 (every decay 1)",
                   lambda b: replace(b, dA_cumsum=zero(b["dA_cumsum"])),
                   "so the decay inside the chunk is wrong", _DECAY_HINT,
                   then=[*decay_power(_DECAY_HINT), Reading(_no_state, _read_intra_decay)]),
        Experiment("With the entering state = 0 and C and B the same for every group",
                   lambda b: same_groups(b, ("C", "B")), "so your kernel reads C and B of the wrong group",
                   group_hint),
        Linearity(["C"], ["y"], "C", "your kernel applies a nonlinearity to C or to C Bᵀ",
                  "P = (C Bᵀ) * decay * dt[None, :] under the causal mask, nothing applied to C Bᵀ: its "
                  "entries may be negative.", setting="the entering state = 0 and "),
        Linearity(["B"], ["y"], "B", "your kernel applies a nonlinearity to B or to C Bᵀ",
                  "P = (C Bᵀ) * decay * dt[None, :] under the causal mask, nothing applied to C Bᵀ: its "
                  "entries may be negative.", setting="the entering state = 0 and "),
        Experiment("With the entering state = 0 and C_s . B_k = 1 for every s and k (C = B = one unit "
                   "vector)", _unit_CB, "so the factor C_s . B_k of P is what goes wrong (missing, or not "
                   "the matrix C Bᵀ)", "CB[s, k] = C_s . B_k for EVERY pair of positions: CB = ct.mma(C, "
                   "ct.transpose(B), acc), a (Q, Q) tile, and P = CB * decay * dt[None, :].",
                   then=[_p_matrix]),
        low_precision(_exact, "the entering state = 0, x, C and B small integers, dt in {0.5, 1} and no "
                      "decay", ["x", "C", "B"], _MMA_CAST, controls=[lambda b: replace(b, dA_cumsum=zero(
                          b["dA_cumsum"]))]),
        Linearity(["dt_out"], ["y"], "dt", "your kernel applies a nonlinearity to dt (softplus? exp?)",
                  "dt_out arrives as the step sizes themselves: P = CB * decay * dt[None, :].",
                  setting="the entering state = 0 and "),
        Reading(_one_source, _read_one_source),
        _p_matrix,
    ]
    steps = [
        misplaced({"y": ("batch entry", "position", "head", "")}),
        AsIf("dA_cumsum replaced by exp(dA_cumsum)",
             lambda b: replace(b, dA_cumsum=torch.exp(b["dA_cumsum"])),
             "your kernel takes the exp of dA_cumsum before it uses it (at the load, say): dA_cumsum already "
             "is the log of the decay, so every decay is the exp of a difference of dA_cumsum itself",
             _DECAY_HINT),
        Reading(lambda b: b, _read_output_factor),
        Reading(lambda b: b, _read_cut),
        AsIf("C's rows scaled by dt (C_s * dt_s) and dt = 1", _dt_into_C, "your kernel scales C's rows, the "
             "TARGET positions s, by dt: dt_s reaches P and the state term, where dt_k belongs to the source "
             "positions k alone", "fold dt into B's rows (B * dt[:, None]: CB[s, k] then carries dt_k) or "
             "scale P's columns, P = CB * decay * dt[None, :]; the state term has no dt."),
        read_one_slice({"y": ("", "position", "", "")}, "every position s < l has an output, the sequence's "
                       "last one (l - 1) included: y needs no mask of its own at the ragged end (the loads' "
                       "zero padding and the store's bounds take care of it)."),
        same_batch(list(_KEYS)),
        *exchanged_axes("C", {2: "group", 3: "state (n)"}, _LAYOUT_HINT),
        *exchanged_axes("B", {2: "group", 3: "state (n)"}, _LAYOUT_HINT),
        *exchanged_axes("x", {2: "head", 3: "head dim (p)"}, _LAYOUT_HINT),
        *exchanged_axes("chunk_init_states", {1: "chunk", 2: "head"}, _LAYOUT_HINT),
        reshaped_for_transpose("B", lambda b: b["dt_out"].shape[3], _TRANSPOSE_HINT),
        reshaped_for_transpose("C", lambda b: b["dt_out"].shape[3], _TRANSPOSE_HINT),
        reshaped_for_transpose("x", lambda b: b["dt_out"].shape[3], _TRANSPOSE_HINT),
        Confusion("dt_out", "dA_cumsum", "dt_out holds the step sizes dt_k, dA_cumsum the running sums of "
                  "dt * A: both are (b, h, nchunks, Q), loaded the same way from their own arrays."),
        Confusion("C", "B", "C reads (the query: row s of C Bᵀ, and the state term), B writes (the key: "
                  "column k): one load of each, from its own array."),
        Reading(lambda b: _no_input(_no_state(b)), _read_nonfinite),
        Experiment("With the entering state set to zero", _no_state, "so the state term is wrong", state_hint,
                   then=state_steps, then_base=_no_input),
        Experiment("With x = 0 (only the entering state left)", _no_input,
                   "so the term of the chunk's own inputs, P @ x, is wrong",
                   "P[s, k] = (C_s . B_k) * exp(dA_cs[s] - dA_cs[k]) * dt_k for k <= s, 0 above the "
                   "diagonal; y += P @ x.", then=input_steps, then_base=_no_state),
        Experiment("With C and B the same for every group", lambda b: same_groups(b, ("C", "B")),
                   "so your kernel reads C and B of the wrong group", group_hint),
        Experiment("With C and B the same in every chunk (each a copy of chunk 0's)",
                   lambda b: _same_chunks(b, ("C", "B")), "so your kernel reads C and B of another chunk",
                   "C and B are (b, l, g, n): chunk c is tile (bi, c, g, 0) in tiles of (1, Q, 1, TN), the "
                   "same chunk index c as x's."),
        Experiment("With the same decays in every chunk of every head (dA_cumsum = -0.3, -0.6, ...)",
                   one_decay, "so your kernel reads the decay of another chunk, head or batch entry",
                   index_hint, then=decay_index(index_hint),
                   also=[scaled_up(one_decay, ["x", "chunk_init_states"])]),
        Experiment("With dA_cumsum = 0 (every decay 1)", lambda b: replace(b, dA_cumsum=zero(b["dA_cumsum"])),
                   "so the decays are wrong", _DECAY_HINT,
                   then=[rounded_decays(), *decay_power(_DECAY_HINT)]),
        low_precision(_exact, "x, C, B and the entering state small integers, dt in {0.5, 1} and no decay",
                      ["x", "C", "B"], _MMA_CAST,
                      controls=[lambda b: replace(b, dA_cumsum=zero(b["dA_cumsum"]))]),
        Linearity(["x", "chunk_init_states"], ["y"], "x and the entering state",
                  "your kernel applies a nonlinearity, or adds a constant, to its inputs or its output "
                  "(silu? the gate is not part of this kernel)", "y is linear in x and the state: P @ x + "
                  "exp(dA_cs)[:, None] * (C @ stateᵀ), nothing else."),
        Linearity(["C"], ["y"], "C", "your kernel applies a nonlinearity to C as it is loaded (relu? silu? "
                  "an activation belongs to the layer around the SSD, not here)", "C enters both terms as it "
                  "is loaded: C Bᵀ for P, and C @ stateᵀ for the state term."),
    ]
    prelude = [
        (lambda b: as_float32(b, ("x", "C", "B")), "With the same inputs in float32 your output is right: "
         "only the bfloat16 inputs go wrong", "build P in float32 and cast it to x.dtype only for the mma; "
         "cast the state to C.dtype for its mma; accumulate both into float32 tiles."),
        (tame_decay, "With the same case at milder decay (dA_cumsum scaled into [-4, 0]) your output is "
         "right: your kernel breaks only where the decay is strong", "above the diagonal dA_cs[s] - dA_cs[k] "
         "is positive and exp overflows to inf (and inf * 0 = NaN): clamp it, ct.exp(ct.minimum(v, 0.0)), "
         "and mask P with ct.where."),
    ]
    first = [read_clamp(["y"],
                        "y = P @ x plus the state term, nothing clipped: the gate and any activation "
                        "belong to the layer around the SSD.")]
    return Diagnosis(lab, steps, prelude, first)


def _diagnose(kernel, backend: str, device: str, case: Case):
    return _diagnosis(kernel, backend, device, case)(dict(case.inputs))


def _padding_probe(kernel, case: Case, backend: str, device: str, expected: torch.Tensor, tol) -> Probe:
    """Re-run the learner's kernel with every array zero-padded in memory (l to nchunks*Q, p to TP, n to
    TN), so that no load runs past an end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
        if not nan_on_cpu(_run(kernel, "cpu", "cpu", case), case.inputs):
            return False
        i = case.inputs
        x, dt_out, dA, C, B, S = (i[k] for k in ("x", "dt_out", "dA_cumsum", "C", "B", "chunk_init_states"))
        b, l, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        xp = torch.zeros(b, nc * Q, h, TP, dtype=x.dtype, device=device)
        xp[:, :l, :, :p] = x
        Cp = torch.zeros(b, nc * Q, g, TN, dtype=C.dtype, device=device)
        Cp[:, :l, :, :n] = C
        Bp = torch.zeros_like(Cp)
        Bp[:, :l, :, :n] = B
        Sp = torch.zeros(b, nc, h, TP, TN, dtype=S.dtype, device=device)
        Sp[..., :p, :n] = S
        y = prefilled((b, nc * Q, h, TP), dtype=x.dtype, device=device)
        args = (xp, dt_out.clone(), dA.clone(), Cp, Bp, Sp, y, Q, TP, TN, h // g)
        run_kernel(CHECK, kernel, (b, nc, h), args, case, _NUDGE, backend)
        got = y[:, :l, :, :p].detach().double().cpu()
        return bool(torch.isclose(got, expected.double(), rtol=tol[0], atol=tol[1]).all())

    label = ("loads without padding_mode=ZERO: on the CPU tile executor (which fills undetermined padding "
             "with NaN) your outputs hold NaN, and with the same inputs zero-padded in memory (no load past "
             "an end) your kernel is right")
    return Probe(label, confirms, _PAD_HINT)


def _run_cases(kernel, backend: str, device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_scan

    cases = _cases(device)
    for case in cases:
        case.name += f", {backend} backend"
        i = case.inputs
        x, dt_out, dA, C, B, S = (i[k] for k in ("x", "dt_out", "dA_cumsum", "C", "B", "chunk_init_states"))
        b, l, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        expected = chunk_scan(*(t.cpu() for t in (x, dt_out, dA, C, B, S)))
        y = prefilled((b, l, h, p), dtype=x.dtype, device=device)
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        args = (x.clone(), dt_out.clone(), dA.clone(), C.clone(), B.clone(), S.clone(), y, Q, TP, TN, h // g)
        run_kernel(CHECK, kernel, (b, nc, h), args, case, _NUDGE, backend)
        scale = max(1.0, float(expected.double().abs().max()))
        if x.dtype == torch.bfloat16:  # P and the state are rounded to bf16 for the tensor cores, y to bf16
            tol = (3e-2, 2e-2 * scale)
        else:
            tol = (1e-4, 1e-5 * scale)
        compare(
            CHECK,
            y.cpu(),
            expected,
            case,
            name="y",
            rtol=tol[0],
            atol=tol[1],
            hint=_NUDGE,
            probes=[_padding_probe(kernel, case, backend, device, expected, tol)],
            diagnose=once(_diagnose, kernel, backend, device, case),
            axes=("batch entry", "position", "head", ""),
            extra=partial(_stored_without_offset, Q=Q, g=g),
        )
    return cases


def _stored_at_group(actual: torch.Tensor, expected: torch.Tensor, g: int):
    """(what, hint) when y is stored only at heads 0..g-1, each holding the right output of a head of that
    group (head hi's output at index hi // HEADS_PER_GROUP): the store uses the group index; else None."""
    never = actual == UNWRITTEN
    h = actual.shape[2]
    if (actual.shape != expected.shape or g >= h or not bool(never[:, :, g:].all())
            or bool(never[:, :, :g].any())):
        return None
    a, e = actual.double().cpu(), expected.double().cpu()
    tol = 1e-3 * max(1.0, float(e.abs().max()))
    per = h // g
    for j in range(g):
        heads = range(j * per, (j + 1) * per)
        if not any(bool(((a[:, :, j] - e[:, :, k]).abs() <= tol).all()) for k in heads):
            return None
    return (f"your kernel stored y only at heads 0..{g - 1} (as many as there are groups), and what is at "
            f"index j is the right output of a head of group j; heads {g}..{h - 1} are unwritten (still "
            f"{UNWRITTEN:.4g}).",
            "y is stored at the group index hi // HEADS_PER_GROUP where the head index hi belongs: only C "
            "and B are per group; x, the states and y are per head, (bi, c, hi, 0).")


def _stored_without_offset(actual: torch.Tensor, expected: torch.Tensor, Q: int, g: int = 0):
    """(what, hint) when y is stored only at positions 0..Q-1, holding the right values of a later chunk
    (the last block to store there wins): every chunk stores at chunk-local positions, the store's index
    lacks the chunk offset. Else :func:`unwritten`'s reading."""
    never = actual == UNWRITTEN
    l = actual.shape[1]
    nc = -(-l // Q)
    if (actual.shape == expected.shape and nc >= 2 and bool(never[:, Q:].all())
            and not bool(never[:, :Q].any())):
        a, e = actual.double().cpu(), expected.double().cpu()
        tol = 1e-3 * max(1.0, float(e.abs().max()))
        for c in range(nc - 1, 0, -1):
            m = min(Q, l - c * Q)  # the chunk's positions inside the sequence
            if bool(((a[:, :m] - e[:, c * Q:c * Q + m]).abs() <= tol).all()):
                return (f"your kernel stored y only at positions 0..{Q - 1} (chunk 0's), and what is there "
                        f"is the right output of chunk {c} (positions {c * Q}..{c * Q + m - 1}); every later "
                        f"position is unwritten (still {UNWRITTEN:.4g}).",
                        f"every chunk stores at the chunk-local positions 0..{Q - 1}, so each overwrites the "
                        f"one before: the store's index lacks the chunk offset. In TILE units the index on "
                        f"the position axis is c (tiles of Q positions); a store row by row, in elements, "
                        f"needs c * Q + s.")
    return (_stored_at_group(actual, expected, g) if g else None) or unwritten(actual, expected)


def check_chunk_scan_kernel(kernel) -> None:
    """Launch the learner's ``chunk_scan_kernel`` on hidden cases: on the GPU when usable, and always on the
    CPU tile executor.

    Signature: ``kernel(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q, TP, TN, HEADS_PER_GROUP)`` (the
    last four are ``ct.Constant[int]``), grid ``(b, nchunks, h)``; ``y`` (b, l, h, p) in x's dtype is filled
    with a sentinel (-2**13) before the launch.
    """
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK,
        lambda backend, device: _run_cases(kernel, backend, device),
        "ragged last chunks, p and n below the tile sizes TP and TN, g in {1, 2, 3}, Q in {8, 16}, "
        "a random initial state, dt*A down to -1e3, bfloat16 inputs",
    )
