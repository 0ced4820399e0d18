"""Exercise 6: the state-passing kernel in cuTile (step 3 of the chunked SSD, the only sequential one).

The learner writes ``state_passing_kernel(states, dA_cumsum, initial_states, chunk_init_states, final_states,
Q, TP, TN)`` (the last three ``ct.Constant[int]``), launched on the grid ``(b, h)``. Block (bi, hi) walks the
chunks in order, carrying a (TP, TN) float32 state tile::

    entering[0] = initial_states[bi, hi]
    entering[c + 1] = exp(dA_cumsum[bi, hi, c, Q-1]) * entering[c] + states[bi, c, hi]

storing ``entering[c]`` into ``chunk_init_states[bi, c, hi]`` (the state ENTERING chunk c) and the state after
the last chunk into ``final_states[bi, hi]``: :func:`mamba2_tutorial.reference.state_passing`.
Shapes: states and chunk_init_states (b, nchunks, h, p, n), dA_cumsum (b, h, nchunks, Q), initial_states and
final_states (b, h, p, n), all float32.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import torch

from ..kernels._host import next_power_of_two
from ._experiments import (
    AsIf,
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
    once,
    positions,
    read_alternating_transpose,
    read_clamp,
    read_cut_pn,
    read_transposed_store,
    replace,
    reshaped_tile,
    rounded_decays,
    same_batch,
    same_for_every_head,
    scaled_up,
    shifted_chunks,
    small_integers,
    tame_decay,
)
from ._harness import (
    Case,
    check_kernel_on_backends,
    compare,
    prefilled,
    register,
    run_kernel,
    unwritten,
)

CHECK = "check_state_passing_kernel"

_NUDGE = (
    "follow one (batch entry, head) by hand for the failing case: chunk_init_states[c] is the state ENTERING "
    "chunk c; the state leaving it is that state decayed across the chunk plus the chunk's own states[c]."
)
_HINT = (  # the recipe (hint(2))
    "block (bi, hi) loads initial_states[bi, hi] as a (1, 1, TP, TN) tile (zero-padded) reshaped to "
    "(TP, TN), then for c in range(states.shape[1]): stores the CURRENT state into chunk_init_states at "
    "(bi, c, hi, 0, 0) (reshaped to (1, 1, 1, TP, TN)), and only then updates state = "
    "exp(dA_cumsum[bi, hi, c, Q-1]) * state + states[bi, c, hi] (ct.load(dA_cumsum, (bi, hi, c, Q - 1), "
    "shape=()) loads one element). After the loop, store the state into final_states at (bi, hi, 0, 0)."
)

register(CHECK, "ex06", _HINT)

# name, b, nchunks, h, p, n, Q, initial states?, dt scale, A scale
_SPECS = [
    ("3 chunks, with initial states, p=5, n=7", 2, 3, 3, 5, 7, 8, True, 1.0, 1.0),
    ("one chunk, no initial state", 1, 1, 4, 4, 8, 16, False, 1.0, 1.0),
    ("6 chunks, with initial states", 3, 6, 2, 3, 6, 8, True, 1.0, 1.0),
    ("extreme decay: dt*A down to -1e3", 1, 4, 3, 4, 5, 8, True, 20.0, 50.0),
]



def _cases(device: str) -> list[Case]:
    from mamba2_tutorial.reference import chunk_cumsum

    cases = []
    for i, (name, b, nc, h, p, n, Q, init, dts, As) in enumerate(_SPECS):
        seed = 600 + i
        gen = torch.Generator().manual_seed(seed)
        l = nc * Q - (Q // 2 if nc > 1 else 3)  # a ragged last chunk
        dt = torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen) - 1.0) * dts
        A = -torch.exp(torch.rand(h, generator=gen)) * As
        _, dA_cs = chunk_cumsum(dt, A, Q)
        states = torch.randn(b, nc, h, p, n, generator=gen)
        initial = torch.randn(b, h, p, n, generator=gen) if init else torch.zeros(b, h, p, n)
        inputs = {"states": states, "dA_cumsum": dA_cs, "initial_states": initial}
        cases.append(Case(name, seed, {k: v.to(device) for k, v in inputs.items()}))
    return cases


LOG2E = 1.4426950408889634


def _run(kernel, backend: str, device: str, case: Case):
    """Launch the learner's kernel on any inputs {states, dA_cumsum, initial_states}."""

    def run(inputs):
        states, dA, init = (inputs[k].float().to(device) for k in ("states", "dA_cumsum", "initial_states"))
        b, nc, h, p, n = states.shape
        entering = prefilled((b, nc, h, p, n), device=device)
        final = prefilled((b, h, p, n), device=device)
        args = (states, dA, init, entering, final, dA.shape[-1], next_power_of_two(p), next_power_of_two(n))
        run_kernel(CHECK, kernel, (b, h), args, case, _NUDGE, backend)
        return {"chunk_init_states": entering, "final_states": final}

    return run


