"""Exercise 7: the chunk-scan kernel in cuTile (step 4 of the chunked SSD: the outputs).

The learner writes ``chunk_scan_kernel(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q, TP, TN,
HEADS_PER_GROUP)`` (the last four ``ct.Constant[int]``), launched on the grid ``(b, nchunks, h)``. Block
(bi, c, hi) computes the outputs of chunk c of head hi, for the positions s = 0 .. Q-1 of the chunk::

    y[s] = sum_{k <= s} (C_s . B_k) * exp(dA_cs[s] - dA_cs[k]) * dt_k * x_k    the dual form in the chunk
         + exp(dA_cs[s]) * C_s . state                                        the state entering the chunk

as two tile matrix products: ``W = (C Bᵀ) ∘ decay ∘ dt`` (Q × Q, zero above the diagonal) times ``x``, plus
``exp(dA_cs)[:, None] * (C @ stateᵀ)``, where ``state = chunk_init_states[bi, c, hi]`` (p × n). This is
:func:`mamba2_tutorial.reference.chunk_scan` without D and the z gate.

Shapes: x (b, l, h, p), C and B (b, l, g, n) (head hi reads group ``hi // HEADS_PER_GROUP``), dt_out and
dA_cumsum (b, h, nchunks, Q) float32, chunk_init_states (b, nchunks, h, p, n) float32; y (b, l, h, p) in x's
dtype, filled with a sentinel (-2**100) before the launch.
"""

from __future__ import annotations

import torch

from ..kernels._host import next_power_of_two
from ._harness import (
    Case,
    Mistake,
    Probe,
    check_kernel_on_backends,
    compare,
    prefilled,
    register,
    run_kernel,
    unwritten,
)

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
    "W = ct.where(causal, CB * decay * dt[None, :], 0.0).\n"
    "  4. y = ct.mma(W.astype(x.dtype), x, zeros (Q, TP) float32) + ct.mma(C, "
    "ct.transpose(state.astype(C.dtype)), zeros (Q, TP) float32) * ct.exp(dA)[:, None].\n"
    "  5. ct.store(y_array, (bi, c, hi, 0), y.astype(y_array.dtype).reshape((1, Q, 1, TP)))."
)
_PAD_HINT = (
    "loads that run past the end of an array (the ragged last chunk along l, and the p or n axis when "
    "TP > p or TN > n) need padding_mode=ct.PaddingMode.ZERO: the default padding is UNDETERMINED (NaN on "
    "the CPU executor), and a NaN in a padded row of x or B reaches every output of the chunk through "
    "the matrix products (0 * NaN is NaN)."
)
_DECAY_HINT = (
    "the decay from source k to target s is exp(dA_cs[s] - dA_cs[k]), a number in (0, 1] for k <= s; "
    "above the diagonal (k > s, the future) W must be 0: ct.where(causal, ..., 0.0)."
)
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


def _variant(case: Case, *, mask=True, decay="right", dt_in=True, state_term="right", cb="CB",
             mapping="interleave"):
    """A (possibly wrong) chunk scan in float64, written independently of the reference, for the detectors."""
    i = {k: v.detach().cpu().double() for k, v in case.inputs.items()}
    x, dt, dA, C, B, S = i["x"], i["dt_out"], i["dA_cumsum"], i["C"], i["B"], i["chunk_init_states"]
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    nc, Q = dt.shape[2], dt.shape[3]
    heads = torch.arange(h) // (h // g) if mapping == "interleave" else torch.arange(h) % g

    def chunks(t, width):  # (b, l, groups or heads, width) -> (b, nc, Q, groups or heads, width), zero-padded
        out = torch.zeros(b, nc * Q, t.shape[2], width, dtype=t.dtype)
        out[:, :l] = t
        return out.reshape(b, nc, Q, t.shape[2], width)

    xc = chunks(x, p)
    Cc, Bc = chunks(C, n)[:, :, :, heads], chunks(B, n)[:, :, :, heads]   # (b, nc, Q, h, n)
    dAc = dA.permute(0, 2, 3, 1)                                             # (b, nc, Q, h)
    dtc = dt.permute(0, 2, 3, 1)
    CB = torch.einsum("bcshn,bckhn->bchsk", Cc, Bc)
    if cb == "BC":
        CB = CB.transpose(-1, -2)
    seg = dAc.permute(0, 1, 3, 2)[..., :, None] - dAc.permute(0, 1, 3, 2)[..., None, :]   # (b, nc, h, s, k)
    causal = torch.ones(Q, Q, dtype=torch.bool).tril()
    E = {
        "right": lambda: torch.exp(seg.clamp(max=0)),
        "unclamped": lambda: torch.exp(seg),          # no mask and no ct.minimum: exp(positive) above
        "flipped": lambda: torch.exp(-seg),
        "exp2": lambda: torch.exp2(seg.clamp(max=0)),
        "none": lambda: torch.ones_like(seg),
    }[decay]()
    W = CB * E if not mask else (CB * E).masked_fill(~causal, 0.0)
    if dt_in:
        W = W * dtc.permute(0, 1, 3, 2)[..., None, :]
    y = torch.einsum("bchsk,bckhp->bcshp", W, xc)
    if state_term != "none":
        read = torch.einsum("bcshn,bchpn->bcshp", Cc, S)
        if state_term == "right":
            read = read * torch.exp(dAc)[..., None]
        y = y + read
    return y.reshape(b, nc * Q, h, p)[:, :l]


