"""Exercises 3 and 5: each chunk's local state, in PyTorch and as a cuTile kernel.

For chunk c of head h (positions k = 0 .. Q-1 inside the chunk, ``last`` = Q-1)::

    states[b, c, h] = sum_k exp(dA_cumsum[b, h, c, last] - dA_cumsum[b, h, c, k]) * dt_out[b, h, c, k]
                             * x[b, c*Q + k, h, :] (outer) B[b, c*Q + k, group(h), :]          (p, n) float32

with group(h) = h // (h // g). Inputs: x (b, l, h, p), B (b, l, g, n), dt_out and dA_cumsum (b, h, nchunks, Q)
float32 from :func:`mamba2_tutorial.reference.chunk_cumsum` (dt_out is 0 past the end of the sequence).
Output: states (b, nchunks, h, p, n) float32, as :func:`mamba2_tutorial.reference.chunk_state`.
"""

from __future__ import annotations

import math

import torch

from ..kernels._host import next_power_of_two
from ._experiments import (
    Confusion,
    Diagnosis,
    Experiment,
    Lab,
    Linearity,
    Reading,
    as_float32,
    by_head,
    chunk0_everywhere,
    chunk_decay_one,
    close,
    decay_index,
    decay_power,
    exchanged_axes,
    low_precision,
    misplaced,
    nan_on_cpu,
    once,
    positions,
    read_at_group,
    read_clamp,
    read_cut_pn,
    read_offset,
    replace,
    reshaped_for_transpose,
    rounded_decays,
    same_batch,
    same_for_every_head,
    scaled_up,
    small_integers,
    tame_decay,
)
from ._harness import (
    Case,
    Mistake,
    Probe,
    call_learner,
    check_kernel_on_backends,
    compare,
    congratulate,
    prefilled,
    register,
    run_kernel,
    unwritten,
)

CHECK = "check_chunk_state"
CHECK_KERNEL = "check_chunk_state_kernel"

_NUDGE = (
    "rebuild the failing case and compute one entry states[b, c, h, :, :] by hand: the sum over the chunk's "
    "positions k of (decay from k to the chunk's end) * dt_k * x_k (outer) B_k. Which factor differs?"
)
_HINT = (  # the recipe of exercise 3 (hint(2))
    "pad x and B with zeros to nchunks*Q positions, reshape to (b, nchunks, Q, ...), map groups to heads "
    "(repeat_interleave(h // g) on the group axis), weight each position k by "
    "exp(dA_cumsum[..., -1:] - dA_cumsum) * dt_out, and contract over k in float32: "
    "einsum('bhck,bckhp,bckhn->bchpn', ...)."
)
_RAGGED_HINT = (
    "this case has l not divisible by Q: pad x and B along l with zeros to nchunks*Q "
    "(torch.nn.functional.pad, or torch.zeros + slice assignment) before reshaping into chunks."
)
_BF16_HINT = (
    "with bfloat16 inputs the answer is still float32 and must be ACCUMULATED in float32: upcast x "
    "and B with .float() before multiplying (a bfloat16 einsum keeps only ~3 significant digits)."
)
_EXCLUSIVE_HINT = (
    "dA_cumsum is the INCLUSIVE cumsum: dA_cumsum[k] already contains step k's own dt_k * A, and the decay "
    "from position k to the end of the chunk is exp(dA_cumsum[last] - dA_cumsum[k]). Subtracting the "
    "cumsum of the steps BEFORE k (an exclusive cumsum) also decays k's own input by exp(dt_k * A)."
)
_DECAY_HINT = (
    "the weight of position k is exp(dA_cumsum[last] - dA_cumsum[k]): the decay from k to the END "
    "of the chunk, a number in (0, 1]. Subtract inside the exp (never exp(a) / exp(b): both "
    "underflow to 0 for strong decay and 0/0 = NaN)."
)

# name, b, l, h, p, g, n, Q, dtype, dt scale, A scale
_SPECS = [
    ("ragged: l=37, Q=8, g=2", 2, 37, 6, 5, 2, 7, 8, torch.float32, 1.0, 1.0),
    ("one short chunk: l=5, Q=8", 1, 5, 4, 3, 1, 6, 8, torch.float32, 1.0, 1.0),
    ("exact multiple: l=32, Q=16, g=3", 3, 32, 6, 4, 3, 5, 16, torch.float32, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 1, 24, 3, 4, 1, 5, 8, torch.float32, 20.0, 50.0),
    ("bfloat16 inputs, ragged: l=29", 2, 29, 4, 6, 2, 8, 8, torch.bfloat16, 1.0, 1.0),
]


def _cases(device: str = "cpu", specs=_SPECS) -> list[Case]:
    from mamba2_tutorial.reference import chunk_cumsum

    cases = []
    for i, (name, b, l, h, p, g, n, Q, dtype, dts, As) in enumerate(specs):
        seed = 400 + i
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0) * dts
        A = -torch.exp(torch.rand(h, generator=gen)) * As
        dt_out, dA_cs = chunk_cumsum(dt, A, Q)
        inputs = {"x": x, "B": B, "dt_out": dt_out, "dA_cumsum": dA_cs}
        cases.append(Case(name, seed, {k: v.to(device) for k, v in inputs.items()}))
    return cases


def _variant(case: Case, *, decay="right", dt_in=True, mapping="interleave"):
    """A (possibly wrong) chunk_state computed in float64, for the mistake detectors."""
    i = {k: v.detach().cpu().double() for k, v in case.inputs.items()}
    x, B, dt, dA = i["x"], i["B"], i["dt_out"], i["dA_cumsum"]
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    nc, Q = dt.shape[2], dt.shape[3]
    heads = torch.arange(h) // (h // g) if mapping == "interleave" else torch.arange(h) % g
    xp = torch.zeros(b, nc * Q, h, p, dtype=x.dtype)
    xp[:, :l] = x
    Bp = torch.zeros(b, nc * Q, g, n, dtype=x.dtype)
    Bp[:, :l] = B
    xc = xp.reshape(b, nc, Q, h, p)
    Bc = Bp.reshape(b, nc, Q, g, n)[:, :, :, heads]
    last = dA[..., -1:]
    exclusive = torch.nn.functional.pad(dA[..., :-1], (1, 0))  # the cumsum of the steps before k
    w = {
        "right": torch.exp(last - dA),
        "exclusive": torch.exp(last - exclusive),
        "exp2": torch.exp2(last - dA),
        "flipped": torch.exp(dA - last),
        "from_start": torch.exp(dA),
        "ratio": torch.exp(last.float()).double() / torch.exp(dA.float()).double(),
        "none": torch.ones_like(dA),
    }[decay]
    if dt_in:
        w = w * dt
    return torch.einsum("bhck,bckhp,bckhn->bchpn", w, xc, Bc)