def _reference(inputs):
    from mamba2_tutorial.reference import state_passing

    states, dA, init = (inputs[k].double().cpu() for k in ("states", "dA_cumsum", "initial_states"))
    entering, final = state_passing(states, dA[:, :, : states.shape[1]], init)
    return {"chunk_init_states": entering, "final_states": final}


def decay_experiments(hint: str, log2e: float = LOG2E) -> list:
    """The experiments on the decay across a chunk, exp(dA_cumsum[..., c, Q-1]), shared with exercise 8:
    exp2 for exp, the sign, another position of the chunk, a sum over the chunk, the next chunk."""

    def filled(b):  # every position of a chunk holds the chunk's last value
        return replace(b, dA_cumsum=b["dA_cumsum"][..., -1:].expand_as(b["dA_cumsum"]).clone())

    def spike(b):  # 0 everywhere but each chunk's last position
        dA = torch.zeros_like(b["dA_cumsum"])
        dA[..., -1] = b["dA_cumsum"][..., -1]
        return replace(b, dA_cumsum=dA)

    def shifted(b):  # one chunk more, each chunk's decay moved one chunk later
        dA = b["dA_cumsum"]
        return replace(b, dA_cumsum=torch.cat([dA[:, :, :1], dA], dim=2))

    def running(b):  # each chunk's decay the sum of the decays of chunks 0..c (from the sequence's start)
        dA = b["dA_cumsum"].clone()
        if dA.shape[2] < 2:
            return None
        dA[..., -1] = torch.cumsum(dA[..., -1], dim=2)
        return replace(b, dA_cumsum=dA)

    def from_first(b):  # each chunk's decay taken from its first position to its last
        dA = b["dA_cumsum"].clone()
        dA[..., -1] = dA[..., -1] - dA[..., 0]
        return replace(b, dA_cumsum=dA)

    last = "the decay across chunk c is exp(dA_cumsum[bi, hi, c, Q-1]), one element: "
    return [
        AsIf("each chunk's decay dA_cumsum[bi, hi, c, Q-1] replaced by dA_cumsum[.., Q-1] - dA_cumsum[.., 0]",
             from_first, "your kernel takes the decay across chunk c as exp(dA_cs[Q-1] - dA_cs[0]), which "
             "leaves out the chunk's first step: dA_cumsum[Q-1] already is the sum from the chunk's start "
             "(it is not a difference)", last + "ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())."),
        AsIf("each chunk's decay dA_cumsum[bi, hi, c, Q-1] replaced by the sum of those of chunks 0..c",
             running, "your kernel decays the carried tile by the decay from the sequence's start to the "
             "end of chunk c (a running sum of the chunk decays), where the decay across chunk c alone "
             "belongs: the carried tile already holds the decays of the chunks before",
             last + "ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()), nothing summed over the chunks."),
        Experiment("With dA_cumsum multiplied by log2(e)",
                   lambda b: replace(b, dA_cumsum=b["dA_cumsum"] * log2e),
                   "your kernel computes 2**v where the decay is exp(v)",
                   "ct.exp2(v) is 2**v: write ct.exp(v), or ct.exp2(v * LOG2E) with LOG2E = "
                   "1.4426950408889634.",
                   undo=True),
        Experiment("With dA_cumsum's sign flipped", lambda b: replace(b, dA_cumsum=-b["dA_cumsum"]),
                   "the decay's exponent has its sign flipped", hint, undo=True),
        Experiment("With dA_cumsum replaced by exp(dA_cumsum)",
                   lambda b: replace(b, dA_cumsum=torch.exp(b["dA_cumsum"])),
                   "your kernel uses dA_cumsum as the decay itself, without the exp", hint, undo=True),
        Experiment("With every position of a chunk's dA_cumsum holding the chunk's last value", filled,
                   "your kernel reads the decay from another position than the chunk's last (Q-1)",
                   last + "ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()).", undo=True),
        Experiment("With every position of dA_cumsum but each chunk's last set to 0", spike,
                   "your kernel mixes the chunk's other positions into its decay (a sum over the chunk?)",
                   last + "the cumsum's last element already sums the whole chunk.", undo=True),
        Experiment("With dA_cumsum moved one chunk later (chunk c's decay stored at c + 1)", shifted,
                   "your kernel reads the decay of chunk c + 1 for chunk c", last + "this chunk's, c.",
                   undo=True),
    ]


