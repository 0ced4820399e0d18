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
from functools import partial

import torch

from ._experiments import (
    Diagnosis,
    Experiment,
    Lab,
    Linearity,
    Reading,
    close,
    exchanged_axes,
    low_precision,
    misplaced,
    nan_on_cpu,
    once,
    positions,
    read_clamp,
    replace,
    same_batch,
    same_for_every_head,
    small_integers,
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
    "positions past the end must hold dt = 0 so that they add nothing to the cumsum. (A mask of your own "
    "in place of the padding must keep exactly the positions c*Q + pos < l, l = dt.shape[1].)"
)

register(CHECK, "ex04", _HINT)

_AXES = ("batch entry", "head", "chunk", "position")

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


def _run(kernel, backend: str, device: str, case: Case):
    """Launch the learner's kernel on any inputs {dt, A, Q}: {dt_out, dA_cumsum} (prefilled buffers)."""

    def run(inputs):
        dt, A, Q = inputs["dt"], inputs["A"], inputs["Q"]
        b, l, h = dt.shape
        nc = math.ceil(l / Q)
        outs = [prefilled((b, h, nc, Q), device=device) for _ in range(2)]
        args = (dt.float().to(device), A.float().to(device), *outs, Q)
        run_kernel(CHECK, kernel, (b, nc, h), args, case, _NUDGE, backend)
        return {"dt_out": outs[0], "dA_cumsum": outs[1]}

    return run


def _reference(inputs):
    from mamba2_tutorial.reference import chunk_cumsum

    dt_out, dA = chunk_cumsum(inputs["dt"].double().cpu(), inputs["A"].double().cpu(), inputs["Q"])
    return {"dt_out": dt_out, "dA_cumsum": dA}