def _mistakes() -> list[Mistake]:
    def m(**kw):
        return lambda case: _variant(case, **kw)

    return [
        Mistake("no causal mask: W is not zero above the diagonal", m(mask=False), _DECAY_HINT),
        Mistake("no causal mask: W is not zero above the diagonal", m(mask=False, decay="unclamped"),
                _DECAY_HINT),
        Mistake("the decay exponent flipped, exp(dA_cs[k] - dA_cs[s])", m(decay="flipped"), _DECAY_HINT),
        Mistake(
            "no decay inside the chunk (what a flipped difference under ct.minimum(..., 0.0) gives too)",
            m(decay="none"),
            _DECAY_HINT,
        ),
        Mistake(
            "exp2 without the factor LOG2E",
            m(decay="exp2"),
            "ct.exp2(v) is 2**v: to get exp(v) write ct.exp2(v * LOG2E) with LOG2E = 1.4426950408889634 "
            "(= 1 / ln 2), or use ct.exp.",
        ),
        Mistake(
            "the input term without dt",
            m(dt_in=False),
            "each source position k enters as dt_k * x_k: scale the columns of W by dt (dt[None, :]).",
        ),
        Mistake(
            "the state term left out",
            m(state_term="none"),
            "the chunk also sees the state entering it: add exp(dA_cs[s]) * (C_s . state), one more "
            "ct.mma of C with the transposed state tile.",
        ),
        Mistake(
            "the entering state without its decay exp(dA_cs[s])",
            m(state_term="undecayed"),
            "the entering state has decayed by exp(dA_cs[s]) when it reaches position s of the chunk: "
            "multiply row s of C @ stateᵀ by ct.exp(dA_cs)[:, None].",
        ),
        Mistake(
            "B Cᵀ instead of C Bᵀ",
            m(cb="BC"),
            "C reads (the query, row s), B writes (the key, column k): CB = ct.mma(C, ct.transpose(B), ...).",
        ),
        Mistake(
            "the wrong group mapping (h % g)",
            m(mapping="modulo"),
            "head hi uses group hi // HEADS_PER_GROUP (consecutive heads share a group), not hi % g.",
        ),
    ]


def _padding_probe(kernel, case: Case, backend: str, device: str, expected: torch.Tensor, tol) -> Probe:
    """Re-run the learner's kernel with every array zero-padded in memory (l to nchunks*Q, p to TP, n to
    TN), so that no load runs past an end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
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

    label = ("loads without padding_mode=ZERO: with the same inputs zero-padded in memory (no load past an "
             "end) your kernel is right")
    return Probe(label, confirms, _PAD_HINT)


def _run_cases(kernel, backend: str, device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_scan

    cases = _cases(device)
    mistakes = _mistakes()
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
        if x.dtype == torch.bfloat16:  # W and the state are rounded to bf16 for the tensor cores, y to bf16
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
            mistakes=mistakes,
            probes=[_padding_probe(kernel, case, backend, device, expected, tol)],
            axes=("batch entry", "position", "head", ""),
            extra=unwritten,
        )
    return cases


def check_chunk_scan_kernel(kernel) -> None:
    """Launch the learner's ``chunk_scan_kernel`` on hidden cases: on the GPU when usable, and always on the
    CPU tile executor.

    Signature: ``kernel(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q, TP, TN, HEADS_PER_GROUP)`` (the
    last four are ``ct.Constant[int]``), grid ``(b, nchunks, h)``; ``y`` (b, l, h, p) in x's dtype is filled
    with a sentinel (-2**100) before the launch.
    """
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK,
        lambda backend, device: _run_cases(kernel, backend, device),
        "ragged last chunks, p and n below the tile sizes TP and TN, g in {1, 2, 3}, Q in {8, 16}, "
        "a random initial state, dt*A down to -1e3, bfloat16 inputs",
    )