#: what a wrong decay function gives for v = dA_cumsum[c, Q-1] (the right one is exp(v))
_DECAY_FORMS = [
    ("1", lambda v: torch.ones_like(v), "the carried tile is not decayed at all (the decay left out, or "
     "put on the chunk's own term instead of the carried one)"),
    ("exp(exp(v))", lambda v: torch.exp(torch.exp(v)), "exp is applied twice: the exp of a decay that "
     "already is exp(dA_cumsum)"),
    ("1 + exp(v)", lambda v: 1 + torch.exp(v), "the carried tile is added once more, undecayed (a local term "
     "read from the carried or stored state, or the tile added twice)"),
    ("1 + v", lambda v: 1 + v, "the first-order approximation 1 + v takes the place of the exp"),
    ("exp(-v)", lambda v: torch.exp(-v), "the exponent's sign is flipped"),
    ("2**v", lambda v: torch.exp2(v), "ct.exp2 takes the place of ct.exp"),
    ("v", lambda v: v, "dA_cumsum itself takes the place of its exp"),
    ("exp(v)**2", lambda v: torch.exp(v) ** 2, "the decay is applied twice"),
    ("1 / (1 + exp(-v))", torch.sigmoid, "a sigmoid takes the place of the exp"),
    ("log(1 + exp(v))", torch.nn.functional.softplus, "a softplus takes the place of the exp"),
]

#: dA_cumsum at every position of every chunk in :func:`decay_probe`'s inputs
DECAY_PROBE_V = -0.5


def decay_probe(base, keys: dict[str, str], b: int = 1, nc: int = 3):
    """Inputs on which the carried tile can only change by the decay: every tile of ``keys["zero"]`` 0 (the
    local states, or dS_out and the states), the start ``keys["start"]`` all ones, and dA_cumsum =
    DECAY_PROBE_V at every position of every chunk (so that the decay's position and chunk do not matter)."""
    dA = base["dA_cumsum"]
    shapes = {k: (b, nc, *base[k].shape[2:]) for k in keys["zero"].split()}
    start = base[keys["start"]]
    return replace(base, **{k: torch.zeros(shape) for k, shape in shapes.items()},
                   **{keys["start"]: torch.ones(b, *start.shape[1:])},
                   dA_cumsum=torch.full((b, dA.shape[1], nc, dA.shape[3]), DECAY_PROBE_V))


def read_decay(carried: Sequence[torch.Tensor], last: torch.Tensor, what: str, hint: str):
    """The decay per chunk a kernel applies on :func:`decay_probe`'s inputs, from the tile it carries into
    each chunk in the order it walks them (``carried``: the first all ones) and the tile it leaves with
    (``last``): a finding when the kernel multiplies the tile by one factor g per chunk and g is not
    exp(DECAY_PROBE_V), or when the carried tile never changes though the tile it leaves with does."""
    first, second = carried[0], carried[1]
    tiles = (*carried, last)
    if not all(bool(torch.isfinite(t).all()) for t in tiles) or not close(first, torch.ones_like(first)):
        return None
    if all(close(t, first) for t in carried) and not close(last, first):
        return (f"With dA_cumsum = {DECAY_PROBE_V} at every position of every chunk and {what}, the tile "
                f"your kernel carries into every chunk is still the starting tile, though the tile it leaves "
                f"with has changed: the update is computed but never carried on (a new variable that "
                f"does not replace the carried one, or the starting tile loaded again inside the loop, "
                f"on top of the carried one?).\n      Load the starting tile once, before the loop, and "
                f"reassign the carried tile in the loop: {hint}",
                None)
    g = float(second.flatten()[0])
    if not all(close(t, torch.full_like(t, g**k)) for k, t in enumerate(tiles)):
        return None  # not one factor per chunk: something else than the decay's function
    v = torch.tensor(DECAY_PROBE_V, dtype=torch.float64)
    right = float(torch.exp(v))
    if abs(g) < 1e-6:
        return (f"With dA_cumsum = {DECAY_PROBE_V} at every position of every chunk and {what}, the tile "
                f"your kernel carries is 0 after the first chunk: it is not carried from one chunk to the "
                f"next (it restarts each chunk, or its decay is 0: a mask that picks the chunk's last "
                f"position selects nothing, pos == Q where pos == Q - 1 belongs).\n      The carried tile is "
                f"updated, not replaced: {hint}", None)
    if abs(g - right) <= 1e-4 * right:
        return None
    said = (f"With dA_cumsum = {DECAY_PROBE_V} at every position of every chunk and {what}, your kernel "
            f"multiplies the carried tile by {g:.4g} per chunk, where the decay is exp({DECAY_PROBE_V}) = "
            f"{right:.4g}")
    for form, fn, meaning in _DECAY_FORMS:
        if abs(g - float(fn(v))) <= 1e-4 * max(1.0, abs(g)):
            return f"{said}: {form} for v = {DECAY_PROBE_V}, so {meaning}.\n      {hint}", None
    for dtype in (torch.float16, torch.bfloat16):
        if g == float(torch.exp(v).to(dtype)):
            return (f"{said}: exp(v) rounded to {str(dtype).replace('torch.', '')}, so the decay is computed "
                    f"or kept in a low-precision dtype.\n      {hint} Keep it in float32.", None)
    if 0 < g < 1:
        k = math.log(g) / DECAY_PROBE_V  # g = exp(k * v)
        named = {LOG2E: "log2(e) = 1.4427: the factor that goes with exp2 kept with exp",
                 math.log(2): "ln(2) = 0.6931: exp2 of v * ln(2), where exp2 needs v * log2(e)",
                 math.log(2) ** 2: "ln(2)² = 0.4805: exp2 of v * ln(2), where exp2 needs v * log2(e)",
                 2.0: "2: the decay applied twice"}
        for factor, meaning in named.items():
            if abs(k - factor) <= 1e-3 * factor:
                return (f"{said}: exp({k:.4g} * v) for v = {DECAY_PROBE_V}, the exponent scaled by {meaning}."
                        f"\n      {hint}", None)
    ratio = g / right
    if abs(ratio - round(ratio)) < 1e-3 and round(ratio) >= 2:
        n = round(ratio)
        return (f"{said}: {n} times exp(v), exp summed over {n} positions of the chunk (every position holds "
                f"{DECAY_PROBE_V} here): a sum over the chunk's row where its last element alone is the "
                f"decay.\n      {hint}", None)
    return (f"{said}: your decay is another function of dA_cumsum[bi, hi, c, Q-1] than its exp.\n      "
            f"{hint}", None)


