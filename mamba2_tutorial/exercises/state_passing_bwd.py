"""Exercise 8: the state gradient carried backwards (backward kernel 2), in cuTile.

The learner writes ``state_passing_bwd_kernel(dS_out, dA_cumsum, chunk_init_states, dfinal_states,
dstates, ddA_last, dinitial_states, Q, TP, TN)`` (the last three ``ct.Constant[int]``), launched on the grid
``(b, h)``.
Block (bi, hi) walks the chunks from the LAST to the first, carrying a (TP, TN) float32 tile dS, the gradient
of the state leaving the current chunk (g_c = exp(dA_cumsum[bi, hi, c, Q-1]), S_c = chunk_init_states)::

    dS = dfinal_states[bi, hi]
    for c = nchunks-1 .. 0:
        dstates[bi, c, hi]  = dS                       (the gradient of the state chunk c adds)
        ddA_last[bi, hi, c] = g_c · sum(dS ∘ S_c)      (the gradient of the chunk's total decay)
        dS = g_c · dS + dS_out[bi, c, hi]              (the gradient of the state entering chunk c)
    dinitial_states[bi, hi] = dS

Shapes: dS_out, chunk_init_states, dstates (b, nchunks, h, p, n); dA_cumsum (b, h, nchunks, Q); ddA_last
(b, h, nchunks); dfinal_states, dinitial_states (b, h, p, n); all float32. The package's kernel is
``kernels/bwd_states.py``'s ``state_passing_bwd_kernel`` (several blocks per state).
"""

from __future__ import annotations

import torch

from ..kernels._host import next_power_of_two
from ._harness import (
    Case,
    Mistake,
    check_kernel_on_backends,
    compare,
    prefilled,
    register,
    run_kernel,
    unwritten,
)

CHECK = "check_state_passing_bwd_kernel"

_NUDGE = (
    "follow one (batch entry, head) by hand for the failing case, starting at the LAST chunk: dstates[c] is "
    "the gradient arriving from the chunks after c (before chunk c's own dS_out is added), and the decay "
    "gradient pairs that same dS with the state ENTERING chunk c."
)
_HINT = (  # the recipe (hint(2))
    "block (bi, hi) loads dfinal_states[bi, hi] as a (1, 1, TP, TN) tile (zero-padded) reshaped to (TP, TN): "
    "dS. Then for i in range(nchunks) with c = nchunks - 1 - i: store dS into dstates at (bi, c, hi, 0, 0) "
    "(reshaped to (1, 1, 1, TP, TN)); g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())); load "
    "S = chunk_init_states[bi, c, hi] (zero-padded, reshaped to (TP, TN)) and store g * ct.sum(dS * S) into "
    "ddA_last at (bi, hi, c) (reshaped to (1, 1, 1)); only then dS = g * dS + dS_out[bi, c, hi]. After the "
    "loop, store dS into dinitial_states at (bi, hi, 0, 0)."
)

register(CHECK, "ex08", _HINT)

# name, b, nchunks, h, p, n, Q, d final_states?, dt scale, A scale
_SPECS = [
    ("3 chunks, with d final_states, p=5, n=7", 2, 3, 3, 5, 7, 8, True, 1.0, 1.0),
    ("one chunk, no d final_states", 1, 1, 4, 4, 8, 16, False, 1.0, 1.0),
    ("6 chunks, with d final_states", 3, 6, 2, 3, 6, 8, True, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 1, 4, 3, 4, 5, 8, True, 20.0, 50.0),
]


def state_passing_backward(dS_out, dA_cumsum, chunk_init_states, dfinal_states, *, order="reverse",
                           store="before", decay="last", ddA="decayed", start=True):
    """The reverse state recurrence in float64: ``(dstates, ddA_last, dinitial_states)``. The keyword
    arguments other than their defaults compute a typical wrong version (the mistake detectors)."""
    dS_out, dA, S, dfinal = (t.detach().cpu().double() for t in (dS_out, dA_cumsum, chunk_init_states,
                                                                   dfinal_states))
    nchunks = dS_out.shape[1]
    g = {"last": torch.exp(dA[..., -1]), "first": torch.exp(dA[..., 0])}[decay]       # (b, h, nchunks)
    dS = dfinal.clone() if start else torch.zeros_like(dfinal)
    dstates = torch.empty_like(dS_out)
    ddA_last = torch.empty_like(g)
    chunks = range(nchunks - 1, -1, -1) if order == "reverse" else range(nchunks)
    for c in chunks:
        gc = g[:, :, c, None, None]
        if store == "before":
            dstates[:, c] = dS
        part = (dS * S[:, c]).sum((-1, -2))
        new = gc * dS + dS_out[:, c]
        if ddA == "updated":
            part = (new * S[:, c]).sum((-1, -2))
        ddA_last[:, :, c] = part * (g[:, :, c] if ddA != "undecayed" else 1.0)
        dS = new
        if store == "after":
            dstates[:, c] = dS
    return dstates, ddA_last, dS