def _impulse(base, at: int | None = None):
    """dt 1 at a single position (batch 0, the last head, chunk 1, position ``at``, Q // 2 by default), 0
    elsewhere; A = -1."""
    Q, h = base["Q"], base["dt"].shape[2]
    dt = torch.zeros(1, 3 * Q, h)
    dt[0, Q + (Q // 2 if at is None else at), h - 1] = 1.0
    return replace(base, dt=dt, A=-torch.ones(h))


def _read_impulse(lab, inputs, got):
    """Where the kernel puts a single step of size 1 (see :func:`_impulse`)."""
    Q, h = inputs["Q"], inputs["dt"].shape[2]
    q0, hh = int(inputs["dt"][0, :, h - 1].nonzero()[0]) - Q, h - 1
    where = f"dt = 1 at one position (position {Q + q0}: chunk 1, position {q0}; head {hh}) and 0 elsewhere"
    dt_out, dA = got["dt_out"][0], got["dA_cumsum"][0]  # (h, nc, Q)
    if not bool(torch.isfinite(dt_out).all() and torch.isfinite(dA).all()):
        return None
    nonzero = dt_out.abs() > 1e-6
    row = nonzero[hh, 1]
    others = nonzero.clone()
    others[hh, 1] = False
    if not bool(others.any()) and bool(row[q0]) and int(row.sum()) > 1:
        return (f"With {where}, your dt_out in that chunk is nonzero at positions {positions(row)}, not only "
                f"{q0}: what you store into dt_out is not the step sizes themselves.\n      dt_out[bi, hi, "
                f"c, :] holds the chunk's dt as loaded (0 past the end); the running sum goes to "
                f"dA_cumsum.", None)
    hits = (dt_out.abs() > 0.5).nonzero().tolist()
    if hits != [[hh, 1, q0]]:
        found = ", ".join(f"head {a}, chunk {c}, position {q}" for a, c, q in hits[:4]) or "nowhere"
        return (f"With {where}, your dt_out holds it at {found}: the chunk's step sizes do not reach "
                f"dt_out[bi, hi, c, :] from dt[bi, c*Q : (c+1)*Q, hi], so a load or store index is off.\n"
                f"      Loads and stores take the index in TILE units: the chunk is tile (bi, c, hi) of dt in"
                f" tiles of shape (1, Q, 1), and it is stored at (bi, hi, c, 0) of dt_out.", None)
    outside = dA.clone()
    outside[hh, 1] = 0
    if bool((outside.abs() > 1e-6).any()):
        if bool((dA[hh, 2:].abs() > 1e-6).any()):
            return (f"With {where}, your dA_cumsum is nonzero in chunk 2 as well: the running sum carries "
                    f"over from one chunk into the next.\n      Each block sums its own chunk only: the "
                    f"cumsum restarts at 0 at every chunk's first position.", None)
        return None
    step = dA[hh, 1].abs() > 1e-6
    pos = torch.arange(Q)
    if bool((step == (pos >= q0)).all()):
        values = dA[hh, 1, q0:]
        if bool(torch.isclose(values, torch.full_like(values, -1.0), atol=1e-5).all()):
            return None
        said = (f"With {where}, your dA_cumsum in that chunk is nonzero at positions {q0}..{Q - 1}, as it "
                f"should, but holds {', '.join(f'{float(v):.3g}' for v in values[:4])}"
                f"{', ...' if len(values) > 4 else ''} where every value is dt * A = -1")
        if abs(float(values[0]) + 2.0) < 1e-5 and len(values) > 1 and abs(float(values[1]) + 1.0) < 1e-5:
            return (f"{said}: position {q0} counts its own step twice, the later positions once.\n      "
                    f"ct.cumsum(v, axis=0) already includes position s: add nothing to it.", None)
        counts = torch.arange(q0 + 1, Q + 1, dtype=values.dtype)  # positions summed up to s: s + 1
        if bool(torch.isclose(values, -1.0 / counts, rtol=1e-4, atol=1e-6).all()):
            return (f"{said}: -1 / (s + 1) at position s, so your running sum is divided by the number of "
                    f"positions it has summed (a running mean, not a running sum).\n      dA_cumsum[s] = "
                    f"dt_0*A + ... + dt_s*A: ct.cumsum(dt * A[hi], axis=0), nothing divided.", None)
        if bool(torch.isclose(values, values[:1].expand_as(values), rtol=1e-5).all()):
            k = -float(values[0])
            known = {1.4426950408889634: " = LOG2E: the exp2 convention's factor (dA_cumsum stays in natural "
                                         "units; whoever takes the exp decides exp or exp2)",
                     0.6931471805599453: " = ln 2: a conversion to base 2 applied here"}
            why = next((text for v, text in known.items() if abs(k - v) < 1e-4 * v), "")
            return (f"{said}: your running sum is scaled by {k:.4g}{why}.\n      dA_cumsum[s] = "
                    f"dt_0*A + ... + dt_s*A: ct.cumsum(dt * A[hi], axis=0), nothing added or scaled.", None)
        steps = torch.arange(1, Q - q0 + 1, dtype=values.dtype)    # 1, 2, 3, ... from the step on
        if len(steps) > 1 and bool(torch.isclose(values, -steps, rtol=1e-4, atol=1e-6).all()):
            return (f"{said}: -1, -2, -3, ... from position {q0} on, a running sum of the running sum: the "
                    f"cumsum is taken twice (a line repeated, or ct.cumsum applied to dA_cumsum itself)."
                    f"\n      dA_cumsum[s] = dt_0*A + ... + dt_s*A: one ct.cumsum(dt * A[hi], axis=0).", None)
        right = torch.isclose(values, torch.full_like(values, -1.0), atol=1e-5)
        if bool(right[0]) and not bool(right.all()):
            j = int((~right).nonzero()[0])             # the first wrong position, counted from q0
            later = values[j:]
            if bool(torch.isclose(later, later[:1].expand_as(later), rtol=1e-5, atol=1e-6).all()):
                at, v = q0 + j, float(later[0])
                times = f"{v / -1.0:.3g} times" if abs(v) > 1e-6 else "none of"
                return (f"{said}: right at positions {q0}..{at - 1}, then {v:.3g} from position {at} on, so "
                        f"from position {at} on your running sum holds {times} the steps before it. A sum "
                        f"taken in parts carries each earlier part's total into the later part exactly "
                        f"once: here it is {'lost' if abs(v) < 1e-6 else 'added more than once'} from "
                        f"position {at} on.\n      dA_cumsum[s] = dt_0*A + ... + dt_s*A over the whole "
                        f"chunk: ct.cumsum(dt * A[hi], axis=0) in one piece needs no carry at all.", None)
        return (f"{said}: the running sum of one step of dt * A is off.\n      dA_cumsum[s] = dt_0*A + ... "
                f"+ dt_s*A: ct.cumsum(dt * A[hi], axis=0), nothing added or scaled.", None)
    said = (f"With {where}, your dA_cumsum in that chunk is nonzero at positions {positions(step)}, not "
            f"{q0}..{Q - 1}")
    last = int(step.nonzero().max()) if bool(step.any()) else -1
    if q0 < last < Q - 1 and bool((step == ((pos >= q0) & (pos <= last))).all()):
        return (f"{said}: the running sum stops at position {last}, so the step does not reach positions "
                f"{last + 1}..{Q - 1} (a sum taken in pieces whose totals are not carried on, or a loop that "
                f"stops short).\n      One ct.cumsum(v, axis=0) over the chunk's whole (Q,) tile carries "
                f"every step to the chunk's end.", None)
    if bool((step == (pos > q0)).all()):
        return (f"{said}: it starts one position late, so position s is left out of its own sum.\n      The "
                f"cumsum is inclusive: dA_cumsum[s] = dt_0*A + ... + dt_s*A, as ct.cumsum(v, axis=0) "
                f"computes it; do not subtract v or shift by one.", None)
    before = dA[hh, 1, :q0]
    ones = torch.ones_like(before)
    if bool((step == (pos < q0)).all()) and bool(torch.isclose(before, ones, atol=1e-5).all()):
        return (f"{said}, holding +1 there: your running sum is measured from the chunk's END (cs - "
                f"cs[Q-1]), so it is 0 at the end and -(the steps after s) before it.\n      dA_cumsum runs "
                f"from the chunk's START: dA_cumsum[s] = dt_0*A + ... + dt_s*A, ct.cumsum(v, axis=0) as it "
                f"is.", None)
    if bool((step == (pos <= q0)).all()) or bool((step == (pos < q0)).all()):
        return (f"{said}: the sum runs backwards, toward the chunk's start.\n      The cumsum runs forward "
                f"in time: ct.cumsum(v, axis=0), with the default reverse=False.", None)
    early = (f"{said}: it starts one position early, so position s also sums the step of position s + 1 (a "
             f"mask k <= s + 1, or an index shifted by one).\n      The cumsum is inclusive and causal: "
             f"dA_cumsum[s] = dt_0*A + ... + dt_s*A, as ct.cumsum(v, axis=0) computes it; nothing from a "
             f"later position.")
    if q0 > 1 and bool((step == (pos >= q0 - 1)).all()):
        return early, None
    if q0 == 1 and bool(step.all()) and Q // 2 > 1:
        # one position early and a whole-chunk sum look alike with the step at position 1: look again with
        # the step later in the chunk
        again = lab.run(_impulse(inputs, at=Q // 2))
        if again is not None and bool(torch.isfinite(again["dA_cumsum"]).all()):
            later = again["dA_cumsum"][0][hh, 1].abs() > 1e-6
            if bool((later == (pos >= Q // 2 - 1)).all()):
                note = (f" (With the step at position {Q // 2} instead, your dA_cumsum is nonzero from "
                        f"position {Q // 2 - 1}.)")
                return early + note, None
    if bool(step.all()) and q0 > 0:
        first = replace(inputs, dt=torch.roll(inputs["dt"], -Q, dims=1))   # the same step in chunk 0
        again = lab.run(first)
        if again is not None and lab.agrees(again, lab.reference(first)):
            return (f"{said}: it is nonzero before position {q0} too, so every position holds the whole "
                    f"chunk's sum; with the same step in chunk 0 your running sum is right. So a mask that "
                    f"picks positions 0..s works in chunk 0 only: it compares a position of the sequence "
                    f"(c*Q + s) with a position of the chunk (k), which agree in chunk 0 alone.\n      "
                    f"Compare positions of the chunk with each other (pos[:, None] >= pos[None, :]), or use "
                    f"ct.cumsum(v, axis=0), which needs no mask.", None)
        return (f"{said}: it is nonzero before position {q0} too, so every position holds the same sum, the "
                f"whole chunk's (a sum, not a running sum).\n      dA_cumsum[s] sums positions 0..s only: "
                f"ct.cumsum(v, axis=0), not ct.sum.", None)
    if bool((step == (pos == q0)).all()) and abs(float(dA[hh, 1, q0]) + (q0 + 1)) < 1e-4 and q0 > 0:
        return (f"{said}: only position {q0} is nonzero, and it holds -{q0 + 1} = (s + 1) * dt_s * A: each "
                f"position's own step is counted s + 1 times and no earlier step reaches it (the running sum "
                f"of A alone times dt, cumsum(A) * dt; or a hand loop that adds the whole tile v where its "
                f"element v_k belongs).\n      The running sum is of the product, each step once: "
                f"ct.cumsum(dt * A[hi], axis=0).", None)
    if bool((step == (pos == q0)).all()):
        v = float(dA[hh, 1, q0])
        if abs(v + 1.0) < 1e-4:
            # a sum over a size-1 axis leaves every step where it is; a triangle broadcast the wrong way
            # counts a step once per key before it, which shows only where that count is above 1
            again = lab.run(_impulse(inputs, at=Q - 1)) if q0 != Q - 1 else None
            if again is not None and bool(torch.isfinite(again["dA_cumsum"]).all()):
                late = again["dA_cumsum"][0][hh, 1]
                others_late = late.abs() > 1e-6
                w = float(late[Q - 1])
                if bool((others_late == (pos == Q - 1)).all()) and w < -1.0 - 1e-4:
                    return (f"{said}: only position {q0} is nonzero and it holds -1, but with the step "
                            f"at position {Q - 1} your dA_cumsum holds {w:.4g} there and 0 before: each "
                            f"position counts its own step several times and no earlier step reaches it. "
                            f"A triangle W[s, k] = v_s (the row's own value, v[:, None]) summed over k, "
                            f"where W[s, k] = v_k (v[None, :]) belongs.\n      dA_cumsum[s] = sum over k "
                            f"<= s of v_k: ct.where(pos[:, None] >= pos[None, :], v[None, :], 0.0) summed "
                            f"over axis 1, or simply ct.cumsum(v, axis=0).", None)
            return (f"{said}: the value stays at its own position, unchanged (dt * A = -1), so no running "
                    f"sum is taken along the chunk's positions (the sum runs over another axis, of size "
                    f"1).\n      Reshape the (1, Q, 1) tile to (Q,) and take ct.cumsum(..., axis=0): the sum "
                    f"over the chunk's Q positions.", None)
        if abs(v + (Q - q0)) < 1e-4:
            return (f"{said}: only position {q0} is nonzero, and it holds {v:.4g} = (Q - s) * dt_s * A: "
                    f"position s's step is counted once for every position from s to the chunk's end, and "
                    f"no earlier step reaches it: a (Q, Q) triangle W[s, k] = v_k (k <= s) summed over axis "
                    f"0 (its rows s) where axis 1 (its columns k) belongs.\n      dA_cumsum[s] = sum over "
                    f"k <= s of v_k: ct.sum(W, axis=1), or simply ct.cumsum(v, axis=0).", None)
        return (f"{said}: only position {q0} is nonzero (it holds {v:.4g}): no earlier step reaches a later "
                f"position, so no running sum is taken along the chunk's positions.\n      dA_cumsum[s] = "
                f"dt_0*A + ... + dt_s*A: ct.cumsum(dt * A[hi], axis=0) over the chunk's (Q,) tile.", None)
    return None


def _per_head(base):
    """One chunk of dt = 1 (so that dA_cumsum[s] = (s + 1) * A[hi]) and a different A for every head."""
    Q, h = base["Q"], base["dt"].shape[2]
    return replace(base, dt=torch.ones(1, Q, h), A=-(1.0 + torch.arange(h, dtype=torch.float32)) / 4)


def _read_per_head(lab, inputs, got):
    """Which A each head's running sum steps by (see :func:`_per_head`)."""
    A = inputs["A"]
    dA = got["dA_cumsum"][0, :, 0]  # (h, Q)
    if not bool(torch.isfinite(dA).all()) or not close(got["dt_out"], lab.reference(inputs)["dt_out"]):
        return None
    steps = torch.diff(dA, dim=1, prepend=torch.zeros_like(dA[:, :1]))  # what position s adds
    where = "With dt = 1 at every position and A = -0.25, -0.5, ... (a different A for every head)"
    Q = steps.shape[1]
    by_position = torch.zeros(Q, dtype=steps.dtype)  # A read as a (Q,) tile, zero-padded past h
    by_position[:min(Q, len(A))] = A[:Q]
    if len(A) > 1 and bool(torch.isclose(steps, by_position.expand_as(steps), rtol=1e-5, atol=1e-6).all()):
        return (f"{where}, what your running sum adds at position s is A[s] in every head, where it is "
                f"A[hi] at every position: your kernel reads A by position, not by head.\n      A has "
                f"one entry per head: ct.load(A, (hi,), shape=()), a 0-d tile that multiplies the chunk's "
                f"(Q,) tile of step sizes.", None)
    read = steps[:, 0]
    heads = [int((read[i] - A).abs().argmin()) for i in range(len(read))]
    if all(abs(float(read[i] - A[j])) < 1e-5 for i, j in enumerate(heads)) and heads != list(range(len(A))):
        return (f"{where}, head hi's running sum steps by A[j] for j = {heads} (hi = 0, 1, ...): your "
                f"kernel reads A of another head.\n      ct.load(A, (hi,), shape=()) with this block's head "
                f"index hi (the grid's axis 2).", None)
    return None


def _last_step_only(base, where: str):
    """dt = 0 at the sequence's last step (``where`` = "sequence"), or at each chunk's last ("chunk") or
    first ("first") position."""
    dt, Q = base["dt"].clone(), base["Q"]
    if where == "sequence":
        dt[:, -1] = 0.0
    elif where == "chunk":
        dt[:, Q - 1::Q] = 0.0
    else:
        dt[:, ::Q] = 0.0
    return replace(base, dt=dt)


def _read_unreached(lab, inputs, got):
    """A reading of the base case itself: dA_cumsum right except at some positions of every chunk, where
    it is 0 (nothing was summed or stored there)."""
    want = lab.reference(inputs)["dA_cumsum"]
    cs = got["dA_cumsum"].double()
    if not bool(torch.isfinite(cs).all()):
        return None
    full = want.shape[2] - 1 if want.shape[2] > 1 else want.shape[2]  # the last chunk may be ragged
    wrong = ~torch.isclose(cs[:, :, :full], want[:, :, :full], rtol=lab.rtol, atol=lab.atol)
    at = wrong.flatten(0, 2).any(0)  # (Q,): positions wrong in some full chunk
    if not bool(at.any()) or bool(at.all()) or not bool((cs[:, :, :full][..., at] == 0).all()):
        return None
    idx = at.nonzero().flatten()
    if int(idx[0]) == 0 and not bool(at[-1]):
        how = ("the earlier positions lose what was written there: in a hand-written loop over the "
               "positions, a tile rebuilt at every step (ct.where(pos == k, run, 0.0) keeps only position k: "
               "ct.where(pos == k, run, cs) keeps the rest), or a loop or a mask that leaves them out")
    else:
        how = ("nothing is summed into (or stored at) those positions, so a loop, a range or a mask stops "
               "short")
    return (f"Your dA_cumsum is right except at position(s) {positions(at)} of the chunks, where it is 0: "
            f"{how}.\n      ct.cumsum(v, axis=0) on the chunk's (Q,) tile gives every position 0..Q-1; a "
            f"hand-written loop must run over all Q positions and keep every position it has filled.", None)


def _read_cut(lab, inputs, got):
    """A reading of the base case itself: outputs right up to a position X of the sequence and 0 from X on
    (X inside the sequence: a mask or a bound with the wrong length; X at its end: dA_cumsum zeroed past the
    end, where it holds the last running sum)."""
    want = lab.reference(inputs)
    l = inputs["dt"].shape[1]
    wrong_at = None
    for name in ("dt_out", "dA_cumsum"):  # dt_out first: a cut in dt shows there as zeros, in the sum not
        g, w = got[name].double().flatten(2), want[name].flatten(2)  # (b, h, nchunks*Q): by position
        if not bool(torch.isfinite(g).all()):
            return None
        bad = (~torch.isclose(g, w, rtol=lab.rtol, atol=lab.atol)).flatten(0, 1).any(0)
        if not bool(bad.any()):
            continue
        first = int(bad.nonzero()[0])
        if not bool((g[..., first:] == 0).all()):
            return None
        wrong_at, which = first, name
        break
    if wrong_at is None:
        return None
    if wrong_at >= l:
        return (f"Your outputs are right inside the sequence (positions 0..{l - 1}) and 0 past its end: past "
                f"the end dt = 0 adds nothing, so dA_cumsum there holds the last running sum, not 0.\n      "
                f"With padding_mode=ZERO on the load of dt, no mask is needed: ct.cumsum(dt * A[hi], axis=0) "
                f"is right past the end too.", None)
    if wrong_at == l - 1:
        return (f"Your outputs are right up to position {l - 2} and 0 from position {l - 1}, the sequence's "
                f"last step, on: your kernel leaves out (or gets wrong) the sequence's last step, a mask or "
                f"a bound off by one.\n      The steps inside the sequence are c*Q + pos < l, the last one "
                f"l - 1 included (with padding_mode=ZERO no mask is needed: the padding is 0).", None)
    if wrong_at == inputs["Q"] and which == "dA_cumsum" and l > wrong_at:
        return (f"Your dt_out is right, and your dA_cumsum is right in chunk 0 (positions 0..{wrong_at - 1}) "
                f"and 0 in every later chunk: the block of chunk c >= 1 sums nothing. Each block works on "
                f"its own chunk's positions 0..Q-1: a loop, a mask or a comparison in the sequence's "
                f"positions (c*Q + pos) matches none of them once c >= 1.\n      dA_cumsum[bi, hi, c, :] = "
                f"ct.cumsum(dt_c * A[hi], axis=0) over the chunk's own (Q,) tile, the same in every block.",
                None)
    sizes = {"b": inputs["dt"].shape[0], "h": inputs["dt"].shape[2], "Q": inputs["Q"],
             "nchunks": got["dt_out"].shape[2]}
    same = [k for k, v in sizes.items() if v == wrong_at]
    also = f" ({wrong_at} is {', '.join(same)}: a length read from another axis?)" if same else ""
    return (f"Your outputs are right up to position {wrong_at - 1} of the sequence and 0 from position "
            f"{wrong_at} on, where the sequence has l = {l} positions: a mask or a bound cuts it at "
            f"{wrong_at}{also}.\n      The positions inside the sequence are c*Q + pos < l, l = dt.shape[1]; "
            f"with padding_mode=ZERO on the load no mask is needed.", None)


def _same_chunks(base):
    """Whole chunks only (l cut to a multiple of Q), each a copy of chunk 0 (None with fewer than two)."""
    Q, dt = base["Q"], base["dt"]
    full = dt.shape[1] // Q
    if full < 2:
        return None
    return replace(base, dt=dt[:, :Q].repeat(1, full, 1).contiguous())


def _exact(base):
    """dt in {0.5, 1} and A in {-1, -2, -0.5}: every product and running sum exact in bfloat16."""
    h = base["dt"].shape[2]
    dt = (small_integers(base["dt"], 41, 1, 2) / 2).float()
    return replace(base, dt=dt, A=torch.tensor([-1.0, -2.0, -0.5])[torch.arange(h) % 3])


def _tame(base):
    """The same case with every dt*A scaled into [-4, 0] (None when it already is mild)."""
    top = float((base["dt"] * base["A"].abs()).max())
    return replace(base, dt=base["dt"] * (4.0 / top)) if top > 4 else None


def _read_dt_out_product(lab, inputs, got):
    """A dt_out that holds dt * A[hi] (the increments of the running sum) where the step sizes belong."""
    want = lab.reference(inputs)
    dt_out = got["dt_out"].double()
    A = inputs["A"].double()[None, :, None, None]                  # (1, h, 1, 1) against (b, h, nchunks, Q)
    if close(dt_out, want["dt_out"]) or not close(dt_out, want["dt_out"] * A):
        return None
    also = "" if close(got["dA_cumsum"], want["dA_cumsum"]) else " (and your dA_cumsum is wrong too)"
    return (f"Your dt_out holds dt * A[hi], the running sum's increments, where the step sizes belong"
            f"{also}.\n      dt_out[bi, hi, c, :] is the chunk's dt as loaded (0 past the end); only "
            f"dA_cumsum uses A: ct.cumsum(dt * A[hi], axis=0).", None)


def _read_step_clamp(lab, inputs, got):
    """dA_cumsum the running sum of the steps dt * A[hi] with each step clamped at one value c: the steps
    below c (or above it) replaced by c, the others right (a floor put on each step "so that exp never
    underflows")."""
    dt, A, Q = inputs["dt"].double(), inputs["A"].double(), inputs["Q"]
    b, l, h = dt.shape
    nc = -(-l // Q)
    v = torch.zeros(b, h, nc * Q, dtype=torch.float64)
    v[:, :, :l] = (dt * A).transpose(1, 2)
    v = v.reshape(b, h, nc, Q)
    got_cs = got["dA_cumsum"].double()
    if not bool(torch.isfinite(got_cs).all()):
        return None
    steps = torch.diff(got_cs, dim=-1, prepend=torch.zeros_like(got_cs[..., :1]))   # the kernel's steps
    off = ~torch.isclose(steps, v, rtol=1e-4, atol=1e-4)
    if not bool(off.any()):
        return None
    c = float(steps[off].median())
    if not bool(torch.isclose(steps[off], torch.full_like(steps[off], c), rtol=1e-4, atol=1e-4).all()):
        return None
    if bool((v[off] < c).all()) and bool((v[~off] >= c - 1e-4).all()):
        side, fn = "below", f"ct.maximum(dt * A, {c:.4g})"
    elif bool((v[off] > c).all()) and bool((v[~off] <= c + 1e-4).all()):
        side, fn = "above", f"ct.minimum(dt * A, {c:.4g})"
    else:
        return None
    return (f"Your dA_cumsum is the running sum of the steps dt * A[hi] with every step {side} {c:.4g} "
            f"replaced by {c:.4g} ({int(off.sum())} steps): your kernel clamps each step ({fn}, or a where) "
            f"before the cumsum.\n      Sum the steps as they are: exp of a very negative running sum is 0, "
            f"which is the right decay, so nothing needs a floor.", None)


def _read_fill_past_end(lab, inputs, got):
    """With dt = 0 everywhere: outputs nonzero only past the sequence's end (positions c*Q + q >= l of the
    last chunk), where the padding belongs: the kernel fills them with something other than 0."""
    l, Q = inputs["dt"].shape[1], inputs["Q"]
    for name in ("dt_out", "dA_cumsum"):
        t = got[name].double()                                   # (b, h, nchunks, Q)
        pos = torch.arange(t.shape[2] * Q).reshape(t.shape[2], Q)
        past = pos >= l
        if not bool(past.any()) or not bool(torch.isfinite(t).all()):
            return None
        nonzero = t.abs() > 1e-6
        if bool(nonzero.any()) and not bool((nonzero & ~past).any()):
            values = ", ".join(f"{v:.3g}" for v in t[nonzero].unique()[:3].tolist())
            return (f"With dt = 0 everywhere, your {name} is 0 inside the sequence but holds {values} at "
                    f"positions past its end (c*Q + q >= l = {l}, in the last chunk): your kernel gives the "
                    f"steps past the ragged end a value other than 0 (a fill value of a where, or a padding "
                    f"mode other than ZERO).\n      Past the sequence's end a step is 0: load dt with "
                    f"padding_mode=ct.PaddingMode.ZERO (or ct.where(c * Q + pos < l, dt, 0.0)).", None)
    return None


def _diagnosis(kernel, backend: str, device: str, case: Case) -> Diagnosis:
    """The experiments of exercise 4, in the order they run (see :mod:`._experiments`)."""
    lab = Lab(_run(kernel, backend, device, case), _reference)
    h = case.inputs["dt"].shape[2]
    steps = [
        misplaced({"dt_out": _AXES, "dA_cumsum": _AXES}),
        *exchanged_axes("dt", {1: "position", 2: "head"},
                        "dt is (b, l, h): chunk c of head hi is tile (bi, c, hi) in tiles of (1, Q, 1), or "
                        "the positions c*Q + arange(Q) on axis 1 and hi on axis 2 in a gather."),
        Reading(lambda b: b, _read_unreached),
        Reading(lambda b: b, _read_dt_out_product),
        Reading(lambda b: b, _read_cut),
        Experiment("With A the same number for every head", lambda b: replace(b, A=torch.full((h,), -0.7)),
                   "so A is read at the wrong index",
                   "A has one entry per head: load A[hi] with this block's head index hi (the grid's axis "
                   "2), ct.load(A, (hi,), shape=())."),
        Experiment("With A = 1 for every head", lambda b: replace(b, A=torch.ones(h)),
                   "so the factor A[hi] is where your kernel goes wrong (missing, or in the wrong output)",
                   "dA_cumsum is the cumsum of dt * A[hi]: multiply the chunk's step sizes by A[hi] "
                   "(ct.load(A, (hi,), shape=()), a 0-d tile) before ct.cumsum; dt_out holds the step sizes "
                   "themselves."),
        Experiment("With A's sign flipped", lambda b: replace(b, A=-b["A"]), "your kernel flips A's sign",
                   "A is already negative (it is the decay rate itself): multiply by A[hi] as it is.",
                   undo=True),
        Experiment("With dt = 0 at each chunk's last position", lambda b: _last_step_only(b, "chunk"),
                   "so your kernel leaves out (or gets wrong) each chunk's last position: a mask or a bound "
                   "off by one", "every position 0..Q-1 of the chunk counts: a mask of the steps inside the "
                   "sequence is c*Q + pos < l (with ZERO padding none is needed).",
                   controls=[lambda b: _last_step_only(b, "first")]),
        Experiment("With dt = 0 at each chunk's first position", lambda b: _last_step_only(b, "first"),
                   "so your kernel gets each chunk's first position wrong: leaves it out (a mask, a bound or "
                   "a subtraction off by one) or counts it twice (a term for it added beside the cumsum)",
                   "the running sum starts at the chunk's first position and counts it once: dA_cumsum[0] = "
                   "dt_0 * A[hi], as ct.cumsum(v, axis=0) gives it.",
                   controls=[lambda b: _last_step_only(b, "chunk")]),
        Experiment("With dt = 0 at the sequence's last step", lambda b: _last_step_only(b, "sequence"),
                   "so your kernel leaves out (or gets wrong) the sequence's last step: a mask or a bound "
                   "off by one", "the steps inside the sequence are c*Q + pos < l, the last one l - 1 "
                   "included (with padding_mode=ZERO no mask is needed: the padding is 0).",
                   controls=[lambda b: _last_step_only(b, "first")]),
        Reading(lambda b: replace(b, dt=torch.zeros_like(b["dt"])), _read_fill_past_end),
        Linearity(["dt"], ["dt_out", "dA_cumsum"], "dt",
                  "your kernel applies a nonlinearity to dt (softplus, exp, a bias, a square, ...)",
                  "dt arrives already processed (positive: no bias or softplus here): store it as it is and "
                  "take the cumsum of dt * A[hi]."),
        Linearity(["A"], ["dA_cumsum"], "A",
                  "your kernel applies a nonlinearity to A (exp? -exp?)",
                  "A arrives as the (negative) decay rate itself: dA_cumsum is the cumsum of dt * A[hi]."),
        same_batch(["dt"]),
        Experiment("With every chunk of dt a copy of chunk 0's (whole chunks only)", _same_chunks,
                   "so your kernel reads one fixed chunk (chunk 0?) for every chunk: the chunk index of a "
                   "load is off", "block (bi, c, hi) loads its own chunk: ct.load(dt, (bi, c, hi), shape=(1, "
                   "Q, 1)), with c = ct.bid(1), the grid's chunk axis."),
        Experiment("With dt the same for every head (each a copy of head 0's)",
                   lambda b: same_for_every_head(b, "dt", 2), "so your kernel reads dt of another head",
                   "block (bi, c, hi) loads its own head's step sizes: ct.load(dt, (bi, c, hi), shape=(1, Q, "
                   "1)), for dt_out and for the running sum alike."),
        Reading(_impulse, _read_impulse),
        Reading(lambda b: _impulse(b, 1), _read_impulse),
        Reading(_per_head, _read_per_head),
        low_precision(_exact, "dt in {0.5, 1} and A in {-1, -2, -0.5}", ["dt", "A"]),
    ]
    prelude = [(_tame, "With the same case at milder decay (every dt*A scaled into [-4, 0]) your output is "
                "right: your kernel breaks only where dt*A is large",
                "look for a step that overflows, loses precision or is clamped for large |dt*A| (an exp, a "
                "division, a ct.maximum or ct.minimum): the cumsum itself needs none of them.")]
    first = [read_clamp(["dA_cumsum", "dt_out"], "dA_cumsum is the running sum as it is: exp of a large "
                        "negative number is 0, which is right, so nothing needs a floor or a ceiling."),
             Reading(lambda b: b, _read_step_clamp)]
    return Diagnosis(lab, steps, prelude, first)


def _diagnose(kernel, backend: str, device: str, case: Case):
    return _diagnosis(kernel, backend, device, case)(dict(case.inputs))


def _padding_probe(kernel, case: Case, backend: str, device: str, expected, which: int, tol: float) -> Probe:
    """Re-run the learner's kernel with dt zero-padded in memory to nchunks*Q steps, so that no load runs
    past the end: right there means the loads' padding is the cause."""

    def confirms() -> bool:
        if not nan_on_cpu(_run(kernel, "cpu", "cpu", case), case.inputs):
            return False
        dt, A, Q = case.inputs["dt"], case.inputs["A"], case.inputs["Q"]
        b, l, h = dt.shape
        nc = math.ceil(l / Q)
        dtp = torch.zeros(b, nc * Q, h, dtype=dt.dtype, device=device)
        dtp[:, :l] = dt
        outs = [prefilled((b, h, nc, Q), device=device) for _ in range(2)]
        run_kernel(CHECK, kernel, (b, nc, h), (dtp, A.clone(), *outs, Q), case, _NUDGE, backend)
        return bool(torch.isclose(outs[which].cpu(), expected, rtol=1e-5, atol=tol).all())

    label = ("loads without padding_mode=ZERO: on the CPU tile executor (which fills undetermined padding "
             "with NaN) your outputs hold NaN, and with dt zero-padded in memory (no load past the end) your "
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
        diagnose = once(_diagnose, kernel, backend, device, case)
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
                probes=[_padding_probe(kernel, case, backend, device, (dt_exp, dA_exp)[which], which, tol)],
                diagnose=diagnose,
                axes=_AXES,
                extra=partial(unwritten, what=f"your kernel, into {name},", grid_axes=(0, 1, 2)),  # fmt: skip
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