def _mistakes() -> list[Mistake]:
    return [
        Mistake(
            "the decay exponent flipped, exp(dA_cs[k] - dA_cs[last])",
            lambda c: _variant(c, decay="flipped"),
            _DECAY_HINT,
        ),
        Mistake(
            "the decay from the chunk START, exp(dA_cs[k])",
            lambda c: _variant(c, decay="from_start"),
            _DECAY_HINT,
        ),
        Mistake(
            "a ratio of exponentials, exp(dA_cs[last]) / exp(dA_cs[k])",
            lambda c: _variant(c, decay="ratio"),
            _DECAY_HINT,
        ),
        Mistake("no decay at all", lambda c: _variant(c, decay="none"), _DECAY_HINT),
        Mistake(
            "an exclusive cumsum: the decay of position k includes its own step",
            lambda c: _variant(c, decay="exclusive"),
            _EXCLUSIVE_HINT,
        ),
        Mistake(
            "the input term without dt",
            lambda c: _variant(c, dt_in=False),
            "each position enters the state as dt_k * x_k (outer) B_k: multiply the decay weight by dt_out.",
        ),
        Mistake(
            "the wrong group mapping (h % g)",
            lambda c: _variant(c, mapping="modulo"),
            "head i uses group i // (h // g) (consecutive heads share a group: repeat_interleave), "
            "not i % g.",
        ),
    ]


def _torch_probes(fn, case: Case, expected: torch.Tensor, tol: tuple[float, float]) -> list[Probe]:
    """Counterfactual re-runs of the learner's chunk_state: x and B zero-padded by hand to nchunks*Q (the
    ragged tail), and x and B given in float32 (bfloat16 arithmetic)."""
    i = case.inputs
    x, B, dt, dA = i["x"], i["B"], i["dt_out"], i["dA_cumsum"]
    l, nc, Q = x.shape[1], dt.shape[2], dt.shape[3]

    def right(*args) -> bool:
        out = fn(*(a.clone() for a in args))
        return (isinstance(out, torch.Tensor) and out.shape == expected.shape
                and bool(torch.isclose(out.double(), expected.double(), rtol=tol[0], atol=tol[1]).all()))

    def padded() -> bool:
        xp = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, nc * Q - l))
        Bp = torch.nn.functional.pad(B, (0, 0, 0, 0, 0, nc * Q - l))
        return right(xp, Bp, dt, dA)

    probes = []
    if nc * Q != l:
        label = "the ragged last chunk: with x and B zero-padded by hand to nchunks*Q your answer is right"
        probes.append(Probe(label, padded, _RAGGED_HINT))
    if x.dtype in (torch.bfloat16, torch.float16):
        probes.append(Probe("bfloat16 arithmetic: with the same x and B in float32 your answer is right",
                            lambda: right(x.float(), B.float(), dt, dA), _BF16_HINT))  # fmt: skip
    return probes


def _tol(case: Case, expected: torch.Tensor) -> tuple[float, float]:
    scale = max(1.0, float(expected.abs().max()))
    return 1e-4, 1e-5 * scale


def check_chunk_state(chunk_state_fn) -> None:
    """Check a PyTorch ``chunk_state(x, B, dt_out, dA_cumsum) -> states (b, nchunks, h, p, n)``."""
    __tracebackhide__ = True
    from mamba2_tutorial.reference import chunk_state

    cases = _cases()
    mistakes = _mistakes()
    for case in cases:
        i = case.inputs
        args = (i["x"], i["B"], i["dt_out"], i["dA_cumsum"])
        expected = chunk_state(*args)
        rtol, atol = _tol(case, expected)
        probes = _torch_probes(chunk_state_fn, case, expected, (rtol, atol))
        actual = call_learner(CHECK, chunk_state_fn, case, tuple(a.clone() for a in args), _NUDGE, probes)
        compare(
            CHECK,
            actual,
            expected,
            case,
            name="states",
            rtol=rtol,
            atol=atol,
            hint=_NUDGE,
            mistakes=mistakes,
            probes=probes,
            axes=("batch entry", "chunk", "head", "", ""),
            dtype_hint="states are float32 whatever the input dtype: " + _BF16_HINT,
        )
    congratulate(
        CHECK,
        cases,
        "ragged last chunks, a sequence shorter than one chunk, g in {1, 2, 3}, distinct "
        "b/l/h/p/n, dt*A down to -1e3, bfloat16 inputs",
    )


# ------------------------------------------------------------------------------------------ the cuTile kernel

register(CHECK, "ex03", _HINT)

_KERNEL_NUDGE = (
    "rebuild the failing case and compute one state by hand: (x * w[:, None])ᵀ @ B over the chunk, with "
    "w_k = exp(dA_cs[Q-1] - dA_cs[k]) * dt_k. Which factor differs?"
)
_KERNEL_HINT = (  # the recipe of exercise 5 (hint(2))
    "block (bi, c, hi), group g = hi // HEADS_PER_GROUP.\n"
    "  1. load x as (1, Q, 1, TP) at (bi, c, hi, 0) and B as (1, Q, 1, TN) at (bi, c, g, 0), both with "
    "padding_mode=ct.PaddingMode.ZERO, reshaped to (Q, TP) and (Q, TN); dt_out and dA_cumsum as (1, 1, 1, Q) "
    "at (bi, hi, c, 0), reshaped to (Q,).\n"
    "  2. w = ct.exp(dA_last - dA_cs) * dt, with dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,)).\n"
    "  3. xw = (x.astype(ct.float32) * w[:, None]).astype(x.dtype): the mma operands in the input dtype "
    "(bf16 can use the tensor cores).\n"
    "  4. state = ct.mma(ct.transpose(xw), B, ct.zeros((TP, TN), dtype=ct.float32)): a float32 accumulator.\n"
    "  5. ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))."
)
register(CHECK_KERNEL, "ex05", _KERNEL_HINT)