def _cases(device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_cumsum

    cases = []
    for i, (name, b, nc, h, p, n, Q, dfin, dts, As) in enumerate(_SPECS):
        seed = 800 + i
        gen = torch.Generator().manual_seed(seed)
        l = nc * Q - (Q // 2 if nc > 1 else 3)  # a ragged last chunk
        dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0) * dts
        A = -torch.exp(torch.rand(h, generator=gen)) * As
        _, dA_cs = chunk_cumsum(dt, A, Q)
        dfinal = torch.randn(b, h, p, n, generator=gen) if dfin else torch.zeros(b, h, p, n)
        inputs = {"dS_out": torch.randn(b, nc, h, p, n, generator=gen), "dA_cumsum": dA_cs,
                  "chunk_init_states": torch.randn(b, nc, h, p, n, generator=gen), "dfinal_states": dfinal}
        cases.append(Case(name, seed, {k: v.to(device) for k, v in inputs.items()}))
    return cases


def _mistakes(which: int) -> list[Mistake]:
    def m(**kw):
        return lambda case: state_passing_backward(**case.inputs, **kw)[which]

    return [
        Mistake("the chunks walked first to last", m(order="forward"),
                "the gradient flows backwards: start at the LAST chunk (c = nchunks - 1 - i), where "
                "d final_states enters, and end at chunk 0, which hands dS to dinitial_states."),
        Mistake("dstates stored AFTER the update", m(store="after"),
                "dstates[c] is the gradient of the state chunk c ADDS, dL/dS_c+1: store dS before adding "
                "chunk c's own dS_out."),
        Mistake("the decay of the chunk's FIRST position", m(decay="first"),
                "the decay across a whole chunk is exp(dA_cumsum[..., Q-1]): the inclusive cumsum's LAST "
                "one."),
        Mistake("the decay gradient without the decay", m(ddA="undecayed"),
                "S_c+1 = exp(a_last) · S_c + s_c, so d a_last = exp(a_last) · <dS_c+1, S_c>: multiply the "
                "sum by g."),
        Mistake("the decay gradient from the updated dS", m(ddA="updated"),
                "pair S_c (the state ENTERING chunk c) with dS before the update: the gradient of the state "
                "LEAVING chunk c."),
        Mistake("dfinal_states ignored", m(start=False),
                "the carried gradient starts from dfinal_states[bi, hi], not from zeros."),
    ]


def _run_cases(kernel, backend: str, device: str) -> list[Case]:
    cases = _cases(device)
    for case in cases:
        case.name += f", {backend} backend"
        dS_out, dA, S, dfinal = (case.inputs[k] for k in ("dS_out", "dA_cumsum", "chunk_init_states",
                                                           "dfinal_states"))
        b, nc, h, p, n = dS_out.shape
        Q = dA.shape[-1]
        expected = state_passing_backward(dS_out, dA, S, dfinal)
        dstates = prefilled((b, nc, h, p, n), device=device)
        ddA_last = prefilled((b, h, nc), device=device)
        dinit = prefilled((b, h, p, n), device=device)
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        args = (dS_out.clone(), dA.clone(), S.clone(), dfinal.clone(), dstates, ddA_last, dinit, Q, TP, TN)
        run_kernel(CHECK, kernel, (b, h), args, case, _NUDGE, backend)
        for which, (name, act, axes) in enumerate((
                ("dstates", dstates, ("batch entry", "chunk", "head", "", "")),
                ("ddA_last", ddA_last, ("batch entry", "head", "chunk")),
                ("dinitial_states", dinit, ("batch entry", "head", "", "")))):
            exp = expected[which].float()
            atol = 1e-5 * max(1.0, float(exp.abs().max()))
            compare(CHECK, act.cpu(), exp, case, name=name, rtol=1e-4, atol=atol, hint=_NUDGE,
                    mistakes=_mistakes(which), axes=axes, extra=unwritten)
    return cases


def check_state_passing_bwd_kernel(kernel) -> None:
    """Launch the learner's ``state_passing_bwd_kernel`` on hidden cases: on the GPU when usable, and always
    on the CPU tile executor."""
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK,
        lambda backend, device: _run_cases(kernel, backend, device),
        "1 to 6 chunks, with and without d final_states, p and n below the tile sizes, dt*A down to -1e3",
    )
