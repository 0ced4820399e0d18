"""Exercise 4: a tiled cumsum in cuTile, the chunk_cumsum kernel (step 0 of the chunked SSD).

The learner writes ``chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int])``, launched on the
grid ``(b, nchunks, h)``: block (bi, c, hi) reads the chunk's Q step sizes ``dt[bi, c*Q : (c+1)*Q, hi]``
(already positive; no bias or softplus here), and stores

    dt_out[bi, hi, c, :]    = those step sizes, 0 past the end of the sequence      (b, h, nchunks, Q) float32
    dA_cumsum[bi, hi, c, :] = inclusive cumsum over the chunk of dt_out * A[hi]     (b, h, nchunks, Q) float32

which is :func:`mamba2_tutorial.reference.chunk_cumsum` without the dt preprocessing.
"""

from __future__ import annotations

import math

import torch

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

CHECK = "check_chunk_cumsum_kernel"

_NUDGE = (
    "compute one chunk by hand for the failing case: dt_out is the chunk's step sizes (0 past the end), "
    "dA_cumsum[s] = dt_0*A + ... + dt_s*A, the running sum INCLUDING position s."
)
_HINT = (  # the recipe (hint(2))
    "block (bi, c, hi) loads dt with ct.load(dt, (bi, c, hi), shape=(1, Q, 1), "
    "padding_mode=ct.PaddingMode.ZERO) (index in TILE units), reshapes to (Q,), multiplies by A[hi] "
    "(ct.load(A, (hi,), shape=())), takes ct.cumsum(..., axis=0) and stores both (Q,) tiles reshaped to "
    "(1, 1, 1, Q) at index (bi, hi, c, 0)."
)
_PAD_HINT = (
    "the last chunk runs past the end of the sequence: load dt with padding_mode=ct.PaddingMode.ZERO. "
    "The default padding is UNDETERMINED (NaN on the CPU executor, garbage on a GPU), and the "
    "positions past the end must hold dt = 0 so that they add nothing to the cumsum."
)

register(CHECK, "ex04", _HINT)

# name, b, l, h, Q, dt scale, A scale
_SPECS = [
    ("ragged: l=37, Q=8", 2, 37, 3, 8, 1.0, 1.0),
    ("one short chunk: l=5, Q=16", 3, 5, 2, 16, 1.0, 1.0),
    ("exact multiple: l=32, Q=16", 1, 32, 5, 16, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 2, 21, 4, 8, 20.0, 50.0),
]


def _cases(device: str) -> list[Case]:
    cases = []
    for i, (name, b, l, h, Q, dts, As) in enumerate(_SPECS):
        gen = torch.Generator().manual_seed(300 + i)
        dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0) * dts
        A = -torch.exp(torch.rand(h, generator=gen)) * As
        cases.append(Case(name, 300 + i, {"dt": dt.to(device), "A": A.to(device), "Q": Q}))
    return cases


def _variant(case: Case, *, with_A=True, reverse=False, pad_zero=True, exclusive=False):
    dt, A, Q = case.inputs["dt"].double().cpu(), case.inputs["A"].double().cpu(), case.inputs["Q"]
    b, l, h = dt.shape
    nc = math.ceil(l / Q)
    fill = 0.0 if pad_zero else float("nan")
    d = torch.full((b, nc * Q, h), fill, dtype=torch.float64)
    d[:, :l] = dt
    d = d.reshape(b, nc, Q, h).permute(0, 3, 1, 2)  # (b, h, nc, Q)
    dA = d * A[None, :, None, None] if with_A else d
    cs = dA.flip(-1).cumsum(-1).flip(-1) if reverse else dA.cumsum(-1)
    if exclusive:
        cs = cs - dA
    return d, cs


def _mistakes(which: int) -> list[Mistake]:
    return [
        Mistake("the ragged tail left unpadded", lambda c: _variant(c, pad_zero=False)[which], _PAD_HINT),
        Mistake(
            "a cumsum of dt (without A)",
            lambda c: _variant(c, with_A=False)[which],
            "dA_cumsum is the cumsum of dt * A[h] (the log-decay), not of dt alone.",
        ),
        Mistake(
            "an exclusive cumsum (position s left out of its own sum)",
            lambda c: _variant(c, exclusive=True)[which],
            "the cumsum is inclusive: dA_cumsum[s] includes dt_s * A itself, as ct.cumsum(v, axis=0) "
            "computes it; do not subtract v afterwards or shift it by one position.",
        ),
        Mistake(
            "a reverse cumsum",
            lambda c: _variant(c, reverse=True)[which],
            "the cumsum runs forward in time: ct.cumsum(v, axis=0) with the default reverse=False.",
        ),
    ]