_KERNEL_PAD_HINT = (
    "loads that run past the end of an array (the ragged last chunk along l, and the p or n axis "
    "when TP > p or TN > n) need padding_mode=ct.PaddingMode.ZERO: the default padding is "
    "UNDETERMINED (NaN on the CPU executor) and 0 * NaN is still NaN. A mask of your own in place of "
    "the padding must keep exactly the positions c*Q + k < l, l = x.shape[1] (a ct.where, since "
    "0 * NaN is NaN)."
)

# name, b, l, h, p, g, n, Q, dtype, dt scale, A scale (p and n not powers of two: TP, TN > p, n)
_KERNEL_SPECS = [
    ("ragged: l=37, Q=8, g=2, p=5, n=7", 2, 37, 6, 5, 2, 7, 8, torch.float32, 1.0, 1.0),
    ("exact multiple: l=32, Q=16, g=3", 1, 32, 6, 4, 3, 8, 16, torch.float32, 1.0, 1.0),
    ("one short chunk: l=5, Q=8", 3, 5, 2, 3, 1, 6, 8, torch.float32, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 1, 24, 3, 4, 1, 5, 8, torch.float32, 20.0, 50.0),
    ("bfloat16 inputs, ragged: l=29", 2, 29, 4, 6, 2, 8, 8, torch.bfloat16, 1.0, 1.0),
]



LOG2E = 1.4426950408889634

_EXP2_HINT = ("ct.exp2(v) is 2**v: to get exp(v) write ct.exp2(v * LOG2E) with LOG2E = 1.4426950408889634 "
              "(= 1 / ln 2), or use ct.exp.")