def _impulse(base):
    """No initial state, no decay, and a local state only in chunk 1 of 4."""
    states = base["states"]
    b, _, h, p, n = states.shape
    local = torch.zeros(1, 4, h, p, n)
    local[0, 1] = states[0, 0]
    return replace(base, states=local, dA_cumsum=torch.zeros(1, h, 4, base["dA_cumsum"].shape[-1]),
                   initial_states=torch.zeros(1, h, p, n))


def _read_impulse(lab, inputs, got):
    """Which chunks' entering state holds chunk 1's local state (see :func:`_impulse`)."""
    entering, local = got["chunk_init_states"][0], inputs["states"][0, 1]  # (nc, h, p, n), (h, p, n)
    if not bool(torch.isfinite(entering).all()):
        return None
    held = entering.flatten(1).abs().amax(1) > 1e-6
    if not all(close(entering[c], local) for c in held.nonzero().flatten().tolist()):
        return None  # the chunks hold something else than the local state: not a matter of order
    said = (f"With no initial state, no decay and a local state only in chunk 1 (of 0..3), your "
            f"chunk_init_states holds it in chunks {positions(held)}, where the state entering chunks 2 and "
            f"3 holds it (and no chunk before)")
    if held.tolist() == [False, True, True, True]:
        return (f"{said}: chunk 1's entry already includes chunk 1's own state, so you store the state "
                f"after the update.\n      chunk_init_states[c] is the state ENTERING chunk c: store it "
                f"first, then update.", None)
    return None


def read_last_store(entering: str, last: str, what: str, hint: str):
    """A reading of the base case itself: ``entering`` (one tile per chunk, on axis 1) right, and ``last``
    (the tile carried out of the loop) equal to the right ``entering`` tile of some chunk: the kernel stores
    ``last`` before the loop's final update (inside the loop, or before the last update)."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        if not close(got[entering], want[entering], lab.rtol, lab.atol) or close(got[last], want[last]):
            return None
        nc = want[entering].shape[1]
        order = range(nc)
        backward = "initial" in last  # the backward loop walks the chunks from the last to the first
        start = nc - 1 if backward else 0  # the chunk whose entering tile is the loop's starting value
        for c in (order if backward else reversed(order)):
            if close(got[last], want[entering][:, c], lab.rtol, lab.atol):
                if c == start and nc > 1:
                    return (f"Your {entering} are right, but your {last} equals the right {entering} of "
                            f"chunk {c}, the value the loop starts from: the tile you store is one the loop "
                            f"never updates (a variable set before the loop, e.g. a copy of the starting "
                            f"state, stored in place of the carried one, or a store placed before the loop)."
                            f"\n      {hint}", None)
                return (f"Your {entering} are right, but your {last} equals the right {entering} of chunk "
                        f"{c}: {what}.\n      {hint}", None)
        return None

    return Reading(lambda b: b, read)


def _read_added_again(lab, inputs, got):
    """A reading of the base case itself: chunk_init_states right, and final_states the right one plus one
    chunk's own local state (a term the loop already added, added once more)."""
    want = lab.reference(inputs)
    if not close(got["chunk_init_states"], want["chunk_init_states"], lab.rtol, lab.atol):
        return None
    extra = got["final_states"].double() - want["final_states"]
    nc = inputs["states"].shape[1]
    init = inputs["initial_states"].double()
    if bool(init.abs().max() > 1e-6) and close(extra, init, lab.rtol, lab.atol):
        return ("Your chunk_init_states are right, but your final_states is the right one plus the initial "
                "state: the initial state is added twice (it already entered as the loop's starting value; "
                "here it is added once more, e.g. after the loop).\n      final_states is the carried state "
                "as the loop leaves it: store it after the loop, adding nothing.", None)
    for c in reversed(range(nc)):
        local = inputs["states"][:, c].double()
        if bool(local.abs().max() > 1e-6) and close(extra, local, lab.rtol, lab.atol):
            which = "the last chunk's" if c == nc - 1 else f"chunk {c}'s"
            return (f"Your chunk_init_states are right, but your final_states is the right one plus {which} "
                    f"own local state states[:, {c}]: that term is added twice (the loop's update already "
                    f"added it; here it is added once more, e.g. after the loop).\n      final_states is the "
                    f"carried state as the loop leaves it: store it after the loop, adding nothing.", None)
    return None


