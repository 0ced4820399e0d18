"""Following ``chunk_size`` and ``config`` from ``ssd_forward`` down to a kernel launch never returns to a
module it left.

A reader who follows one call of the fast forward opens ``fast/forward.py``, then the module that runs the
stages, then a launcher, and ends at ``runtime.launch.launch``. If the way down came back to a module already
left (A -> B -> A), the reader would have to keep both rooms in mind at once. For every shipped stage kind
(Unfused / Fused / Segmented state, PlainScan / SharedScan / ChunkScan), as inference and as training runs
them, the package modules on the call stack at every launch are recorded (launches are recorded, not run:
``runtime.launch.recording``) and checked. The checker is also run on a small synthetic chain that does come
back, so that a test that cannot fail is not mistaken for one that passes.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from mamba2_tutorial import fast
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.runtime import launch as launch_module
from mamba2_tutorial.runtime.launch import recording

PACKAGE = "mamba2_tutorial"

#: every state stage kind and every scan stage kind, the chunk scan with and without kd from the state stage
CONFIGS = {
    "unfused+plain": fast.FastConfig(fast.Unfused(), fast.PlainScan()),
    "fused+shared": fast.FastConfig(fast.Fused(occupancy=2), fast.SharedScan(occupancy=3)),
    "fused+chunk": fast.FastConfig(fast.Fused(form=fast.StateForm.ACC),
                                   fast.ChunkScan(torch.bfloat16, fast.Decay.KEY_LOG2)),
    "fused-kd+chunk": fast.FastConfig(fast.Fused(mma_rows=32, store_kd=True),
                                      fast.ChunkScan(decay=fast.Decay.KEY_LOG2)),
    "segmented+chunk": fast.FastConfig(fast.Segmented(segments=2, store_kd=True),
                                       fast.ChunkScan(decay=fast.Decay.KEY_LOG2, unroll=True)),
}


def returns(stack: list[str]) -> list[str]:
    """The modules of ``stack`` (outermost first) entered again after another module came between them
    (A -> B -> A); a module calling itself (A -> A) is one stay in one room."""
    seen: set[str] = set()
    back = []
    for i, module in enumerate(stack):
        if i and module == stack[i - 1]:
            continue
        if module in seen:
            back.append(module)
        seen.add(module)
    return back


def stacks_at(target, entry, run, package: str = PACKAGE) -> list[list[str]]:
    """Run ``run()`` and return, for every call of the function ``target``, the modules of ``package`` on
    the call stack from ``entry``'s frame down to ``target``'s, outermost first."""
    stacks = []

    def profile(frame, event, _arg):
        if event != "call" or frame.f_code is not target.__code__:
            return
        modules, outermost = [], None  # up to the OUTERMOST call of entry (entry may call itself)
        f = frame
        while f is not None:
            name = f.f_globals.get("__name__", "")
            if name == package or name.startswith(package + "."):
                modules.append(name)
            if f.f_code is entry.__code__:
                outermost = len(modules)
            f = f.f_back
        assert outermost is not None, f"{target.__name__} called from outside {entry.__name__}"
        stacks.append(modules[:outermost][::-1])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(previous)
    return stacks


def _module(name: str, source: str, **names) -> types.SimpleNamespace:
    """Functions defined in a module called ``name`` (their frames say so), seeing ``names``."""
    scope = {"__name__": name, **names}
    exec(source, scope)
    return types.SimpleNamespace(**{k: v for k, v in scope.items() if callable(v) and not k.startswith("__")})


def test_the_checker_sees_a_return_to_a_module_left():
    end = _module("chain.end", "def launch():\n    return 1\n")
    low = _module("chain.low", "def launcher():\n    return launch()\n", launch=end.launch)
    mid = _module("chain.mid", "def route():\n    return launcher()\n\ndef back():\n    return helper()\n",
                  launcher=low.launcher, helper=None)
    top = _module("chain.top", "def entry(way):\n    return way()\n\ndef helper():\n    return launcher()\n",
                  launcher=low.launcher)
    mid.back.__globals__["helper"] = top.helper
    straight = stacks_at(end.launch, top.entry, lambda: top.entry(mid.route), package="chain")
    assert straight == [["chain.top", "chain.mid", "chain.low", "chain.end"]] and returns(straight[0]) == []
    looped = stacks_at(end.launch, top.entry, lambda: top.entry(mid.back), package="chain")
    assert looped == [["chain.top", "chain.mid", "chain.top", "chain.low", "chain.end"]]
    assert returns(looped[0]) == ["chain.top"]
    assert returns(["a", "a", "b", "b", "c"]) == [] and returns(["a", "b", "c", "b"]) == ["b"]


def _inputs(training: bool) -> dict:
    gen = torch.Generator().manual_seed(0)
    b, l, h, p, g, n, Q = 1, 80, 2, 16, 1, 16, 32                  # 3 chunks, the last ragged
    bf16 = torch.bfloat16
    inp = dict(x=torch.randn(b, l, h, p, generator=gen).to(bf16), dt=torch.rand(b, l, h, generator=gen),
               A=-torch.rand(h, generator=gen), B=torch.randn(b, l, g, n, generator=gen).to(bf16),
               C=torch.randn(b, l, g, n, generator=gen).to(bf16), chunk_size=Q,
               D=torch.randn(h, generator=gen), z=torch.randn(b, l, h, p, generator=gen).to(bf16),
               dt_bias=torch.randn(h, generator=gen), dt_softplus=True)
    if training:
        inp["x"].requires_grad_(True)
    return inp


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_way_to_every_launch_never_returns_to_a_module_left(name, training):
    inp = _inputs(training)
    with recording(lambda kernel, grid, args: None):
        stacks = stacks_at(launch_module.launch, ssd_forward,
                           lambda: ssd_forward(**inp, backend="cpu", config=CONFIGS[name]))
    assert len(stacks) >= 2, "a state stage and a scan stage launch at least once each"
    for stack in stacks:
        assert stack[0] == "mamba2_tutorial.fast.forward" and stack[-1] == "mamba2_tutorial.runtime.launch"
        assert returns(stack) == [], f"{name}: the way to a launch comes back: {' -> '.join(stack)}"


@pytest.mark.parametrize("run", ["inference", "training", "varlen training"])
def test_a_packed_batch_takes_the_same_way(run):
    """With ``seq_idx`` inference and training take the unpacked way, the kernels resetting the state
    themselves; ``return_varlen_states`` under autograd runs every sequence alone through ``ssd_forward``:
    one room entered again from itself, never from another."""
    training = run != "inference"
    inp = _inputs(training)
    lengths = torch.tensor([30, 7, 43])
    seq_idx = torch.repeat_interleave(torch.arange(3, dtype=torch.int32), lengths)[None]
    varlen = {}
    if run == "varlen training":
        cu_seqlens = torch.tensor([0, *lengths.cumsum(0).tolist()], dtype=torch.int32)
        varlen = dict(cu_seqlens=cu_seqlens, return_varlen_states=True)
    with recording(lambda kernel, grid, args: None):
        stacks = stacks_at(launch_module.launch, ssd_forward,
                           lambda: ssd_forward(**inp, seq_idx=seq_idx, backend="cpu",
                                               config=CONFIGS["fused+chunk"], **varlen))
    alone = bool(varlen)
    if alone:
        assert len(stacks) >= 6, "three sequences, a state stage and a scan stage each"
    else:
        assert 2 <= len(stacks) <= 4, "one state stage and one scan stage for the whole batch"
    for stack in stacks:
        assert (stack[:2] == ["mamba2_tutorial.fast.forward"] * 2) == alone, stack
        assert returns(stack) == [], f"the way to a launch comes back: {' -> '.join(stack)}"