def _tail(actual: torch.Tensor, l: int, Q: int, name: str):
    """(what, hint) if positions past the sequence end are not 0, else None."""
    b, h, nc, _ = actual.shape
    pos = torch.arange(nc * Q, device=actual.device).reshape(nc, Q)
    past = (pos >= l)[None, None].expand_as(actual)
    if past.any() and not bool((actual[past] == 0).all()):
        idx = tuple(int(i) for i in (past & (actual != 0)).nonzero()[0])
        return (
            f"{name}{list(idx)} is {actual[idx].item()}, but position {idx[2] * Q + idx[3]} is past the end "
            f"of the sequence (l={l}) and must be 0.",
            _PAD_HINT,
        )
    return None


def _padding_probe(kernel, case: Case, backend: str, device: str, expected, which: int, tol: float) -> Probe:
    """Re-run the learner's kernel with dt zero-padded in memory to nchunks*Q steps, so that no load runs
    past the end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
        dt, A, Q = case.inputs["dt"], case.inputs["A"], case.inputs["Q"]
        b, l, h = dt.shape
        nc = math.ceil(l / Q)
        dtp = torch.zeros(b, nc * Q, h, dtype=dt.dtype, device=device)
        dtp[:, :l] = dt
        outs = [prefilled((b, h, nc, Q), device=device) for _ in range(2)]
        run_kernel(CHECK, kernel, (b, nc, h), (dtp, A.clone(), *outs, Q), case, _NUDGE, backend)
        return bool(torch.isclose(outs[which].cpu(), expected, rtol=1e-5, atol=tol).all())

    label = ("loads without padding_mode=ZERO: with dt zero-padded in memory (no load past the end) your "
             "kernel is right")
    return Probe(label, confirms, _PAD_HINT)


def _run_cases(kernel, backend: str, device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_cumsum

    cases = _cases(device)
    for case in cases:
        case.name += f", {backend} backend"
    for case in cases:
        dt, A, Q = case.inputs["dt"], case.inputs["A"], case.inputs["Q"]
        b, l, h = dt.shape
        nc = math.ceil(l / Q)
        dt_exp, dA_exp = chunk_cumsum(dt.cpu(), A.cpu(), Q)
        dt_out = prefilled((b, h, nc, Q), device=device)
        dA_cs = prefilled((b, h, nc, Q), device=device)
        args = (dt.clone(), A.clone(), dt_out, dA_cs, Q)
        run_kernel(CHECK, kernel, (b, nc, h), args, case, _NUDGE, backend)
        dt_out, dA_cs = dt_out.cpu(), dA_cs.cpu()
        tol = 1e-5 * max(1.0, float(dA_exp.abs().max()))
        for name, act, exp, which in (("dt_out", dt_out, dt_exp, 0), ("dA_cumsum", dA_cs, dA_exp, 1)):
            compare(
                CHECK,
                act,
                exp,
                case,
                name=name,
                rtol=1e-5,
                atol=tol,
                hint=_NUDGE,
                mistakes=_mistakes(which),
                probes=[_padding_probe(kernel, case, backend, device, (dt_exp, dA_exp)[which], which, tol)],
                axes=("batch entry", "head", "chunk", "position"),
                extra=lambda a, e, name=name, l=l, Q=Q: (
                    unwritten(a, e) or (_tail(a, l, Q, name) if name == "dt_out" else None)
                ),
            )
    return cases


def check_chunk_cumsum_kernel(kernel) -> None:
    """Launch the learner's ``chunk_cumsum_kernel`` on hidden cases: on the GPU when usable, and always on
    the CPU tile executor."""
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK,
        lambda backend, device: _run_cases(kernel, backend, device),
        "ragged last chunks, a sequence shorter than one chunk, Q in {8, 16}, distinct "
        "b/l/h, dt*A down to -1e3",
    )