def _read_chunk_left_out(lab, inputs, got):
    """A reading of the base case itself: the outputs equal the reference with one chunk's local state set
    to zero: the kernel never adds that chunk's own state (a guard, or a loop that starts late)."""
    states = inputs["states"]
    for c in range(states.shape[1]):
        if not bool(states[:, c].abs().max() > 1e-6):
            continue
        dropped = states.clone()
        dropped[:, c] = 0
        if lab.agrees(got, lab.reference(replace(inputs, states=dropped))):
            return (f"Your outputs are what they would be with chunk {c}'s local state set to 0: your kernel "
                    f"never adds states[:, {c}] (an if that skips chunk {c}, or a loop or a load that never "
                    f"reaches it).\n      Every chunk's own state is added: state = exp(dA_last) * state + "
                    f"states[bi, c, hi], for every c = 0..nchunks-1.", None)
    return None


def _read_start_reused(lab, inputs, got):
    """A reading of the base case itself: every chunk's entering state is the previous chunk's decay times
    the INITIAL state plus the previous chunk's local state: the update reads the starting value (a variable
    set before the loop) where the carried state belongs."""
    states, dA, init = (inputs[k].double() for k in ("states", "dA_cumsum", "initial_states"))
    nc = states.shape[1]
    if nc < 3:
        return None
    decay = torch.exp(dA[..., -1])  # (b, h, nc)
    alt = [init] + [decay[:, :, c, None, None] * init + states[:, c] for c in range(nc - 1)]
    alt = torch.stack(alt, dim=1)  # (b, nc, h, p, n)
    if close(got["chunk_init_states"], alt, lab.rtol, lab.atol) and not close(
            alt, lab.reference(inputs)["chunk_init_states"], lab.rtol, lab.atol):
        return ("Every chunk's entering state in your chunk_init_states is the previous chunk's decay times "
                "the INITIAL state plus its local state: your update reads the starting value (a variable "
                "set before the loop) where the carried state belongs.\n      state = exp(dA_last) * state + "
                "states[c], with the state the loop carries, reassigned at every chunk.", None)
    return None


def _reversed_chunks(b):
    """The chunks in reverse order (a kernel that walks them last to first is right on this, reordered)."""
    return replace(b, states=b["states"].flip(1), dA_cumsum=b["dA_cumsum"].flip(2))


def _chunks_back_in_order(out):
    return {"chunk_init_states": out["chunk_init_states"].flip(1), "final_states": out["final_states"]}


def _read_decay_probe(decay_hint):
    def read(lab, inputs, got):
        entering, final = got["chunk_init_states"][0], got["final_states"][0]  # (nc, h, p, n), (h, p, n)
        return read_decay(list(entering), final, "no local states, an initial state of ones",
                          decay_hint)

    return read


def _square(base, symmetric: bool | str):
    """The case with p = n (the smaller of the two), and with every local and initial state symmetric
    (``symmetric`` True), only the local ones ("states") or only the initial ones ("initial_states"), or as
    they are (False): a kernel that transposes a state is right only where that state is symmetric."""
    states, init = base["states"], base["initial_states"]
    m = min(states.shape[-1], states.shape[-2])
    states, init = states[..., :m, :m].contiguous(), init[..., :m, :m].contiguous()
    if symmetric in (True, "states"):
        states = states + states.transpose(-1, -2)
    if symmetric in (True, "initial_states"):
        init = init + init.transpose(-1, -2)
    return replace(base, states=states, initial_states=init)


def _last_chunk_twice(b):
    """The inputs with one more chunk, a copy of the last one (its local state and its decays): the final
    state of a walk that applies the last chunk's update twice."""
    states, dA = b["states"], b["dA_cumsum"]
    return replace(b, states=torch.cat([states, states[:, -1:]], dim=1),
                   dA_cumsum=torch.cat([dA, dA[:, :, -1:]], dim=2))


def _initial_decayed(base):
    """initial_states times chunk 0's decay exp(dA_cumsum[b, h, 0, Q-1])."""
    g0 = torch.exp(base["dA_cumsum"][:, :, 0, -1])[..., None, None]     # (b, h, 1, 1)
    return replace(base, initial_states=base["initial_states"] * g0)


def _square_initial_only(base):
    """p = n, every local state 0: the initial state is the only state carried from chunk to chunk."""
    square = _square(base, False)
    return replace(square, states=torch.zeros_like(square["states"]))


def one_decay(base):
    """The same moderate decay row (dA_cumsum = -0.3, -0.6, ...) in every chunk of every head and batch
    entry: a kernel that reads the decay of another chunk, head or batch entry is right here."""
    dA = base["dA_cumsum"]
    row = -0.3 * torch.arange(1, dA.shape[-1] + 1, dtype=dA.dtype)
    return replace(base, dA_cumsum=row.expand_as(dA).clone())


