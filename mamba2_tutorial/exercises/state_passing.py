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


def _variant(case: Case, *, order="store_then_update", decay="last", initial=True):
    """A (possibly wrong) state passing in float64, for the mistake detectors: (entering, final)."""
    s = case.inputs["states"].detach().cpu().double()
    dA = case.inputs["dA_cumsum"].detach().cpu().double()
    state = case.inputs["initial_states"].detach().cpu().double().clone()
    if not initial:
        state.zero_()
    d = {"last": torch.exp(dA[..., -1]), "first": torch.exp(dA[..., 0]), "none": torch.ones_like(dA[..., 0])}[
        decay
    ]
    entering = torch.empty_like(s)
    for c in range(s.shape[1]):
        dc = d[:, :, c, None, None]
        if order == "store_then_update":
            entering[:, c] = state
            state = dc * state + s[:, c]
        elif order == "decay_after":
            entering[:, c] = state
            state = dc * (state + s[:, c])
        else:  # update_then_store
            state = dc * state + s[:, c]
            entering[:, c] = state
    return entering, state


def _mistakes(which: int) -> list[Mistake]:
    def m(**kw):
        return lambda case: _variant(case, **kw)[which]

    return [
        Mistake(
            "the state stored AFTER the update",
            m(order="update_then_store"),
            "chunk_init_states[c] is the state ENTERING chunk c: store first, then update (chunk 0 gets the "
            "initial state).",
        ),
        Mistake(
            "the decay applied after the update",
            m(order="decay_after"),
            "decay the OLD state, then add the chunk's local state: exp(dA_last) * state + states[c]. "
            "states[c] already includes the decay inside its own chunk.",
        ),
        Mistake(
            "the decay of the chunk's FIRST position",
            m(decay="first"),
            "the decay across a whole chunk is exp(dA_cumsum[..., Q-1]): the inclusive cumsum's LAST one.",
        ),
        Mistake(
            "no decay between chunks",
            m(decay="none"),
            "multiply the carried state by exp(dA_cumsum[..., Q-1]).",
        ),
        Mistake(
            "initial_states ignored",
            m(initial=False),
            "the carried state starts from initial_states[bi, hi], not from zeros.",
        ),
    ]


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
        for name, act, exp, which in (
            ("chunk_init_states", entering.cpu(), exp_entering, 0),
            ("final_states", final.cpu(), exp_final, 1),
        ):
            tol = (1e-4, 1e-5 * max(1.0, float(exp.abs().max())))
            axes = ("batch entry", "chunk", "head", "", "") if which == 0 else ("batch entry", "head", "", "")
            compare(CHECK, act, exp, case, name=name, rtol=tol[0], atol=tol[1], hint=_NUDGE,
                    mistakes=_mistakes(which), axes=axes, extra=unwritten)  # fmt: skip
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