def _kernel_run(kernel, backend: str, device: str, case: Case):
    """Launch the learner's kernel on any inputs {x, B, dt_out, dA_cumsum}: {states} (a prefilled buffer)."""

    def run(inputs):
        x, B, dt_out, dA = (inputs[k].to(device) for k in ("x", "B", "dt_out", "dA_cumsum"))
        b, _, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        states = prefilled((b, nc, h, p, n), device=device)
        args = (x, B, dt_out.float(), dA.float(), states, Q, next_power_of_two(p), next_power_of_two(n),
                h // g)
        run_kernel(CHECK_KERNEL, kernel, (b, nc, h), args, case, _KERNEL_NUDGE, backend)
        return {"states": states}

    return run


def _kernel_reference(inputs):
    from mamba2_tutorial.reference import chunk_state

    x, B, dt_out, dA = (inputs[k].double().cpu() for k in ("x", "B", "dt_out", "dA_cumsum"))
    return {"states": chunk_state(x, B, dt_out, dA)}


def _symmetric(base):
    """B = 2x (one group per head, n = p): every state 2 x ⊗ x is symmetric, and a kernel that reads x where
    B belongs is still wrong (x ⊗ x). None when the case's tiles are not square (a transposed state does not
    compile there)."""
    x, B = base["x"], base["B"]
    if next_power_of_two(x.shape[3]) != next_power_of_two(B.shape[3]):
        return None
    return replace(base, B=2 * x)


def _one_group_per_head(base):
    """The layout of :func:`_symmetric` (one group per head, n = p) with B not equal to x: the control that
    shows a kernel right on the symmetric case is right because of the symmetry, not the layout."""
    return replace(base, B=torch.flip(base["x"], dims=(1,)).contiguous())


def _one_decay(base):
    """The same moderate decays (dA_cumsum = -0.3, -0.6, ...) in every chunk of every head: a kernel that
    reads the decay of another chunk, head or batch entry is right here."""
    dA = base["dA_cumsum"]
    row = -0.3 * torch.arange(1, dA.shape[-1] + 1, dtype=dA.dtype)
    return replace(base, dA_cumsum=row.expand_as(dA).clone())


def _dt_zero_at(base, position: int):
    """dt = 0 at one position of every chunk (0: the first, -1: the last)."""
    dt = base["dt_out"].clone()
    dt[..., position] = 0.0
    return replace(base, dt_out=dt)


def _read_vanishing(lab, inputs, got):
    """With every decay 1 (dA_cumsum = 0), states that are all 0."""
    if not bool((got["states"] == 0).all()):
        return None
    return ("With dA_cumsum = 0 (every decay exp(0) = 1) your states are all 0: your weights vanish where "
            "the decay is 1, so they hold a difference of the decays (dA_cs[Q-1] - dA_cs[k] itself, or "
            "exp(dA_cs[Q-1]) - exp(dA_cs[k])) where the exp of the difference belongs.\n      " + _DECAY_HINT,
            None)


def _x_impulse(base):
    """x = 1 at one element (position 1 of chunk 0, element 2 of p) and 0 elsewhere, no decay, dt = 1."""
    x = torch.zeros_like(base["x"])
    if x.shape[3] < 3:
        return None
    x[:, 1, :, 2] = 1.0
    return replace(base, x=x, dA_cumsum=torch.zeros_like(base["dA_cumsum"]),
                   dt_out=torch.ones_like(base["dt_out"]))


def _read_x_impulse(lab, inputs, got):
    """Which rows of the state x's one nonzero element reaches (see :func:`_x_impulse`)."""
    state = got["states"][0, 0, 0]  # (p, n)
    if not bool(torch.isfinite(state).all()):
        return None
    rows = state.abs().amax(1) > 1e-6
    if rows.tolist() == [i == 1 for i in range(len(rows))]:
        return ("With x = 1 at one element (position 1 of chunk 0, element 2 of p), no decay and dt = 1, "
                "your state is nonzero in row 1, where it should be in row 2: your state's rows follow the "
                "chunk's positions k, not x's elements, so the mma sums over the wrong axis.\n      state = "
                "xwᵀ @ B sums over the positions: (TP, Q) @ (Q, TN). ct.transpose(xw) turns (Q, TP) into "
                "(TP, Q); a reshape does not (it keeps the elements in memory order).", None)
    return None


def _chunk0_only(base):
    """x zero outside chunk 0 (None with one chunk): every later chunk's state is 0."""
    Q = base["dt_out"].shape[-1]
    if base["dt_out"].shape[2] < 2:
        return None
    x = torch.zeros_like(base["x"])
    x[:, :Q] = base["x"][:, :Q]
    return replace(base, x=x)


def _read_chunk0_only(lab, inputs, got):
    """Whether chunk 0's input reaches the states of later chunks (see :func:`_chunk0_only`)."""
    want = lab.reference(inputs)["states"]
    states = got["states"]
    if not close(states[:, 0], want[:, 0], lab.rtol, lab.atol):
        return None
    later = states[:, 1:].transpose(0, 1).flatten(1).abs().amax(1) > 1e-6
    if not bool(later.any()):
        return None
    chunks = ", ".join(str(c + 1) for c in later.nonzero().flatten().tolist())
    return (f"With x zero outside chunk 0 your state of chunk 0 is right, but your states of chunks {chunks} "
            f"are not 0: the state of chunk c takes in positions of other chunks.\n      Each chunk's "
            f"state sums its own Q positions only (loads at chunk index c, no loop over earlier chunks): "
            f"carrying the states across chunks is the next kernel's job, state passing.", None)


def _sequence_end_zero(base, where: str = "last"):
    """dt = 0 at the sequence's last step ("last"), or at its first ("first"): a kernel that masks the
    ragged end off by one is right on the first."""
    dt = base["dt_out"].clone()
    Q, l = dt.shape[-1], base["x"].shape[1]
    at = l - 1 if where == "last" else 0
    dt[:, :, at // Q, at % Q] = 0.0
    return replace(base, dt_out=dt)


def _weights_probe(base):
    """Float32 inputs with uneven decays (steps 0.1, 0.2, 0.3, 0.1, ...) and a different dt at every
    position, the same in every chunk and head: the weights w_k a kernel applies can be read back from its
    state (see :func:`_read_weights`)."""
    dA, dt = base["dA_cumsum"], base["dt_out"]
    Q = dA.shape[-1]
    steps = 0.1 + 0.1 * (torch.arange(Q, dtype=torch.float32) % 3)
    dts = 0.5 + 0.75 * torch.arange(Q, dtype=torch.float32) / Q
    return replace(base, x=base["x"].float(), B=base["B"].float(),
                   dA_cumsum=(-torch.cumsum(steps, 0)).expand_as(dA).clone(),
                   dt_out=dts.expand_as(dt).clone())


def _read_rank_one(lab, inputs, got):
    """Every state of the kernel is an outer product of two vectors (rank 1), where the right states are
    sums of Q outer products: the kernel sums each factor over the positions and multiplies the sums."""
    states, want = got["states"].double(), lab.reference(inputs)["states"]
    if not bool(torch.isfinite(states).all()) or min(states.shape[-2:]) < 2:
        return None

    def ranks_one(t):
        sv = torch.linalg.svdvals(t.flatten(0, 2))  # (blocks, min(p, n))
        big = sv[:, 0] > 1e-6
        return bool(big.any()) and bool((sv[big, 1] <= 1e-5 * sv[big, 0]).all())

    if not ranks_one(states) or ranks_one(want):
        return None
    return ("Every one of your states is an outer product of two vectors (a (p, n) matrix of rank 1), where "
            "the right state sum_k w_k x_k (outer) B_k adds Q outer products: your kernel sums x (or x "
            "times its weights) over the positions and B over the positions, then multiplies the two sums, "
            "which adds the cross terms x_j (outer) B_k of different positions.\n      Multiply first, then "
            "sum over the positions: one ct.mma(ct.transpose(xw), B, acc), (TP, Q) @ (Q, TN), does both.",
            None)


def _read_weights(lab, inputs, got):
    """The weights w_k of chunk 0 (batch entry 0, head 0), solved from the kernel's state: state =
    sum_k w_k x_k (outer) B_k is linear in w, so a least-squares fit finds them when the kernel has that
    form (a small residual), and the weights are compared with the ways they go wrong."""
    Q = inputs["dA_cumsum"].shape[-1]
    x, B = inputs["x"][0, :Q, 0].double(), inputs["B"][0, :Q, 0].double()  # (Q, p), (Q, n)
    if x.shape[0] < Q or x.shape[1] * B.shape[1] < 2 * Q:
        return None
    state = got["states"][0, 0, 0].double()  # (p, n)
    if not bool(torch.isfinite(state).all()):
        return None
    basis = (x[:, :, None] * B[:, None, :]).reshape(Q, -1).T  # (p*n, Q)
    w = torch.linalg.lstsq(basis, state.reshape(-1, 1)).solution.flatten()
    if float((basis @ w - state.reshape(-1)).norm()) > 1e-4 * max(1.0, float(state.norm())):
        return _read_rank_one(lab, inputs, got)  # not a weighted sum of x_k (outer) B_k
    v = inputs["dA_cumsum"][0, 0, 0].double()
    d = inputs["dt_out"][0, 0, 0].double()
    right = torch.exp(v[-1] - v) * d
    if torch.allclose(w, right, rtol=1e-3, atol=1e-5):
        return None
    softplus = torch.nn.functional.softplus
    forms = [
        (torch.exp(v) * d, "exp(dA_cs[k]) * dt_k: your weight is exp(dA_cs[k]), the decay from the "
         "chunk's START"),
        (torch.exp(v[-1] + v) * d, "exp(dA_cs[Q-1] + dA_cs[k]) * dt_k: a + where the decay from k to the "
         "end has a -"),
        (torch.exp(v - v[-1]) * d, "exp(dA_cs[k] - dA_cs[Q-1]) * dt_k: the decay's exponent has its sign "
         "flipped"),
        (torch.exp(v[-1] - v), "exp(dA_cs[Q-1] - dA_cs[k]) without dt_k: the factor dt is missing"),
        (d, "dt_k alone: the decay is missing (or every decay is 1: an exponent clamped with ct.maximum(v, "
         "0.0), which is 0 for every v <= 0, where ct.minimum(v, 0.0) or no clamp belongs)"),
        (torch.ones_like(d), "1 at every position: x and B enter as they are, without their weights (neither "
         "the decay nor dt_k)"),
        (torch.exp(-v) * d, "exp(-dA_cs[k]) * dt_k: the chunk's end value dA_cs[Q-1] is 0 in your decay (not "
         "taken, or picked with a mask that selects nothing: the last position is Q-1, not Q)"),
        (torch.exp((v[-1] - v) * LOG2E) * d, "exp((dA_cs[Q-1] - dA_cs[k]) * log2(e)) * dt_k: the exponent is "
         "scaled by log2(e) = 1.4427 and then taken with ct.exp (log2(e) applied twice, or ct.exp where "
         "ct.exp2 belongs): exp(v) = 2**(v * log2(e)), one log2(e) and ct.exp2"),
        (torch.exp2(v[-1] - v) * d, "2**(dA_cs[Q-1] - dA_cs[k]) * dt_k: your kernel computes 2**v where the "
         "decay is exp(v)"),
        ((v[-1] - v) * d, "(dA_cs[Q-1] - dA_cs[k]) * dt_k: your decay is dA_cs[Q-1] - dA_cs[k] itself, "
         "without its exp"),
        (right / right.sum(), "the right weights divided by their sum: the weights are normalized (they are "
         "not a distribution)"),
        (torch.exp(v.sum() - v) * d, "exp(sum(dA_cs) - dA_cs[k]) * dt_k: the chunk's dA_cumsum summed, where "
         "its last element (already the chunk's total) belongs"),
        (torch.exp(v[-2] - v) * d, "exp(dA_cs[Q-2] - dA_cs[k]) * dt_k: your decay takes the chunk's end "
         "from position Q-2, one short of the last"),
        (torch.exp(v[0] - v) * d, "exp(dA_cs[0] - dA_cs[k]) * dt_k: your decay takes the chunk's end from "
         "position 0 instead of Q-1"),
        (torch.exp(v - v[0]) * d, "exp(dA_cs[k] - dA_cs[0]) * dt_k: your decay runs from the chunk's START "
         "(position 0) to k, where it runs from k to the chunk's END (Q-1)"),
        (torch.exp(2 * (v[-1] - v)) * d, "exp(2 (dA_cs[Q-1] - dA_cs[k])) * dt_k: your decay is squared "
         "(applied twice, or its exponent doubled)"),
        (torch.exp(v[-1] - v) * softplus(d), "exp(dA_cs[Q-1] - dA_cs[k]) * softplus(dt_k): dt is already "
         "through its softplus"),
        (torch.exp(v[-1] - v) * d * d, "exp(dA_cs[Q-1] - dA_cs[k]) * dt_k²: dt applied twice"),
        (torch.cat([right[:-1], right.new_zeros(1)]), "right except 0 at the chunk's last position: your "
         "kernel leaves out (or gets wrong) each chunk's last position, a mask or a bound off by one"),
        (torch.cat([right[:-1], 2 * right[-1:]]), "right except twice the right weight at the chunk's last "
         "position: the last position is counted twice (a term for it added beside the mma, which already "
         "holds it)"),
        (torch.cat([2 * right[:1], right[1:]]), "right except twice the right weight at the chunk's first "
         "position: the first position is counted twice"),
        (torch.cat([right.new_zeros(1), right[1:]]), "right except 0 at the chunk's first position: your "
         "kernel leaves out (or gets wrong) each chunk's first position, a mask or a bound off by one"),
    ]
    said = ("With float32 inputs, uneven decays and a different dt at every position, the weights w_k your "
            "state gives each position k of chunk 0 (solved from your state, which is a weighted sum of "
            "x_k (outer) B_k) are")
    Q_ = len(right)
    decay = torch.exp(v[-1] - v)
    forms += [(decay * d[j], f"exp(dA_cs[Q-1] - dA_cs[k]) * dt_{j % Q_}: the step of position {j % Q_} for "
               f"every position, where each position k has its own dt_k") for j in (-1, 0)]
    forms += [((torch.exp(v[-1]) - torch.exp(v)) * d, "(exp(dA_cs[Q-1]) - exp(dA_cs[k])) * dt_k: the exp "
               "taken of each term, where it belongs to their difference"),
              (right * torch.exp(v[-1]), "the right weights times exp(dA_cs[Q-1]): the chunk's whole decay "
               "applied once more")]
    forms += [(torch.exp2(v[-1] - v) * LOG2E * d, "2**(dA_cs[Q-1] - dA_cs[k]) * log2(e) * dt_k: log2(e) "
               "multiplies the 2**v, where it belongs inside the exponent: exp(v) = 2**(v * log2(e))"),
              (torch.exp2(v[-1] - v) / LOG2E * d, "2**(dA_cs[Q-1] - dA_cs[k]) / log2(e) * dt_k: log2(e) "
               "divides the 2**v, where it belongs inside the exponent: exp(v) = 2**(v * log2(e))")]
    forms += [(right * right, "the right weights squared: the weights applied twice (to x and to B, or twice "
               "to x)"),
              (right / Q_, f"the right weights divided by Q = {Q_}: a mean over the chunk where the state is "
               f"a sum"),
              (torch.exp(v[-1]) * d, "exp(dA_cs[Q-1]) * dt_k: the whole chunk's decay at every position (one "
               "factor for the chunk, applied before or after the mma), where position k decays only from k "
               "to the chunk's end, exp(dA_cs[Q-1] - dA_cs[k])"),
              (torch.exp((v[-1] - v) * d), "exp((dA_cs[Q-1] - dA_cs[k]) * dt_k): dt inside the exp, where it "
               "multiplies it (dA_cumsum already holds dt * A)"),
              (torch.exp((v[-1] - v) * d) * d, "exp((dA_cs[Q-1] - dA_cs[k]) * dt_k) * dt_k: dt inside the "
               "exp as well as outside it (dA_cumsum already holds dt * A: dt belongs outside only)")]
    T = Q_ // 2
    while T >= 2:  # the decay to the end of k's own block of T positions (a chunk walked in blocks)
        ends = v[(torch.arange(Q_) // T) * T + T - 1]
        forms.append((torch.exp(ends - v) * d, f"exp(dA_cs[end of k's block] - dA_cs[k]) * dt_k, with the "
                      f"chunk walked in blocks of {T}: your decay runs to the end of position k's own block, "
                      f"where it runs to the chunk's end, dA_cs[Q-1] (taken from the whole chunk's row, not "
                      f"the block's)"))
        T //= 2
    for want, meaning in forms:
        if torch.allclose(w, want, rtol=1e-3, atol=1e-5):
            return f"{said} {meaning}.\n      " + _DECAY_HINT, None
    before = torch.cat([v.new_zeros(1), v[:-1]])     # dA_cs[k-1] (0 for k = 0): the decay taken exclusive
    forms += [(torch.exp(v[-1] - before) * d, "exp(dA_cs[Q-1] - dA_cs[k-1]) * dt_k: your decay starts one "
               "position early, so it includes position k's own step (dA_cs[k] already ends at k: the decay "
               "from k to the end is exp(dA_cs[Q-1] - dA_cs[k]))")]
    twice = torch.cumsum(v, 0)                       # dA_cumsum taken for the steps and summed again
    forms += [(torch.exp(twice[-1] - twice) * d, "exp(S[Q-1] - S[k]) * dt_k with S = cumsum(dA_cs): your "
               "kernel takes a running sum of dA_cumsum, which already is the running sum of dt * A")]
    for want, meaning in forms[-2:]:
        if torch.allclose(w, want, rtol=1e-3, atol=1e-5):
            return f"{said} {meaning}.\n      " + _DECAY_HINT, None
    scale = float(w[0] / right[0])
    if abs(scale - round(scale)) < 1e-3 and round(scale) >= 2 and torch.allclose(w, right * scale, rtol=1e-3,
                                                                                    atol=1e-6):
        k = round(scale)
        return (f"{said} exactly {k} times the right weights, at every position: the state is summed {k} "
                f"times (an mma line repeated, ct.mma(a, b, acc) added to acc again, or the state added to "
                f"itself).\n      Accumulate the chunk's sum once: state = ct.mma(xwᵀ, B, ct.zeros(...)), "
                f"stored as it is.", None)
    if abs(scale - 1) > 1e-3 and torch.allclose(w, right * scale, rtol=1e-3, atol=1e-6):
        end = float(v[-1]) + math.log(scale) if scale > 0 else None  # the end value the decay used
        if end is not None:
            if abs(end - float(d[-1])) < 1e-4:
                return (f"{said} the right weights times {scale:.4g}, exp(dt[Q-1] - dA_cs[Q-1]): your "
                        f"decay's end value is the last element of the dt row, where dA_cumsum's "
                        f"belongs.\n      " + _DECAY_HINT, None)
            at = [j for j in range(len(v) - 1) if abs(end - float(v[j])) < 1e-4]
            if at:
                return (f"{said} the right weights times {scale:.4g}, exp(dA_cs[{at[0]}] - dA_cs[Q-1]): your "
                        f"decay takes the chunk's end from position {at[0]} where it is the last, Q-1.\n"
                        f"      " + _DECAY_HINT, None)
        return (f"{said} the right weights times {scale:.4g}: the state is scaled by a constant (the decay's "
                f"end value, or a factor outside it).\n      " + _DECAY_HINT, None)
    kept = torch.isclose(w, right, rtol=1e-3, atol=1e-6)
    if bool(kept.any()) and bool((w[~kept].abs() < 1e-6).all()):
        idx = (~kept).nonzero().flatten()
        if int(idx[-1]) == len(w) - 1 and bool(kept[0]):       # the chunk's first part kept, the rest lost
            how = ("only the first part of the chunk reaches the state: a loop over parts of the chunk that "
                   "stops early, a store inside the loop before its last part is added, or a mask or a bound "
                   "that removes the later positions")
        elif bool(kept[-1]) and not bool(kept[0]):             # the last part kept
            how = ("only the last part of the chunk reaches the state: an accumulator restarted part way "
                   "(set to zeros inside a loop over parts), or a mask or a bound that removes the earlier "
                   "positions")
        else:
            how = "a mask or a bound removes positions that belong to the state"
        return (f"{said} right at positions {positions(kept)} and 0 at positions {positions(~kept)} of the "
                f"chunk: {how}.\n      Every "
                f"position k = 0..Q-1 of a chunk inside the sequence enters its state; dt_out is already 0 "
                f"past the sequence's end, so no mask is needed.", None)
    doubled = torch.isclose(w, 2 * right, rtol=1e-3, atol=1e-6)
    if bool(kept.any()) and bool(doubled.any()) and bool((kept | doubled).all()):
        return (f"{said} right at positions {positions(kept)} and twice the right weight at positions "
                f"{positions(doubled)} of the chunk: those positions are counted twice. In a loop over "
                f"parts of the chunk, ct.mma(a, b, acc) already returns acc + a @ b: adding acc to it again "
                f"(acc = acc + ct.mma(a, b, acc)) counts every earlier part twice.", None)
    return None


_LAYOUT_HINT = ("x is (b, l, h, p) and B is (b, l, g, n): a chunk is tile (bi, c, hi, 0) of x in tiles of "
                "(1, Q, 1, TP) and tile (bi, c, hi // HEADS_PER_GROUP, 0) of B in tiles of (1, Q, 1, TN): "
                "the index and the shape list one entry per axis, in the array's order.")
_TRANSPOSE_HINT = ("to turn a (Q, TP) tile into (TP, Q) use ct.transpose(t); t.reshape((TP, Q)) keeps the "
                   "elements in memory order and mixes positions with columns. The state is "
                   "ct.mma(ct.transpose(xw), B, acc): (TP, Q) @ (Q, TN).")


def _exact(base):
    """x and B small integers, dt in {0.5, 1}, no decay: every product and sum exact in bfloat16."""
    return replace(base, x=small_integers(base["x"], 51), B=small_integers(base["B"], 52),
                   dt_out=small_integers(base["dt_out"], 53, 1, 2) / 2,
                   dA_cumsum=torch.zeros_like(base["dA_cumsum"]))


def _kernel_diagnosis(kernel, backend: str, device: str, case: Case) -> Diagnosis:
    """The experiments of exercise 5, in the order they run (see :mod:`._experiments`)."""
    lab = Lab(_kernel_run(kernel, backend, device, case), _kernel_reference)

    def dA_with(b, position):  # each chunk's dA_cumsum at ``position`` set to its last value
        dA = b["dA_cumsum"].clone()
        dA[..., position] = dA[..., -1]
        return replace(b, dA_cumsum=dA)

    end_hint = ("the decay from position k to the chunk's END is exp(dA_cs[Q-1] - dA_cs[k]): the last "
                "element, ct.extract(dA_cs, (Q - 1,), shape=(1,)).")
    no_decay = lambda b: replace(b, dA_cumsum=torch.zeros_like(b["dA_cumsum"]))  # noqa: E731
    index_hint = ("dA_cumsum is (b, h, nchunks, Q): this block's decays are dA_cumsum[bi, hi, c, :], at the "
                  "HEAD hi (not the group) and (bi, hi, c, 0) in tiles of (1, 1, 1, Q).")
    steps = [
        misplaced({"states": ("batch entry", "chunk", "head", "", "")}),
        read_offset(["states"], "the state is a sum of products only: start the mma's accumulator from "
                    "ct.zeros((TP, TN), dtype=ct.float32) and add nothing else."),
        same_batch(["x", "B", "dt_out", "dA_cumsum"]),
        *exchanged_axes("B", {2: "group", 3: "state (n)"}, _LAYOUT_HINT),
        *exchanged_axes("x", {2: "head", 3: "head dim (p)"}, _LAYOUT_HINT),
        *read_at_group({"dt_out": 1, "dA_cumsum": 1, "x": 2}, lambda b: b["B"].shape[2]),
        read_cut_pn(["states"], "the state is (p, n): a mask of your own keeps rows i < p and columns j < n "
                    "(or load with padding_mode=ct.PaddingMode.ZERO and mask nothing)."),
        reshaped_for_transpose("B", lambda b: b["dt_out"].shape[3], _TRANSPOSE_HINT),
        reshaped_for_transpose("x", lambda b: b["dt_out"].shape[3], _TRANSPOSE_HINT),
        Confusion("dA_cumsum", "dt_out", "dt_out holds the step sizes dt_k, dA_cumsum the running sums of "
                  "dt * A: both are (b, h, nchunks, Q), loaded the same way from their own arrays."),
        Reading(_weights_probe, _read_weights),
        Experiment("With dA_cumsum multiplied by log2(e)",
                   lambda b: replace(b, dA_cumsum=b["dA_cumsum"] * LOG2E),
                   "your kernel computes 2**v where the decay is exp(v)", _EXP2_HINT, undo=True),
        Experiment("With dA_cumsum's sign flipped", lambda b: replace(b, dA_cumsum=-b["dA_cumsum"]),
                   "the decay's exponent has its sign flipped", _DECAY_HINT, undo=True),
        Experiment("With dA_cumsum replaced by dA_cs[Q-1] - dA_cumsum",
                   lambda b: replace(b, dA_cumsum=b["dA_cumsum"][..., -1:] - b["dA_cumsum"]),
                   "your weight is exp(dA_cs[k]), the decay from the chunk's START", _DECAY_HINT, undo=True),
        Experiment("With each chunk's first dA_cumsum set equal to its last", lambda b: dA_with(b, 0),
                   "so your decay takes the chunk's end from position 0 instead of Q-1", end_hint),
        Experiment("With each chunk's dA_cumsum at position Q-2 set equal to its last",
                   lambda b: dA_with(b, -2), "so your decay takes the chunk's end from position Q-2, one "
                   "short of the last", end_hint),
        Experiment("With B the same for every group",
                   lambda b: replace(b, B=b["B"][:, :, :1].expand_as(b["B"]).clone()),
                   "so your kernel reads B of the wrong group",
                   "head hi reads group hi // HEADS_PER_GROUP (consecutive heads share a group)."),
        Experiment("With x the same for every head (each a copy of head 0's)",
                   lambda b: same_for_every_head(b, "x", 2), "so your kernel reads x of another head",
                   "x is (b, l, h, p): chunk c of head hi is tile (bi, c, hi, 0) in tiles of (1, Q, 1, TP), "
                   "at the HEAD hi; only B is per group (hi // HEADS_PER_GROUP)."),
        Experiment("With the same decays in every chunk of every head (dA_cumsum = -0.3, -0.6, ...)",
                   _one_decay, "so your kernel reads the decay of another chunk, head or batch entry",
                   index_hint, then=decay_index(index_hint),
                   also=[scaled_up(_one_decay, ["x"])]),
        Reading(no_decay, _read_vanishing),
        Experiment("With dA_cumsum = 0 (every decay 1)", no_decay, "so the decay is wrong", _DECAY_HINT,
                   then=[rounded_decays(), *decay_power(_DECAY_HINT), *chunk_decay_one(_DECAY_HINT)]),
        Experiment("With dt_out the same for every head (each a copy of head 0's)",
                   lambda b: same_for_every_head(b, "dt_out", 1), "so your kernel reads dt of another head",
                   "dt_out is (b, h, nchunks, Q): this block's step sizes are at (bi, hi, c, 0) in tiles of "
                   "(1, 1, 1, Q), the HEAD hi, not the group."),
        Experiment("With dt = 1 at every position", lambda b: replace(b, dt_out=torch.ones_like(b["dt_out"])),
                   "so the factor dt is wrong (missing, or applied more than once: the check confirmed it, "
                   "with dt = 0.5 at every position your output is wrong)",
                   "each position enters the state as dt_k * x_k (outer) B_k: w_k = exp(dA_cs[Q-1] - "
                   "dA_cs[k]) * dt_k, once.",
                   controls=[lambda b: replace(b, dt_out=torch.full_like(b["dt_out"], 0.5))]),
        Experiment("With the same weight at every position (dA_cumsum = 0, dt = 1.5, 1.75, ... by head)",
                   lambda b: replace(b, dA_cumsum=torch.zeros_like(b["dA_cumsum"]),
                                     dt_out=by_head(b["dt_out"], 1)),
                   "so the weights w_k go wrong only when they differ from position to position: taken at "
                   "the wrong position, or applied along the wrong axis",
                   "w_k = exp(dA_cs[Q-1] - dA_cs[k]) * dt_k belongs to position k, a ROW of the (Q, TP) tile "
                   "of x: x * w[:, None], with dt_k the step of position k. (w[None, :] scales the columns, "
                   "the p axis; it only compiles when Q == TP.)"),
        Experiment("With dt = 0 at each chunk's last position", lambda b: _dt_zero_at(b, -1),
                   "so your kernel gets each chunk's last position wrong: leaves it out (a mask or a bound "
                   "off by one) or counts it twice (a term for it beside the mma)", "every position k = "
                   "0..Q-1 enters the state once, the last one too (its decay is exp(0) = 1).",
                   controls=[lambda b: _dt_zero_at(b, 0)]),
        Experiment("With dt = 0 at each chunk's first position", lambda b: _dt_zero_at(b, 0),
                   "so your kernel leaves out (or gets wrong) each chunk's first position: a mask or a bound "
                   "off by one", "every position k = 0..Q-1 enters the state, the first one too: check a "
                   "mask or a loop bound.", controls=[lambda b: _dt_zero_at(b, -1)]),
        Experiment("With B equal to 2x (so that every state is symmetric)", _symmetric,
                   "so your state is transposed",
                   "state[i, j] = sum_k w_k x_k[i] B_k[j]: its rows come from x and its columns from B, "
                   "ct.mma(ct.transpose(xw), B, acc) is (TP, Q) @ (Q, TN). (The transposed product "
                   "compiles only when TP == TN, as in this case.)", controls=[_one_group_per_head]),
        *chunk0_everywhere(("x", "B"), lambda b: b["dt_out"].shape[3],
                           "chunk c's positions are c*Q + k: x and B at tile (bi, c, ., 0) in tiles of Q "
                           "positions, or c*Q + k in a loop over single positions."),
        Reading(_x_impulse, _read_x_impulse),
        Reading(_chunk0_only, _read_chunk0_only),
        Experiment("With dt = 0 at the sequence's last step", _sequence_end_zero,
                   "so your kernel leaves out (or gets wrong) the sequence's last step: a mask or a bound "
                   "off by one at the ragged end", "the positions inside the sequence are c*Q + k < l, the "
                   "last one l - 1 included; dt_out is already 0 past the end, so no mask is needed.",
                   controls=[lambda b: _sequence_end_zero(b, "first")]),
        Linearity(["dt_out"], ["states"], "dt",
                  "your kernel applies a nonlinearity to dt or to the weights (softplus? exp? a clamp?)",
                  "dt_out arrives as the step sizes themselves: w_k = exp(dA_cs[Q-1] - dA_cs[k]) * dt_k."),
        Linearity(["x"], ["states"], "x", "your kernel applies a nonlinearity to x",
                  "the state is linear in x: (x * w[:, None])ᵀ @ B, nothing applied to x."),
        Linearity(["B"], ["states"], "B", "your kernel applies a nonlinearity to B",
                  "the state is linear in B: (x * w[:, None])ᵀ @ B, nothing applied to B."),
        low_precision(_exact, "x and B small integers, dt in {0.5, 1} and no decay", ["x", "B"],
                      "the mma's operands take x's dtype (x.dtype), its accumulator is float32",
                      controls=[no_decay]),
    ]
    prelude = [
        (lambda b: as_float32(b, ("x", "B")), "With the same inputs in float32 your output is right: only "
         "the bfloat16 inputs go wrong", "weight x by w in float32 (x.astype(ct.float32) * w[:, None]), "
         "cast the product to x.dtype only for the mma, and accumulate into a float32 tile."),
        (tame_decay, "With the same case at milder decay (dA_cumsum scaled into [-4, 0]) your output is "
         "right: your kernel breaks only where the decay is strong", _DECAY_HINT),
    ]
    first = [read_clamp(["states"],
                        "the state is a weighted sum, nothing clipped.")]
    return Diagnosis(lab, steps, prelude, first)


def _kernel_diagnose(kernel, backend: str, device: str, case: Case):
    return _kernel_diagnosis(kernel, backend, device, case)(dict(case.inputs))


def _padding_probe(kernel, case: Case, backend: str, device: str, expected: torch.Tensor, tol) -> Probe:
    """Re-run the learner's kernel with x and B zero-padded in memory (l to nchunks*Q, p to TP, n to TN), so
    that no load runs past an end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
        if not nan_on_cpu(_kernel_run(kernel, "cpu", "cpu", case), case.inputs):
            return False
        i = case.inputs
        x, B, dt_out, dA = i["x"], i["B"], i["dt_out"], i["dA_cumsum"]
        b, l, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        xp = torch.zeros(b, nc * Q, h, TP, dtype=x.dtype, device=device)
        xp[:, :l, :, :p] = x
        Bp = torch.zeros(b, nc * Q, g, TN, dtype=B.dtype, device=device)
        Bp[:, :l, :, :n] = B
        states = prefilled((b, nc, h, TP, TN), device=device)
        args = (xp, Bp, dt_out.clone(), dA.clone(), states, Q, TP, TN, h // g)
        run_kernel(CHECK_KERNEL, kernel, (b, nc, h), args, case, _KERNEL_NUDGE, backend)
        got = states[..., :p, :n].double().cpu()
        return bool(torch.isclose(got, expected.double(), rtol=tol[0], atol=tol[1]).all())

    label = ("loads without padding_mode=ZERO: on the CPU tile executor (which fills undetermined padding "
             "with NaN) your outputs hold NaN, and with the same inputs zero-padded in memory (no load past "
             "an end) your kernel is right")
    return Probe(label, confirms, _KERNEL_PAD_HINT)


def _run_kernel_cases(kernel, backend: str, device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_state

    cases = _cases(device, _KERNEL_SPECS)
    for case in cases:
        case.name += f", {backend} backend"
    for case in cases:
        i = case.inputs
        x, B, dt_out, dA = i["x"], i["B"], i["dt_out"], i["dA_cumsum"]
        b, l, h, p = x.shape
        g, n = B.shape[2], B.shape[3]
        nc, Q = dt_out.shape[2], dt_out.shape[3]
        expected = chunk_state(x.cpu(), B.cpu(), dt_out.cpu(), dA.cpu())
        states = prefilled((b, nc, h, p, n), device=device)
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        args = (x.clone(), B.clone(), dt_out.clone(), dA.clone(), states, Q, TP, TN, h // g)
        run_kernel(CHECK_KERNEL, kernel, (b, nc, h), args, case, _KERNEL_NUDGE, backend)
        states = states.cpu()
        scale = max(1.0, float(expected.abs().max()))
        if x.dtype == torch.bfloat16:  # operands may be rounded to bf16 for the tensor cores (as mamba_ssm)
            rtol, atol = 2e-2, 1e-2 * scale
        else:
            rtol, atol = 1e-4, 1e-5 * scale
        compare(
            CHECK_KERNEL,
            states,
            expected,
            case,
            name="states",
            rtol=rtol,
            atol=atol,
            hint=_KERNEL_NUDGE,
            probes=[_padding_probe(kernel, case, backend, device, expected, (rtol, atol))],
            diagnose=once(_kernel_diagnose, kernel, backend, device, case),
            axes=("batch entry", "chunk", "head", "", ""),
            extra=unwritten,
        )
    return cases


def check_chunk_state_kernel(kernel) -> None:
    """Launch the learner's ``chunk_state_kernel`` on hidden cases: on the GPU when usable, and always on the
    CPU tile executor.

    Signature: ``kernel(x, B, dt_out, dA_cumsum, states, Q, TP, TN, HEADS_PER_GROUP)`` (the last four are
    ``ct.Constant[int]``), grid ``(b, nchunks, h)``; ``states`` (b, nchunks, h, p, n) float32 is filled with
    a sentinel (-2**13) before the launch.
    """
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK_KERNEL,
        lambda backend, device: _run_kernel_cases(kernel, backend, device),
        "ragged last chunks, p and n below the tile sizes TP and TN, g in {1, 2, 3}, "
        "Q in {8, 16}, dt*A down to -1e3, bfloat16 inputs",
    )