def _exact(base):
    """Small integer states, no decay: every sum exact in bfloat16."""
    return replace(base, states=small_integers(base["states"], 61),
                   initial_states=small_integers(base["initial_states"], 62),
                   dA_cumsum=torch.zeros_like(base["dA_cumsum"]))


def _initial_every_chunk(b):
    """The initial state added to every chunk's local state."""
    return replace(b, states=b["states"] + b["initial_states"][:, None])


def _read_stored_local(lab, inputs, got):
    """chunk_init_states that hold each chunk's own local state states[c]: the local state stored where the
    carried state entering the chunk belongs."""
    if not close(got["chunk_init_states"], inputs["states"], lab.rtol, lab.atol):
        return None
    return ("Your chunk_init_states[c] holds states[c], chunk c's own local state, where the state ENTERING "
            "chunk c belongs: the carried state (from initial_states through every chunk before c).\n      "
            "In the loop: store the carried state, then state = exp(dA_last) * state + states[c].", None)


def _read_stored_decayed(lab, inputs, got):
    """final_states right, and every stored entering state the right one times its chunk's decay: the carried
    state is decayed before the store where the decay belongs after it."""
    want = lab.reference(inputs)
    if not close(got["final_states"], want["final_states"], lab.rtol, lab.atol):
        return None
    g = chunk_decays(inputs)
    if not bool((g - 1).abs().max() > 1e-3) or not close(got["chunk_init_states"],
                                                          want["chunk_init_states"] * g, lab.rtol, lab.atol):
        return None
    return ("Your final_states is right, but every chunk_init_states[c] is the right one times chunk c's "
            "decay exp(dA_cumsum[bi, hi, c, Q-1]): your kernel decays the carried state before it stores it, "
            "where chunk c's entering state is stored first and decayed after.\n      In the loop: store the "
            "state entering chunk c, then state = exp(dA_last) * state + states[c].", None)


