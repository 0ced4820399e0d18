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
    chunk_decay_one,
    chunk_decays,
    close,
    counted,
    decay_index,
    decay_power,
    decayed_by_chunk,
    exchanged_axes,
    low_precision,
    misplaced,
    nan_on_cpu,
    once,
    positions,
    read_alternating_transpose,
    read_clamp,
    read_one_slice,
    read_transposed_store,
    replace,
    same_batch,
    same_for_every_head,
    scaled_up,
    small_integers,
    tame_decay,
)
from ._harness import (
    Case,
    Probe,
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


def state_passing_backward(dS_out, dA_cumsum, chunk_init_states, dfinal_states):
    """The reverse state recurrence in float64: ``(dstates, ddA_last, dinitial_states)``, the gradients of
    :func:`mamba2_tutorial.reference.state_passing`'s inputs (a test checks it against autograd)."""
    dS_out, dA, S, dfinal = (t.detach().cpu().double() for t in (dS_out, dA_cumsum, chunk_init_states,
                                                                   dfinal_states))
    g = torch.exp(dA[..., -1])  # (b, h, nchunks): the decay across each chunk
    dS = dfinal.clone()
    dstates = torch.empty_like(dS_out)
    ddA_last = torch.empty_like(g)
    for c in range(dS_out.shape[1] - 1, -1, -1):
        dstates[:, c] = dS  # the gradient arriving from the chunks after c
        ddA_last[:, :, c] = g[:, :, c] * (dS * S[:, c]).sum((-1, -2))
        dS = g[:, :, c, None, None] * dS + dS_out[:, c]
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


_KEYS = ("dS_out", "dA_cumsum", "chunk_init_states", "dfinal_states")


def _run(kernel, backend: str, device: str, case: Case):
    """Launch the learner's kernel on any inputs {dS_out, dA_cumsum, chunk_init_states, dfinal_states}."""

    def run(inputs):
        dS_out, dA, S, dfinal = (inputs[k].float().to(device) for k in _KEYS)
        b, nc, h, p, n = dS_out.shape
        dstates = prefilled((b, nc, h, p, n), device=device)
        ddA_last = prefilled((b, h, nc), device=device)
        dinit = prefilled((b, h, p, n), device=device)
        args = (dS_out, dA, S, dfinal, dstates, ddA_last, dinit, dA.shape[-1], next_power_of_two(p),
                next_power_of_two(n))
        run_kernel(CHECK, kernel, (b, h), args, case, _NUDGE, backend)
        return {"dstates": dstates, "ddA_last": ddA_last, "dinitial_states": dinit}

    return run


def _reference(inputs):
    dS_out, dA, S, dfinal = (inputs[k] for k in _KEYS)
    dstates, ddA_last, dinit = state_passing_backward(dS_out, dA[:, :, : dS_out.shape[1]], S, dfinal)
    return {"dstates": dstates, "ddA_last": ddA_last, "dinitial_states": dinit}


def _impulse(base):
    """No d final_states, no decay, and a dS_out only in chunk 2 of 4."""
    dS_out = base["dS_out"]
    _, _, h, p, n = dS_out.shape
    one = torch.zeros(1, 4, h, p, n)
    one[0, 2] = dS_out[0, 0]
    return replace(base, dS_out=one, dA_cumsum=torch.zeros(1, h, 4, base["dA_cumsum"].shape[-1]),
                   chunk_init_states=torch.zeros(1, 4, h, p, n), dfinal_states=torch.zeros(1, h, p, n))


def _read_impulse(lab, inputs, got):
    dstates, own = got["dstates"][0], inputs["dS_out"][0, 2]
    if not bool(torch.isfinite(dstates).all()):
        return None
    held = dstates.flatten(1).abs().amax(1) > 1e-6
    if not all(close(dstates[c], own) for c in held.nonzero().flatten().tolist()):
        return None  # the chunks hold something else than chunk 2's dS_out: not a matter of order
    said = (f"With no d final_states, no decay and a dS_out only in chunk 2 (of 0..3), your dstates holds it "
            f"in chunks {positions(held)}, where the gradient reaches chunks 0 and 1 (the chunks BEFORE 2)")
    if held.tolist() == [True, True, True, False]:
        return (f"{said}: chunk 2's dstates already includes chunk 2's own dS_out, so you store dS after the "
                f"update.\n      dstates[c] is the gradient arriving from the chunks after c: store dS "
                f"first, then dS = g * dS + dS_out[c].", None)
    return None


def _reversed_chunks(b):
    """The chunks in reverse order (a kernel that walks them first to last is right on this, reordered)."""
    return replace(b, dS_out=b["dS_out"].flip(1), dA_cumsum=b["dA_cumsum"].flip(2),
                   chunk_init_states=b["chunk_init_states"].flip(1))


def _chunks_back_in_order(out):
    return {"dstates": out["dstates"].flip(1), "ddA_last": out["ddA_last"].flip(2),
            "dinitial_states": out["dinitial_states"]}


def _square(base, symmetric: bool):
    """The case with p = n (the smaller of the two), and every state and gradient symmetric (``symmetric``)
    or as they are: a kernel that pairs dS with a transposed S is right only on the symmetric one."""
    m = min(base["dS_out"].shape[-2:])
    out = {}
    for k in ("dS_out", "chunk_init_states", "dfinal_states"):
        t = base[k][..., :m, :m].contiguous()
        out[k] = t + t.transpose(-1, -2) if symmetric else t
    return replace(base, **out)


def _read_dfinal_not_carried(hint: str):
    """With dS_out = 0 (only d final_states to carry): dstates all 0 where they are not, so d final_states
    never enters the carried gradient; and when dinitial_states is dfinal_states as it is, it is added after
    the loop instead."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        if not bool((got["dstates"].abs() < 1e-6).all()) or bool((want["dstates"].abs() < 1e-6).all()):
            return None
        after = close(got["dinitial_states"], inputs["dfinal_states"], lab.rtol, lab.atol)
        return ("With dS_out = 0 (only d final_states to carry), your dstates are 0 in every chunk: "
                "dfinal_states never enters the gradient your kernel carries through the chunks"
                + (", and your dinitial_states is dfinal_states as it is: it is added after the loop instead "
                   "of starting the carry" if after else "") + f".\n      {hint}", None)

    return read


def _square_dfinal_only(base):
    """p = n, every dS_out 0: dfinal_states is the only gradient carried from chunk to chunk."""
    square = _square(base, False)
    return replace(square, dS_out=torch.zeros_like(square["dS_out"]))


def _one_chunk_of_S(base):
    """chunk_init_states zero outside the last chunk (None with one chunk): ddA_last is 0 in every other."""
    S = base["chunk_init_states"]
    if S.shape[1] < 2:
        return None
    only = torch.zeros_like(S)
    only[:, -1] = S[:, -1]
    return replace(base, chunk_init_states=only)


def _read_one_chunk_of_S(lab, inputs, got):
    want = lab.reference(inputs)["ddA_last"]
    ddA = got["ddA_last"]  # (b, h, nchunks)
    if not bool(torch.isfinite(ddA).all()) or not close(ddA[..., -1], want[..., -1], lab.rtol, lab.atol):
        return None
    others = ddA[..., :-1].abs().flatten(0, 1).amax(0) > 1e-6
    if not bool(others.any()):
        return None
    last = ddA.shape[-1] - 1
    return (f"With chunk_init_states zero outside the last chunk ({last}), your ddA_last of that chunk is "
            f"right but it is not 0 in chunks {positions(others)}: ddA_last of chunk c takes in the states "
            f"of other chunks (a running sum over the chunks walked?).\n      Each chunk's ddA_last is its "
            f"own: g_c · sum(dS ∘ S_c), stored once per chunk, nothing carried from one chunk to the next.",
            None)


def _read_ddA_factor(lab, inputs, got):
    """Whether ddA_last is the right one times a function of the chunk's decay (an extra factor)."""
    want = lab.reference(inputs)["ddA_last"]
    ddA = got["ddA_last"].double()
    a = inputs["dA_cumsum"][..., : ddA.shape[-1], -1].double()
    keep = want.abs() > 1e-3 * max(1e-12, float(want.abs().max()))
    if not bool(torch.isfinite(ddA).all()) or int(keep.sum()) < 2:
        return None
    ratio = ddA[keep] / want[keep]
    forms = [("a = dA_cumsum[bi, hi, c, Q-1], the exponent itself", a),
             ("g_c once more (g_c squared in all)", torch.exp(a)), ("1 / g_c (no g_c in all)", torch.exp(-a)),
             ("-1 (the sign flipped)", -torch.ones_like(a)),
             ("1 - g_c (a sigmoid's derivative, g (1 - g), in place of exp's)", 1 - torch.exp(a)),
             ("log2(e) = 1.4427: the exp2 form's scale kept in the derivative (g_c = exp(a) = exp2(a * "
              "log2(e)) is one function of a, whose derivative is g_c, with no log2(e))",
              torch.full_like(a, 1.4426950408889634)),
             ("ln(2) = 0.6931: the derivative of 2**a (2**a * ln 2) where g_c = exp(a)",
              torch.full_like(a, 0.6931471805599453)),
             ("exp(g_c) / g_c: exp applied to g_c once more (exp(g_c) where g_c = exp(a) belongs)",
              torch.exp(torch.exp(a) - a)),
             ("a / g_c: the log-decay a = dA_cumsum[bi, hi, c, Q-1] in place of the decay g_c = exp(a)",
              a * torch.exp(-a))]
    constant = float(ratio[0])
    if abs(constant - 1.0) > 1e-3 and bool(torch.isclose(ratio, torch.full_like(ratio, constant),
                                                          rtol=1e-3).all()):
        forms.append((f"{constant:.4g} (a mean for the sum? a scale?)",
                      torch.full_like(a, constant)))
    for name, factor in forms:
        if bool(torch.isclose(ratio, factor[keep], rtol=1e-3, atol=1e-6).all()):
            return (f"Your ddA_last is the right value times {name}, in every chunk.\n      The derivative "
                    f"of g_c = exp(a) by a is g_c itself: ddA_last[bi, hi, c] = g_c · sum(dS ∘ S_c), no "
                    f"other factor.", None)
    return None


def _mixed_or_missed(experiment, at_last, rule: str):
    """``experiment`` (right with every tile nonzero at element (0, 0) only: no element mixed in) unless the
    kernel's ddA_last is 0 with them at the last element (p-1, n-1) only (``at_last``): then the reduction
    leaves elements out, which the first change cannot see either."""

    def run(lab, base):
        found = experiment(lab, base)
        if found is None:
            return None
        last = at_last(base)
        got = lab.run(last)
        if got is None or lab.agrees(got, lab.reference(last)):
            return found
        if float(got["ddA_last"].abs().max()) < 1e-6:
            return ("With every gradient and state nonzero only at element (0, 0) your ddA_last is right, "
                    "but with them only at the last element (p-1, n-1) it is 0: the reduction in ddA_last "
                    "leaves "
                    "out elements of the tile (a loop over its rows or columns that stops short, range(TP) "
                    "where range(TN) belongs; one row or column picked out of a partial sum; or a mask of "
                    "the wrong size).\n      " + rule
                    + ": one elementwise product dS * S_c, summed over the whole (TP, TN) tile, "
                    "ct.sum(dS * S).", None)
        return found

    return run


def _read_dstates_forms(lab, inputs, got):
    """dstates that are another tile than the carried gradient dS: the forward state S_c stored in its place,
    or dS decayed by g_c before the store."""
    want = lab.reference(inputs)["dstates"]
    dstates = got["dstates"].double()
    if close(dstates, want, lab.rtol, lab.atol):
        return None
    if close(dstates, inputs["chunk_init_states"].double(), lab.rtol, lab.atol):
        return ("Your dstates holds chunk_init_states, the forward state S_c entering each chunk, where "
                "the gradient belongs: dstates[c] is dL/dS_c, the carried dS as it arrives at chunk c (the "
                "forward kernel's store of the state, carried over).\n      Store the carried gradient: "
                "ct.store(dstates, (bi, c, hi, 0, 0), dS), then dS = g * dS + dS_out[bi, c, hi].", None)
    g = chunk_decays(inputs)
    if bool((g - 1).abs().max() > 1e-3) and close(dstates, want * g, lab.rtol, lab.atol):
        return ("Your dstates[c] is the right one times chunk c's decay g_c = exp(dA_cumsum[bi, hi, c, "
                "Q-1]): the carried gradient is decayed before it is stored, where dstates[c] is dS as it "
                "arrives from the chunks after c.\n      Store dS first, then dS = g * dS + dS_out[bi, c, "
                "hi].", None)
    return None


def _read_dinitial_factor(lab, inputs, got):
    """A reading of the base case itself: dstates and ddA_last right, dinitial_states the right one times a
    decay (chunk 0's, once more) or divided by it."""
    want = lab.reference(inputs)
    if not all(close(got[k], want[k], lab.rtol, lab.atol) for k in ("dstates", "ddA_last")):
        return None
    g0 = torch.exp(inputs["dA_cumsum"][:, :, 0, -1].double())[..., None, None]  # (b, h, 1, 1)
    for factor, said in ((g0, "times g_0, chunk 0's decay, once more"), (1 / g0, "divided by g_0, chunk 0's "
                                                                         "decay")):
        if close(got["dinitial_states"], want["dinitial_states"] * factor, lab.rtol, lab.atol):
            return (f"Your dstates and ddA_last are right, but your dinitial_states is the right one {said}: "
                    f"the carried dS already holds chunk 0's decay when the loop ends.\n      Store "
                    f"dinitial_states = dS as the loop leaves it, nothing applied after.", None)
    extra = got["dinitial_states"].double() - want["dinitial_states"]
    tiles = ((inputs["dfinal_states"], "dfinal_states"), (inputs["dS_out"][:, 0], "chunk 0's dS_out"),
             (inputs["dS_out"][:, -1], "the last chunk's dS_out"))
    for tile, said in tiles:
        t = tile.double()
        if not bool(t.abs().max() > 0):
            continue
        if close(extra, t, lab.rtol, lab.atol):
            return (f"Your dstates and ddA_last are right, but your dinitial_states is the right one plus "
                    f"{said}, undecayed: it is added once more after the loop (the carried dS already holds "
                    f"it, decayed, where it belongs).\n      Store dinitial_states = dS as the loop leaves "
                    f"it, nothing added after.", None)
        if close(extra, -t, lab.rtol, lab.atol):
            return (f"Your dstates and ddA_last are right, but your dinitial_states is the right one minus "
                    f"{said}: that term is missing from it (left out, or taken away once more).\n      "
                    f"dinitial_states is dS after chunk 0's whole update, dS = g_0 * dS + dS_out[bi, 0, hi]: "
                    f"a chunk 0 taken apart from the loop needs both terms, and nothing follows the update.",
                    None)
    return None


def _read_ddA_pairs_dfinal(lab, inputs, got):
    """A reading of the base case: dstates and dinitial_states right, ddA_last[c] = g_c · sum(dF * S_c) with
    dF = dfinal_states in every chunk, where the gradient arriving at chunk c belongs."""
    want = lab.reference(inputs)
    if not all(close(got[k], want[k], lab.rtol, lab.atol) for k in ("dstates", "dinitial_states")):
        return None
    nc = got["ddA_last"].shape[-1]
    g = torch.exp(inputs["dA_cumsum"][:, :, :nc, -1].double())  # (b, h, nc)
    S = inputs["chunk_init_states"].double()  # (b, nc, h, p, n)
    dF = inputs["dfinal_states"].double()  # (b, h, p, n)
    paired = g * (dF[:, None] * S).sum((-1, -2)).transpose(1, 2)  # (b, h, nc)
    if close(paired, want["ddA_last"]) or not close(got["ddA_last"].double(), paired, lab.rtol, lab.atol):
        return None
    return ("Your dstates are right, but your ddA_last pairs S_c with d final_states in every chunk: "
            "ddA_last[c] = g_c · sum(dfinal_states * S_c), where the gradient arriving at chunk c belongs "
            "(the carried dS, as you store it in dstates).\n      ddA_last[bi, hi, c] = g_c · sum(dS ∘ "
            "S_c), with the carried dS, not the tile it started from.", None)


def _own_gradient_last(base):
    """No d final_states and dS_out zero outside the last chunk: the gradient arriving at the last chunk is
    0, so its ddA_last is 0 (and every chunk's dstates is 0 there)."""
    dS_out = torch.zeros_like(base["dS_out"])
    dS_out[:, -1] = base["dS_out"][:, -1]
    return replace(base, dS_out=dS_out, dfinal_states=torch.zeros_like(base["dfinal_states"]))


def _read_own_gradient_last(lab, inputs, got):
    ddA = got["ddA_last"][..., -1]
    if not bool(torch.isfinite(ddA).all()) or not bool((ddA.abs() > 1e-6).any()):
        return None
    if not close(got["dstates"][:, -1], torch.zeros_like(got["dstates"][:, -1])):
        return None  # the gradient stored for the last chunk is not 0 either: not a matter of ddA_last
    said = ("With d final_states = 0 and dS_out zero outside the last chunk, the gradient arriving at the "
            "last chunk is 0 (your dstates there is 0, as it should), so its ddA_last is 0; yours is not")
    rule = ("ddA_last[bi, hi, c] = g_c · sum(dS ∘ S_c) with dS as it arrives from the chunks after c: the "
            "same dS you store into dstates[c], before dS_out[c] is added.")
    g = torch.exp(inputs["dA_cumsum"][..., -1, -1].double())  # (b, h): the last chunk's decay
    S, own = inputs["chunk_init_states"][:, -1].double(), inputs["dS_out"][:, -1].double()  # (b, h, p, n)
    if close(ddA.double(), g * (own * S).sum((-1, -2)), lab.rtol, lab.atol):
        return (f"{said}: it is g_c · sum(dS_out[c] ∘ S_c), so your ddA_last pairs S_c with a gradient that "
                f"includes chunk c's own dS_out.\n      {rule}", None)
    if close(ddA.double(), g * (S * S).sum((-1, -2)), lab.rtol, lab.atol):
        return (f"{said}: it is g_c · sum(S_c ∘ S_c), so your ddA_last pairs S_c with itself where the "
                f"gradient belongs.\n      {rule}", None)
    return (f"{said}: your ddA_last pairs S_c with something other than the gradient arriving at chunk c.\n"
            f"      {rule}", None)


def _read_decay_probe(decay_hint):
    from .state_passing import read_decay

    def read(lab, inputs, got):
        dstates, dinit = got["dstates"][0], got["dinitial_states"][0]  # (nc, h, p, n), (h, p, n)
        return read_decay(list(dstates.flip(0)), dinit, "no dS_out, no states, d final_states all ones",
                          decay_hint)

    return read


def _exact(base):
    """Small integer gradients and states, no decay: every product and sum exact in bfloat16."""
    return replace(base, **{k: small_integers(base[k], 81 + i) for i, k in enumerate(
        ("dS_out", "chunk_init_states", "dfinal_states"))}, dA_cumsum=torch.zeros_like(base["dA_cumsum"]))


def _diagnosis(kernel, backend: str, device: str, case: Case) -> Diagnosis:
    """The experiments of exercise 8, in the order they run (see :mod:`._experiments`)."""
    from .state_passing import decay_experiments, decay_probe, one_decay, read_last_store

    lab = Lab(_run(kernel, backend, device, case), _reference)
    zero = torch.zeros_like
    ddA_rule = "ddA_last[bi, hi, c] = g_c · sum(dS ∘ S_c), with dS as it arrives from the chunks after c"

    def no_dS_out(b):
        return replace(b, dS_out=zero(b["dS_out"]))

    def no_decay(b):
        return replace(b, dA_cumsum=zero(b["dA_cumsum"]))

    def one_element_at(i, j):  # every gradient and state nonzero at element (i, j) only
        def make(b):
            p, n = b["dS_out"].shape[-2], b["dS_out"].shape[-1]
            out = {}
            for k in ("dS_out", "chunk_init_states", "dfinal_states"):
                t = zero(b[k])
                t[..., i % p, j % n] = b[k][..., i % p, j % n]
                out[k] = t
            return replace(b, **out)
        return make

    own_gradient = Reading(_own_gradient_last, _read_own_gradient_last)
    ddA_steps = [
        Reading(lambda b: b, _read_ddA_pairs_dfinal),
        Experiment("With dS_out = 0 and every decay 1", lambda b: no_decay(no_dS_out(b)),
                   "so ddA_last pairs S_c with dS after chunk c's update (right only when the update changes "
                   "nothing: with either change alone it is wrong)", ddA_rule + ": store the pair before "
                   "dS = g * dS + dS_out[c].", controls=[no_dS_out, no_decay]),
        Experiment("With every decay 1 (dA_cumsum = 0)", no_decay, "so the factor g in ddA_last is wrong",
                   ddA_rule + ": S_c+1 = g · S_c + s_c, so d a_last = g · <dS, S_c>."),
        Experiment("With chunk_init_states the same for every chunk",
                   lambda b: replace(b, chunk_init_states=b["chunk_init_states"][:, :1].expand_as(
                       b["chunk_init_states"]).clone()),
                   "so ddA_last pairs dS with the state of another chunk",
                   ddA_rule + ": S_c is chunk_init_states[bi, c, hi], the state ENTERING chunk c."),
        Experiment("With chunk_init_states the same for every head",
                   lambda b: replace(b, chunk_init_states=b["chunk_init_states"][:, :, :1].expand_as(
                       b["chunk_init_states"]).clone()),
                   "so ddA_last pairs dS with the state of another head (a fixed head, or the group's)",
                   ddA_rule + ": S_c is chunk_init_states[bi, c, hi], this block's own head hi; "
                   "chunk_init_states is (b, nchunks, h, p, n), the head on axis 2."),
        Experiment("With p = n and every state and gradient symmetric", lambda b: _square(b, True),
                   "so your kernel pairs dS with a transposed state (the check confirmed it: with p = n and "
                   "states that are not symmetric, your output is wrong)",
                   ddA_rule + ": dS and S_c are both (TP, TN) tiles, multiplied element by element, "
                   "ct.sum(dS * S), with no ct.transpose (it compiles only when TP == TN, as here).",
                   controls=[lambda b: _square(b, False)]),
        Reading(_one_chunk_of_S, _read_one_chunk_of_S),
        own_gradient,
        Reading(lambda b: b, _read_ddA_factor),
        _mixed_or_missed(Experiment(
            "With every gradient and state nonzero only at element (0, 0)", one_element_at(0, 0),
            "so the reduction in ddA_last mixes elements",
            ddA_rule + ": one elementwise product dS * S_c, summed over the whole (TP, TN) tile, "
            "ct.sum(dS * S)."), one_element_at(-1, -1), ddA_rule),
        low_precision(_exact, "small integer gradients and states and no decay",
                      ["dS_out", "chunk_init_states", "dfinal_states"],
                      "the products dS * S and their sum in ddA_last are float32", controls=[no_decay]),
    ]
    decay_hint = "the decay across chunk c is g_c = exp(dA_cumsum[bi, hi, c, Q-1]), a number in (0, 1]."
    carried_hint = decay_hint + " It multiplies the carried dS (dS = g * dS + dS_out[c]) and ddA_last."
    dfinal_hint = ("the carried gradient starts from dfinal_states[bi, hi] (a zero-padded (1, 1, TP, TN) "
                   "load) before the loop: it is the gradient of the state leaving the last chunk.")
    own_hint = ("after storing, dS = g * dS + dS_out[bi, c, hi]: the chunk's own dS_out added once, "
                "undecayed (it asks about the state ENTERING chunk c).")
    index_hint = ("dA_cumsum is (b, h, nchunks, Q): the decay of chunk c of head hi is dA_cumsum[bi, hi, c, "
                  "Q-1] (mind the axis order: it differs from dS_out's).")
    steps = [
        misplaced({"dstates": ("batch entry", "chunk", "head", "", ""),
                   "ddA_last": ("batch entry", "head", "chunk"),
                   "dinitial_states": ("batch entry", "head", "", "")}),
        *chunk_decay_one(carried_hint),
        same_batch(list(_KEYS)),
        *exchanged_axes("chunk_init_states", {1: "chunk", 2: "head"}, ddA_rule + ": S_c is "
                        "chunk_init_states[bi, c, hi], tile (bi, c, hi, 0, 0): dS_out's axis order, not "
                        "dA_cumsum's."),
        *exchanged_axes("dS_out", {1: "chunk", 2: "head"}, "dS_out is (b, nchunks, h, p, n): chunk c of head "
                        "hi is tile (bi, c, hi, 0, 0), not dA_cumsum's (bi, hi, c) order."),
        read_one_slice({"ddA_last": ("", "", "chunk")}, ddA_rule + " for every chunk, the last one "
                       "included: no chunk is special."),
        Experiment("With dS_out negated", lambda b: replace(b, dS_out=-b["dS_out"]),
                   "your kernel subtracts chunk c's own dS_out", "dS = g * dS + dS_out[bi, c, hi]: the "
                   "chunk's own gradient is added.", undo=True),
        Reading(lambda b: b, _read_dinitial_factor),
        Reading(lambda b: b, _read_dstates_forms),
        Reading(lambda b: b, _read_ddA_factor),
        read_last_store("dstates", "dinitial_states", "it is stored before chunk 0's update (inside the "
                        "loop, or before the update)", "dinitial_states is the gradient that reaches the "
                        "state ENTERING chunk 0, through chunk 0's decay: store it once, after the loop, "
                        "when every chunk has been walked."),
        Confusion("chunk_init_states", "dS_out", ddA_rule + ": S_c is chunk_init_states[bi, c, hi], the "
                  "state entering chunk c; dS_out[bi, c, hi] is a gradient, added to dS."),
        *decay_experiments(decay_hint),
        Experiment("With the same decays in every chunk of every head (dA_cumsum = -0.3, -0.6, ...)",
                   one_decay, "so your kernel reads the decay of another chunk, head or batch entry",
                   index_hint, then=decay_index(index_hint),
                   also=[scaled_up(one_decay, ["dS_out", "dfinal_states"])]),
        Experiment("With chunk_init_states = 0 (so ddA_last must be 0)",
                   lambda b: replace(b, chunk_init_states=zero(b["chunk_init_states"])),
                   "so ddA_last is what goes wrong (dstates and dinitial_states do not depend on it)",
                   ddA_rule + ".", then=ddA_steps),
        Experiment("With p = n and every state and gradient symmetric", lambda b: _square(b, True),
                   "so your kernel transposes a state or a gradient (the check confirmed it: with p = n and "
                   "tiles that are not symmetric, your output is wrong)",
                   "dS_out, dfinal_states, chunk_init_states and the carried dS are all (p, n) tiles, "
                   "(TP, TN), used as they are loaded: no ct.transpose (it compiles only when TP == TN, as "
                   "here).", controls=[lambda b: _square(b, False)],
                   then=[read_transposed_store(lambda b: _square(b, False),
                                               ["dstates", "ddA_last", "dinitial_states"]),
                         read_alternating_transpose(
                       "dstates", 1, _square_dfinal_only, "With p = n and every dS_out 0 (only dfinal_states "
                       "carried)", "the carried gradient dS", "dS stays a (TP, TN) tile from chunk to chunk: "
                       "dS = g * dS + dS_out[c], no ct.transpose of it.")]),
        Linearity(["dS_out", "dfinal_states"], ["dstates", "ddA_last", "dinitial_states"], "the gradients",
                  "your kernel applies a nonlinearity to the carried gradient (a clip? an activation?), or "
                  "multiplies two gradient tiles (a gradient read where S_c belongs?)",
                  "the backward recurrence is linear in the gradients: dS = g * dS + dS_out[c], "
                  "ddA_last = g * sum(dS * S_c), nothing applied to dS."),
        Experiment("With dfinal_states equal to the last chunk's dS_out",
                   lambda b: replace(b, dfinal_states=b["dS_out"][:, -1].clone()),
                   "so your kernel starts the carried gradient from dS_out where dfinal_states belongs",
                   "the carried gradient starts from dfinal_states[bi, hi], its own array: ct.load("
                   "dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN))."),
        Experiment("With dS_out the same in every chunk (each a copy of chunk 0's)",
                   lambda b: replace(b, dS_out=b["dS_out"][:, :1].expand_as(b["dS_out"]).clone()),
                   "so your kernel reads dS_out of another chunk than c",
                   "chunk c's own gradient is dS_out[bi, c, hi], at the chunk c the loop is at (c = "
                   "nchunks - 1 - i when the loop counter i runs forward)."),
        Experiment("With every chunk's dS_out equal to dfinal_states",
                   lambda b: replace(b, dS_out=b["dfinal_states"][:, None].expand_as(b["dS_out"]).clone()),
                   "so your kernel reads dfinal_states where chunk c's own dS_out belongs",
                   "chunk c's own gradient is dS_out[bi, c, hi]: ct.load(dS_out, (bi, c, hi, 0, 0), "
                   "shape=(1, 1, 1, TP, TN)) inside the loop."),
        Experiment("With dfinal_states = 0", lambda b: replace(b, dfinal_states=zero(b["dfinal_states"])),
                   "so the path of d final_states is wrong", dfinal_hint,
                   then=[*counted("dfinal_states", "d final_states", dfinal_hint),
                         Reading(no_dS_out, _read_dfinal_not_carried(dfinal_hint))]),
        Experiment("With dS_out = 0", no_dS_out, "so the term of chunk c's own dS_out is wrong", own_hint,
                   then=[own_gradient, *counted("dS_out", "chunk c's own dS_out", own_hint, chunk_axis=1),
                         AsIf("each chunk's dS_out multiplied by its decay g_c", decayed_by_chunk("dS_out"),
                              "your kernel decays chunk c's own dS_out too: g * (dS + dS_out[c]), where only "
                              "the carried dS is decayed", own_hint),
                         Experiment("With dS_out the same for every head (each a copy of head 0's)",
                                    lambda b: same_for_every_head(b, "dS_out", 2),
                                    "so your kernel reads dS_out of another head than its own",
                                    "dS_out is (b, nchunks, h, p, n): this block's is dS_out[bi, c, hi], the "
                                    "head on axis 2.")]),
        Reading(lambda b: decay_probe(b, {"zero": "dS_out chunk_init_states", "start": "dfinal_states"}),
                _read_decay_probe(decay_hint)),
        Experiment("With dA_cumsum = 0 (every decay 1)", no_decay, "so the decay is wrong", carried_hint,
                   then=decay_power(carried_hint)),
        Experiment("With the chunks given in reverse order (and your outputs put back in order)",
                   _reversed_chunks, "so your kernel walks the chunks from the first to the last",
                   "the gradient flows backwards: start at the LAST chunk, where d final_states enters: "
                   "for i in range(nchunks): c = nchunks - 1 - i.", undo=True,
                   unmake=_chunks_back_in_order),
        Reading(_impulse, _read_impulse),
        low_precision(_exact, "small integer gradients and states and no decay",
                      ["dS_out", "chunk_init_states", "dfinal_states"],
                      "dS and the products in ddA_last are float32 tiles", controls=[no_decay]),
    ]
    prelude = [(tame_decay, "With the same case at milder decay (dA_cumsum scaled into [-4, 0]) your output "
                "is right: your kernel breaks only where the decay is strong",
                "exp of a large negative number is 0, which is right; look for an exponent that is "
                "positive, a division or a clamp.")]
    first = [read_clamp(["dstates", "ddA_last", "dinitial_states"],
                        "the backward recurrence is linear: nothing in it is clipped.")]
    return Diagnosis(lab, steps, prelude, first)


def _diagnose(kernel, backend: str, device: str, case: Case):
    return _diagnosis(kernel, backend, device, case)(dict(case.inputs))


def _padding_probe(kernel, case: Case, backend: str, device: str, expected) -> Probe:
    """Re-run the learner's kernel with every (p, n) array zero-padded in memory to (TP, TN), so that no
    load runs past an end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
        if not nan_on_cpu(_run(kernel, "cpu", "cpu", case), case.inputs):
            return False
        dS_out, dA, S, dfinal = (case.inputs[k] for k in _KEYS)
        p, n = dS_out.shape[-2:]
        TP, TN = next_power_of_two(p), next_power_of_two(n)

        def padded(t):
            return torch.nn.functional.pad(t, (0, TN - n, 0, TP - p))

        got = _run(kernel, backend, device, case)({"dS_out": padded(dS_out), "dA_cumsum": dA,
                                                   "chunk_init_states": padded(S),
                                                   "dfinal_states": padded(dfinal)})
        got = {k: (v[..., :p, :n] if v.dim() > 3 else v) for k, v in got.items()}
        return all(torch.isclose(got[k].double().cpu(), e.double(), rtol=1e-4, atol=1e-5 * max(
            1.0, float(e.abs().max()))).all() for k, e in zip(("dstates", "ddA_last", "dinitial_states"),
                                                              expected))

    label = ("loads without padding_mode=ZERO: on the CPU tile executor (which fills undetermined padding "
             "with NaN) your outputs hold NaN, and with the same inputs zero-padded in memory (no load past "
             "an end) your kernel is right")
    hint = ("the loads of dS_out, chunk_init_states and dfinal_states run past p and n when TP > p or TN > "
            "n: give them padding_mode=ct.PaddingMode.ZERO. The default padding is UNDETERMINED (NaN on the "
            "CPU executor), and ct.sum(dS * S) adds the padded elements into ddA_last.")
    return Probe(label, confirms, hint)


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
        diagnose = once(_diagnose, kernel, backend, device, case)
        probes = [_padding_probe(kernel, case, backend, device, expected)]
        for which, (name, act, axes) in enumerate((
                ("dstates", dstates, ("batch entry", "chunk", "head", "", "")),
                ("ddA_last", ddA_last, ("batch entry", "head", "chunk")),
                ("dinitial_states", dinit, ("batch entry", "head", "", "")))):
            exp = expected[which].float()
            atol = 1e-5 * max(1.0, float(exp.abs().max()))
            compare(CHECK, act.cpu(), exp, case, name=name, rtol=1e-4, atol=atol, hint=_NUDGE,
                    probes=probes, diagnose=diagnose, axes=axes,
                    extra=partial(unwritten, what=f"your kernel, into {name},",
                                  grid_axes=((0, 2), (0, 1), (0, 1))[which],
                                  loop_axes=((1,), (2,), ())[which]))
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