def _diagnosis(kernel, backend: str, device: str, case: Case) -> Diagnosis:
    """The experiments of exercise 6, in the order they run (see :mod:`._experiments`)."""
    lab = Lab(_run(kernel, backend, device, case), _reference)
    decay_hint = ("decay the carried state by exp(dA_cumsum[bi, hi, c, Q-1]), a number in (0, 1], then add "
                  "states[bi, c, hi].")
    zero = torch.zeros_like
    no_decay = lambda b: replace(b, dA_cumsum=zero(b["dA_cumsum"]))  # noqa: E731
    init_hint = ("the carried state starts from initial_states[bi, hi] (a zero-padded (1, 1, TP, TN) load), "
                 "and chunk 0's entry is that state, stored before chunk 0's update.")
    own_hint = ("add states[bi, c, hi] once, as it is, after decaying the OLD state: state = exp(dA_last) * "
                "state + states[c] (states[c] already holds the decay inside chunk c).")
    index_hint = ("dA_cumsum is (b, h, nchunks, Q): the decay of chunk c of head hi is dA_cumsum[bi, hi, c, "
                  "Q-1] (mind the axis order: it differs from states').")
    steps = [
        misplaced({"chunk_init_states": ("batch entry", "chunk", "head", "", ""),
                   "final_states": ("batch entry", "head", "", "")}),
        *chunk_decay_one(decay_hint),
        AsIf("the last chunk walked twice (a copy of its local state and its decay appended as one more "
             "chunk)", _last_chunk_twice, "your final_states has the last chunk's update applied once more: "
             "an update (decay, then add the local state) written out again after the loop, or a loop that "
             "runs one step too far", "the loop's update, state = exp(dA_last) * state + states[c], runs "
             "once per chunk; after the loop the state already LEAVES the last chunk: store it as it is.",
             outputs=["final_states"]),
        *exchanged_axes("states", {1: "chunk", 2: "head"}, own_hint),
        reshaped_tile("states", own_hint),
        reshaped_tile("initial_states", init_hint),
        read_cut_pn(["chunk_init_states", "final_states"], "the states are (p, n): a mask of your own keeps "
                    "rows i < p and columns j < n (or load with padding_mode=ct.PaddingMode.ZERO and mask "
                    "nothing)."),
        read_last_store("chunk_init_states", "final_states", "it is stored before the last chunk's update "
                        "(inside the loop, or before the update)", "final_states is the state LEAVING the "
                        "last chunk: store it once, after the loop, when every chunk has been added."),
        Reading(lambda b: b, _read_added_again),
        Reading(lambda b: b, _read_chunk_left_out),
        Reading(lambda b: b, _read_start_reused),
        Reading(lambda b: b, _read_stored_decayed),
        Reading(lambda b: b, _read_stored_local),
        same_batch(["states", "dA_cumsum", "initial_states"]),
        Experiment("With the local states negated", lambda b: replace(b, states=-b["states"]),
                   "your kernel subtracts the chunk's own state", "state = exp(dA_last) * state + states[c]: "
                   "the chunk's own state is added.", undo=True),
        *decay_experiments(decay_hint),
        Experiment("With p = n and every local and initial state symmetric", lambda b: _square(b, True),
                   "so your kernel transposes a state (the check confirmed it: with p = n and states that "
                   "are not symmetric, your output is wrong)",
                   "the states are (p, n) tiles, (TP, TN): add states[bi, c, hi] as it is loaded, no "
                   "ct.transpose (it only compiles when TP == TN, as in this case).",
                   controls=[lambda b: _square(b, False)],
                   then=[read_transposed_store(lambda b: _square(b, False),
                                               ["chunk_init_states", "final_states"]),
                         read_alternating_transpose(
                             "chunk_init_states", 1, _square_initial_only,
                             "With p = n and every local state 0 (only the initial state carried)",
                             "the carried state", "the carried state stays a (TP, TN) tile from chunk to "
                             "chunk: state = exp(dA_last) * state + states[c], no ct.transpose of it."),
                         Experiment("With p = n and only the initial states symmetric",
                                    lambda b: _square(b, "initial_states"),
                                    "so your kernel transposes the initial state",
                                    "initial_states is (b, h, p, n): its (TP, TN) tile starts the carried "
                                    "state as it is loaded, no ct.transpose (it only compiles when TP == TN, "
                                    "as in this case).", controls=[lambda b: _square(b, False)]),
                         Experiment("With p = n and only the local states symmetric",
                                    lambda b: _square(b, "states"),
                                    "so your kernel transposes the chunk's local state",
                                    "states is (b, nchunks, h, p, n): add states[bi, c, hi] as it is loaded, "
                                    "no ct.transpose (it only compiles when TP == TN, as in this case).",
                                    controls=[lambda b: _square(b, False)])]),
        low_precision(_exact, "small integer states and no decay", ["states", "initial_states"],
                      "the carried state is a float32 tile, stored as it is", controls=[no_decay]),
        Linearity(["states", "initial_states"], ["chunk_init_states", "final_states"], "the states",
                  "your kernel applies a nonlinearity to the carried state (an activation? a clamp?)",
                  "the recurrence is linear: state = exp(dA_last) * state + states[c], nothing applied to "
                  "the state."),
        *[AsIf(f"each chunk's local state taken from the chunk {said}",
               shifted_chunks("states", k, keep_last),
               f"your kernel adds the local state of chunk c {sign} 1 where chunk c's belongs: the state "
               f"leaving chunk c is exp(dA_last of c) * (the state entering c) + states[c], the same chunk c "
               f"in both (a walk that builds the state entering chunk c from chunk c - 1 needs chunk c - 1's "
               f"decay and local state)", own_hint)
          for k, keep_last, said, sign in ((-1, False, "after (the last chunk's 0)", "+"),
                                           (-1, True, "after (the last chunk's its own)", "+"),
                                           (1, False, "before (chunk 0's 0)", "-"))],
        Experiment("With every chunk's local state a copy of chunk 0's",
                   lambda b: None if b["states"].shape[1] < 2 else replace(
                       b, states=b["states"][:, :1].expand_as(b["states"]).clone()),
                   "so your kernel adds chunk 0's local state in every chunk (loaded once, before the loop, "
                   "or at a fixed index 0)", own_hint),
        Experiment("With initial_states equal to chunk 0's local state",
                   lambda b: replace(b, initial_states=b["states"][:, 0].clone()),
                   "so your kernel reads the initial state from states (chunk 0's local state) where "
                   "initial_states belongs", "the carried state starts from initial_states[bi, hi], its own "
                   "array: ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN))."),
        Experiment("With every chunk's local state equal to the initial state",
                   lambda b: None if not bool(b["initial_states"].abs().max() > 0) else replace(
                       b, states=b["initial_states"][:, None].expand_as(b["states"]).clone()),
                   "so your kernel adds initial_states where the chunk's own state belongs (a load from the "
                   "wrong array)", "each chunk adds its own local state, states[bi, c, hi]: "
                   "ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN)); initial_states only starts "
                   "the carried state."),
        Experiment("With initial_states = 0", lambda b: replace(b, initial_states=zero(b["initial_states"])),
                   "so the initial state's path is wrong", init_hint,
                   then=[*counted("initial_states", "the initial state", init_hint),
                         Experiment("With initial_states the same for every head (each a copy of head 0's)",
                                    lambda b: same_for_every_head(b, "initial_states", 1),
                                    "so your kernel reads the initial state of another head (a fixed index, "
                                    "or the batch index bi where the head hi belongs)", init_hint),
                         AsIf("initial_states added to every chunk's local state", _initial_every_chunk,
                              "your kernel adds the initial state in every chunk, where it only starts the "
                              "carried state before chunk 0", init_hint),
                         AsIf("initial_states decayed by chunk 0's decay exp(dA_cumsum[bi, hi, 0, Q-1])",
                              _initial_decayed, "your kernel decays the initial state once before chunk 0 "
                              "(chunk 0's entry is the initial state itself; its decay comes with chunk 0's "
                              "update)", init_hint)]),
        Experiment("With every chunk's local states = 0", lambda b: replace(b, states=zero(b["states"])),
                   "so the term of the chunk's own state is wrong", own_hint,
                   then=[*counted("states", "the chunk's own local state", own_hint, chunk_axis=1),
                         AsIf("each chunk's local state multiplied by its decay exp(dA_cumsum[bi, hi, c, "
                              "Q-1])", decayed_by_chunk("states"), "your kernel decays the chunk's own state "
                              "too: exp(dA_last) * (state + states[c]), where only the carried state is "
                              "decayed", own_hint),
                         AsIf("each chunk's local state multiplied by 1 - exp(dA_cumsum[bi, hi, c, Q-1])",
                              decayed_by_chunk("states", lambda g: 1 - g),
                              "your kernel scales the chunk's own state by 1 - decay, a moving average's "
                              "gate: the recurrence adds states[c] as it is (it already holds its own decays "
                              "and dt)", own_hint)]),
        Experiment("With the same decays in every chunk of every head (dA_cumsum = -0.3, -0.6, ...)",
                   one_decay, "so your kernel reads the decay of another chunk, head or batch entry",
                   index_hint, then=decay_index(index_hint),
                   also=[scaled_up(one_decay, ["states", "initial_states"])]),
        Reading(lambda b: decay_probe(b, {"zero": "states", "start": "initial_states"}),
                _read_decay_probe(decay_hint)),
        Experiment("With dA_cumsum = 0 (every decay 1)", no_decay, "so the decay is wrong", decay_hint,
                   then=[rounded_decays(), *decay_power(decay_hint)]),
        Experiment("With the chunks given in reverse order (and your outputs put back in order)",
                   _reversed_chunks, "so your kernel walks the chunks from the last to the first",
                   "the state flows forwards: c = 0, 1, ..., nchunks-1, starting from initial_states.",
                   undo=True, unmake=_chunks_back_in_order),
        Reading(_impulse, _read_impulse),
    ]
    prelude = [(tame_decay, "With the same case at milder decay (dA_cumsum scaled into [-4, 0]) your output "
                "is right: your kernel breaks only where the decay is strong",
                "exp of a large negative number is 0, which is right; look for an exponent that is positive, "
                "a division or a clamp.")]
    first = [read_clamp(["chunk_init_states", "final_states"],
                        "the recurrence is linear: the carried state is never clipped.")]
    return Diagnosis(lab, steps, prelude, first)


def _diagnose(kernel, backend: str, device: str, case: Case):
    return _diagnosis(kernel, backend, device, case)(dict(case.inputs))


def _run_cases(kernel, backend: str, device: str) -> list[Case]:
    from mamba2_tutorial.reference import state_passing

    cases = _cases(device)
    for case in cases:
        case.name += f", {backend} backend"
        states, dA, init = (case.inputs[k] for k in ("states", "dA_cumsum", "initial_states"))
        b, nc, h, p, n = states.shape
        Q = dA.shape[-1]
        exp_entering, exp_final = state_passing(states.cpu(), dA.cpu(), init.cpu())
        entering = prefilled((b, nc, h, p, n), device=device)
        final = prefilled((b, h, p, n), device=device)
        TP, TN = next_power_of_two(p), next_power_of_two(n)
        args = (states.clone(), dA.clone(), init.clone(), entering, final, Q, TP, TN)
        run_kernel(CHECK, kernel, (b, h), args, case, _NUDGE, backend)
        diagnose = once(_diagnose, kernel, backend, device, case)
        for name, act, exp, which in (
            ("chunk_init_states", entering.cpu(), exp_entering, 0),
            ("final_states", final.cpu(), exp_final, 1),
        ):
            tol = (1e-4, 1e-5 * max(1.0, float(exp.abs().max())))
            axes = ("batch entry", "chunk", "head", "", "") if which == 0 else ("batch entry", "head", "", "")
            compare(CHECK, act, exp, case, name=name, rtol=tol[0], atol=tol[1], hint=_NUDGE,
                    diagnose=diagnose, axes=axes,
                    extra=partial(unwritten, what=f"your kernel, into {name},",
                                  grid_axes=(0, 2) if which == 0 else (0, 1),
                                  loop_axes=(1,) if which == 0 else ()))  # fmt: skip
    return cases


def check_state_passing_kernel(kernel) -> None:
    """Launch the learner's ``state_passing_kernel`` on hidden cases: on the GPU when usable, and always on
    the CPU tile executor."""
    __tracebackhide__ = True
    check_kernel_on_backends(
        CHECK,
        lambda backend, device: _run_cases(kernel, backend, device),
        "1 to 6 chunks, with and without initial states, p and n below the tile sizes, dt*A down to -1e3",
    )
