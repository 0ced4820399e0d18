"""Diagnosis by experiment: re-run the learner's kernel on changed inputs and say what the runs showed.

A failed kernel check does not guess the cause from a list of known wrong answers. It re-runs the learner's
kernel on *probe inputs*, each of which changes one thing: a term switched off (a zero entering state,
``dA_cumsum = 0`` so that every decay is 1, ``dt = 1``), an operand exchanged or transposed in memory, a
single nonzero position (an impulse), the same case with milder decay or in float32. Three kinds of
experiment:

* a **switch-off** (:class:`Experiment`): the kernel's output on the changed inputs is compared with the
  reference *on the changed inputs*. Right there means the part that was switched off is where the kernel
  goes wrong ("with the entering state set to zero your output is right, so the state term is wrong");
* an **undo** (``Experiment(undo=True)``): the output on the changed inputs is compared with the reference on
  the *unchanged* inputs. Right means the change undid the kernel's mistake exactly ("with C and B exchanged
  your output is the right answer: your kernel computes B Cᵀ");
* a **reading** (:class:`Reading`): an input built so that the right output is easy to read (one nonzero
  position, one decay for every chunk, the case itself compared with its answer moved as a wrong store index
  would move it), and a description of where the kernel's output differs from it.

Two experiments are shared by every exercise: :func:`low_precision` (values whose products and sums are exact
in bfloat16: a kernel right there rounds to a low-precision dtype) and :func:`misplaced` (right values at the
wrong places). A padding probe counts only when the kernel's outputs hold NaN on the CPU executor
(:func:`nan_on_cpu`), which fills undetermined padding with NaN.

An experiment may name *controls*: changed inputs on which the kernel must stay wrong for the conclusion to
hold (e.g. "right when both dS_out and the decays are switched off, but not when either alone is"). A cause is
named only when an experiment confirmed it; otherwise the check says where the wrong elements are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

Outputs = dict[str, torch.Tensor]
Inputs = dict


def close(got: torch.Tensor, want: torch.Tensor, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    if tuple(got.shape) != tuple(want.shape):
        return False
    g, w = got.detach().double().cpu(), want.detach().double().cpu()
    if not bool(torch.isfinite(w).all()):
        return False  # a probe must have a finite answer to confirm anything
    scale = max(1.0, float(w.abs().max())) if w.numel() else 1.0
    return bool(torch.isclose(g, w, rtol=rtol, atol=atol * scale).all())


class Lab:
    """Runs the learner's kernel (``run(inputs) -> outputs``) and the float64 reference
    (``reference(inputs) -> outputs``) on any inputs of the exercise's signature, and compares them."""

    def __init__(self, run: Callable[[Inputs], Outputs], reference: Callable[[Inputs], Outputs],
                 rtol: float = 1e-4, atol: float = 1e-5):
        self._run, self._reference, self.rtol, self.atol = run, reference, rtol, atol

    def run(self, inputs: Inputs) -> Outputs | None:
        """The kernel's outputs on ``inputs`` (on the CPU), or None when it raised. The same inputs object
        run again (the base case that several readings share) is not launched again."""
        memo = getattr(self, "_memo", None)
        if memo is not None and memo[0] is inputs:
            return None if memo[1] is None else {k: v.clone() for k, v in memo[1].items()}
        try:
            got = {k: v.detach().cpu() for k, v in self._run(inputs).items()}
        except Exception:  # noqa: BLE001 - a run that fails confirms nothing
            got = None
        self._memo = (inputs, None if got is None else {k: v.clone() for k, v in got.items()})
        return got

    def reference(self, inputs: Inputs) -> Outputs:
        return self._reference(inputs)

    def agrees(self, got: Outputs | None, want: Outputs, outputs: Sequence[str] | None = None) -> bool:
        if got is None:
            return False
        names = outputs or list(want)
        return all(close(got[k], want[k], self.rtol, self.atol) for k in names)

    def right(self, inputs: Inputs, outputs: Sequence[str] | None = None) -> bool:
        return self.agrees(self.run(inputs), self.reference(inputs), outputs)


Finding = tuple[str, "str | None"]  # (the hint's text, the recipe for hint(2) or None)


@dataclass
class Experiment:
    """Run the kernel on ``make(base)`` (None: not applicable to this case). When its output is right there
    (``undo``: right for the *unchanged* base, after ``unmake`` maps the outputs back, e.g. the chunks put
    back in order), and wrong on every input of ``controls``, report ``change``, ``finding`` and ``hint``.
    ``then`` are finer experiments run on ``then_base(base)`` first; the first of them that confirms
    something is reported instead."""

    change: str
    make: Callable[[Inputs], Inputs | None]
    finding: str
    hint: str
    undo: bool = False
    outputs: Sequence[str] | None = None
    controls: Sequence[Callable[[Inputs], Inputs | None]] = ()
    then: Sequence[Callable[[Lab, Inputs], Finding | None]] = ()
    then_base: Callable[[Inputs], Inputs] | None = None
    unmake: Callable[[Outputs], Outputs] | None = None  # undo's change on the outputs (e.g. reorder chunks)
    recipe: str | None = None
    #: further changes on which the kernel must be right too (e.g. the same change with the inputs scaled
    #: up, so that a clamp the change kept clear of shows): the finding holds only if it is
    also: Sequence[Callable[[Inputs], Inputs | None]] = ()

    def __call__(self, lab: Lab, base: Inputs) -> Finding | None:
        changed = self.make(base)
        if changed is None:
            return None
        want = lab.reference(base if self.undo else changed)
        got = lab.run(changed)
        if got is not None and self.unmake is not None:
            got = self.unmake(got)
        if not lab.agrees(got, want, self.outputs):
            return None
        for other in self.also:
            changed_too = other(base)
            if changed_too is None or not lab.right(changed_too, self.outputs):
                return None
        for control in self.controls:
            other = control(base)
            if other is None or lab.right(other, self.outputs):
                return None
        if self.then:
            sub = self.then_base(base) if self.then_base else base
            if not lab.right(sub):  # the finer experiments need a base on which the kernel is wrong
                for step in self.then:
                    found = step(lab, sub)
                    if found is not None:
                        return found
        result = ("your output is the right answer to the unchanged inputs" if self.undo
                  else "your output is right")
        joint = ", " if self.finding.startswith("so ") else ": "
        return f"{self.change}, {result}{joint}{self.finding}.\n      {self.hint}", self.recipe


@dataclass
class Reading:
    """Run the kernel on ``make(base)`` and let ``read(lab, changed, outputs)`` describe what went wrong
    (None: nothing it can name)."""

    make: Callable[[Inputs], Inputs | None]
    read: Callable[[Lab, Inputs, Outputs], Finding | None]

    def __call__(self, lab: Lab, base: Inputs) -> Finding | None:
        changed = self.make(base)
        if changed is None:
            return None
        got = lab.run(changed)
        if got is None or lab.agrees(got, lab.reference(changed)):
            return None
        return self.read(lab, changed, got)


@dataclass
class AsIf:
    """The kernel's output on the base is the reference's answer to *other* inputs, ``make(base)``: the
    kernel computes the right thing for inputs it was not given. A term left out answers the inputs with
    that term 0; a term counted twice, with it doubled; a decay squared, with ``dA_cumsum`` doubled. Reported
    only where the base's own answer differs from that one (else the change proves nothing)."""

    change: str                                  # "every chunk's local state = 0"
    make: Callable[[Inputs], Inputs | None]
    finding: str
    hint: str
    outputs: Sequence[str] | None = None

    def __call__(self, lab: Lab, base: Inputs) -> Finding | None:
        changed = self.make(base)
        if changed is None:
            return None
        got = lab.run(base)
        if not lab.agrees(got, lab.reference(changed), self.outputs):
            return None
        if lab.agrees(got, lab.reference(base), self.outputs):
            return None
        return (f"Your output is the right answer to the same inputs with {self.change}: {self.finding}.\n"
                f"      {self.hint}", None)


def counted(key: str, what: str, hint: str, *, chunk_axis: int | None = None,
            outputs: Sequence[str] | None = None) -> list[AsIf]:
    """How often the term ``what`` (the input ``key``) enters the output: not at all (as if ``key`` were 0)
    or twice (as if it were doubled); with ``chunk_axis``, also twice for the first or the last chunk only (a
    term added once more before or after a loop over the chunks)."""

    def scaled(factor, index=None):
        def make(b):
            t = b[key].clone()
            if index is None:
                t = t * factor
            elif t.shape[chunk_axis] < 2:
                return None
            else:
                t.select(chunk_axis, index).mul_(factor)
            return replace(b, **{key: t})
        return make

    steps = [AsIf(f"{key} = 0", scaled(0.0), f"your kernel leaves {what} out", hint, outputs),
             AsIf(f"{key} doubled", scaled(2.0), f"your kernel counts {what} twice (added once more, or a "
                  f"load of it added to itself)", hint, outputs)]
    if chunk_axis is not None:
        steps += [AsIf(f"{key} doubled in the first chunk only", scaled(2.0, 0), f"your kernel counts {what} "
                       f"twice in the first chunk (chunk 0) only: it is added once more, before or after the "
                       f"loop over the chunks", hint, outputs),
                  AsIf(f"{key} doubled in the last chunk only", scaled(2.0, -1), f"your kernel counts {what} "
                       f"twice in the last chunk only: it is added once more, before or after the loop over "
                       f"the chunks", hint, outputs)]
    return steps


def decay_power(hint: str, key: str = "dA_cumsum", outputs: Sequence[str] | None = None) -> list[AsIf]:
    """The decay exp(v) applied as exp(k v): not at all (k = 0, as if ``key`` were 0), squared (k = 2: the
    decay applied twice, or its exponent doubled) or as its square root (k = 1/2)."""

    def scaled(factor):
        return lambda b: replace(b, **{key: b[key] * factor})

    return [AsIf(f"{key} = 0 (every decay 1)", scaled(0.0), "your kernel applies no decay: the factor "
                 "exp(...) is left out", hint, outputs),
            AsIf(f"{key} doubled", scaled(2.0), "your decay is squared: it is applied twice (a decay line "
                 "repeated, or the decayed tile decayed again), or its exponent is doubled", hint, outputs),
            AsIf(f"{key} halved", scaled(0.5), "your decay is the square root of the right one: its exponent "
                 "is halved", hint, outputs),
            AsIf(f"{key} times ln 2 = 0.693", scaled(0.6931471805599453), "your kernel computes 2**v where "
                 "the decay is exp(v): ct.exp2(v) needs v * LOG2E (LOG2E = 1.4426950408889634), or write "
                 "ct.exp(v)", hint, outputs),
            AsIf(f"{key} times (ln 2)² = 0.480", scaled(0.6931471805599453 ** 2), "your kernel computes "
                 "2**(v / LOG2E) where the decay is exp(v) = 2**(v * LOG2E): LOG2E divides the exponent "
                 "where it multiplies it", hint, outputs)]


def chunk_decay_one(hint: str, key: str = "dA_cumsum") -> list[AsIf]:
    """The first or the last chunk's decay taken as 1 (a chunk treated apart: "nothing to decay into"), as
    if that chunk's ``key`` (b, h, nchunks, Q) were 0."""

    def zeroed(index):
        def make(b):
            t = b[key]
            if t.shape[2] < 2:
                return None
            t = t.clone()
            t[:, :, index] = 0.0
            return replace(b, **{key: t})
        return make

    return [AsIf(f"the last chunk's {key} = 0 (its decay 1)", zeroed(-1), "your kernel takes the LAST "
                 "chunk's decay as 1 (the last chunk treated apart, or its decay skipped)", hint),
            AsIf(f"chunk 0's {key} = 0 (its decay 1)", zeroed(0), "your kernel takes chunk 0's decay as 1 "
                 "(the first chunk treated apart, or its decay skipped)", hint)]


def decay_index(hint: str, key: str = "dA_cumsum") -> list:
    """Which index of ``key`` (b, h, nchunks, Q) a kernel that reads the decay of another chunk, head or
    batch entry gets wrong: the same decays along one axis only (the chunks, the heads, the batch entries),
    then whether every chunk reads the first or the last chunk's."""

    def same_along(axis, name):
        def make(b):
            t = b[key]
            if t.shape[axis] < 2:
                return None
            return replace(b, **{key: t.narrow(axis, 0, 1).expand_as(t).clone()})
        return Experiment(f"With {key} the same in every {name} (each a copy of the first), different from "
                          f"{'head to head' if axis != 1 else 'chunk to chunk'}", make,
                          f"so your kernel reads the decay of another {name} than its own", hint)

    def every_chunk_from(index):
        def make(b):
            t = b[key]
            if t.shape[2] < 2:
                return None
            return replace(b, **{key: t.narrow(2, index % t.shape[2], 1).expand_as(t).clone()})
        return make

    def reversed_chunks(b):
        t = b[key]
        return None if t.shape[2] < 2 else replace(b, **{key: t.flip(2).contiguous()})

    return [*chunk_decay_one(hint, key),
            *exchanged_axes(key, {1: "head", 2: "chunk"}, hint),
            AsIf(f"{key}'s chunks in reverse order", reversed_chunks,
                 "your kernel reads the decay of chunk n - 1 - c for chunk c (in a backward walk, the loop "
                 "counter i where the chunk c = n - 1 - i belongs)", hint),
            AsIf(f"every chunk's {key} equal to the last chunk's", every_chunk_from(-1),
                 "your kernel reads the LAST chunk's decay in every chunk (a fixed index, or the loop's "
                 "bound where its counter belongs)", hint),
            AsIf(f"every chunk's {key} equal to chunk 0's", every_chunk_from(0),
                 "your kernel reads chunk 0's decay in every chunk (a fixed index 0 where the chunk c "
                 "belongs)", hint),
            same_along(2, "chunk"), same_along(1, "head"), same_along(0, "batch entry")]


def exchanged_axes(key: str, axes: dict[int, str], hint: str) -> list[AsIf]:
    """The input ``key`` read with two of its axes exchanged (``axes``: axis -> name; a load whose index or
    tile shape takes the array's axes in another order): the kernel's output is the answer to the inputs
    with ``key[..., i, ..., j, ...]`` replaced by ``key[..., j, ..., i, ...]`` (0 where that index is out of
    range, as zero padding reads it)."""

    def exchange(d1, d2):
        def make(b):
            t = b[key]
            m = min(t.shape[d1], t.shape[d2])
            if m < 2:
                return None
            out = torch.zeros_like(t)
            out.narrow(d1, 0, m).narrow(d2, 0, m).copy_(t.transpose(d1, d2).narrow(d1, 0, m).narrow(d2, 0, m))
            return replace(b, **{key: out})
        return make

    dims = sorted(axes)
    return [AsIf(f"{key}'s {axes[d1]} and {axes[d2]} axes exchanged", exchange(d1, d2),
                 f"your kernel reads {key} with its {axes[d1]} (axis {d1}) and {axes[d2]} (axis {d2}) axes "
                 f"exchanged: the load's index or its tile shape takes the array's axes in another order",
                 hint)
            for i, d1 in enumerate(dims) for d2 in dims[i + 1:]]


def read_at_group(keys: dict[str, int], groups: Callable[[Inputs], int]) -> list[AsIf]:
    """Per-head inputs (``keys``: name -> head axis) read at the group index hi // HEADS_PER_GROUP where the
    head hi belongs (only B and C are per group): the kernel's output is the answer to the inputs whose head
    hi holds head hi // HEADS_PER_GROUP's values, with ``groups(inputs)`` groups. Tried for all of ``keys``
    together, then every smaller set of them."""

    def make(which):
        def f(b):
            g = groups(b)
            changed = {}
            for key in which:
                t = b[key]
                h = t.shape[keys[key]]
                if g < 2 or h <= g or h % g:   # one group: the group index is 0, a fixed index's answer
                    return None
                index = torch.arange(h, device=t.device) // (h // g)
                changed[key] = t.index_select(keys[key], index).clone()
            return replace(b, **changed)
        return f

    names = list(keys)
    sets = [w for size in range(len(names), 0, -1) for w in itertools.combinations(names, size)]
    return [AsIf(f"{' and '.join(w)} of every head hi taken from head hi // HEADS_PER_GROUP", make(w),
                 f"your kernel reads {' and '.join(w)} at the group index hi // HEADS_PER_GROUP where the "
                 f"head index hi belongs", f"{' and '.join(w)} {'have' if len(w) > 1 else 'has'} one entry "
                 f"per HEAD: index {'them' if len(w) > 1 else 'it'} with this block's head hi; only B and C "
                 f"have one per group, at hi // HEADS_PER_GROUP.")
            for w in sets]


def reshaped_for_transpose(key: str, chunk: Callable[[Inputs], int], hint: str) -> AsIf:
    """The (Q, T) tile of ``key`` (b, l, ., d) in each chunk (T = d rounded up to a power of two, zero padded)
    reshaped to (T, Q) and transposed back, or reshaped where a transpose belongs: element [k, j] of the tile
    read from its flat position j*Q + k. ``chunk(inputs)`` gives Q."""

    def make(b):
        t = b[key]
        Q = chunk(b)
        bs, l, m, d = t.shape
        T = 1 << max(0, (d - 1).bit_length())
        nc = -(-l // Q)
        if T < 2 or Q < 2:
            return None
        tile = torch.zeros((bs, nc * Q, m, T), dtype=t.dtype)
        tile[:, :l, :, :d] = t.cpu()
        tile = tile.reshape(bs, nc, Q, m, T).permute(0, 1, 3, 2, 4)           # (b, nc, m, Q, T)
        scrambled = tile.reshape(bs, nc, m, T, Q).transpose(-1, -2)           # [k, j] = flat[j*Q + k]
        out = scrambled.permute(0, 1, 3, 2, 4).reshape(bs, nc * Q, m, T)[:, :l, :, :d]
        return replace(b, **{key: out.contiguous().to(t.device)})

    return AsIf(f"{key}'s (Q, T) tile in every chunk reshaped to (T, Q) and transposed back", make,
                f"your kernel turns {key}'s tile around with a reshape where a transpose belongs: a reshape "
                f"keeps the elements in their order and only regroups them, so element [k, j] comes from "
                f"somewhere else", hint)


def reshaped_tile(key: str, hint: str) -> AsIf:
    """The (p, n) tiles of ``key`` (..., p, n) loaded as (TN, TP) tiles (the sizes exchanged, zero padded,
    T = the size rounded up to a power of two) and reshaped to (TP, TN): element [i, j] of the tile read from
    flat position i*TN + j of the (TN, TP) tile, whose rows run along p and columns along n."""

    def make(b):
        t = b[key]
        p, n = t.shape[-2], t.shape[-1]
        TP, TN = (1 << max(0, (d - 1).bit_length()) for d in (p, n))
        if TP == TN:
            return None
        loaded = torch.zeros((*t.shape[:-2], TN, TP), dtype=t.dtype, device=t.device)
        loaded[..., :min(p, TN), :min(n, TP)] = t[..., :min(p, TN), :min(n, TP)]
        out = loaded.reshape(*t.shape[:-2], TP, TN)[..., :p, :n]
        return replace(b, **{key: out.contiguous()})

    return AsIf(f"{key}'s (TP, TN) tiles loaded as (TN, TP) and reshaped to (TP, TN)", make,
                f"your kernel loads {key}'s tile with the shape (TN, TP), its sizes exchanged, and reshapes "
                f"it to (TP, TN): a reshape keeps the elements in their order and only regroups them (it is "
                f"no transpose), so element [i, j] comes from somewhere else", hint)


def read_cut_pn(outputs: Sequence[str], hint: str) -> Reading:
    """Outputs (..., p, n) right except past a bound along p or n, where they are 0: a mask or a bound on
    that axis (e.g. n's index compared with p, the two sizes exchanged)."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        for name in outputs:
            g, w = got[name].double(), want[name].double()
            if not bool(torch.isfinite(g).all()):
                return None
            tol = lab.atol + lab.rtol * w.abs()
            wrong = (g - w).abs() > tol
            if not bool(wrong.any()):
                continue
            p, n = w.shape[-2], w.shape[-1]
            for axis, size, other, said, other_said in ((-1, n, p, "n", "p"), (-2, p, n, "p", "n")):
                index = torch.arange(size, device=w.device)
                index = index if axis == -1 else index[:, None]
                hit = wrong.any(dim=tuple(d for d in range(w.dim()) if d != w.dim() + axis))
                if not bool(hit.any()):
                    continue
                cut = int(hit.nonzero()[0])
                if not (bool(hit[cut:].all()) and cut > 0):
                    continue
                past = (index >= cut).expand_as(w)
                if bool((wrong == (past & (w.abs() > tol))).all()) and bool((g[past] == 0).all()):
                    because = (f"a mask or a bound compares {said}'s index with {other_said} = {other} (the "
                               f"two sizes exchanged)" if cut == other else
                               f"a mask or a bound cuts {said} at {cut}")
                    return (f"In your {name}, the elements at {said} = 0..{cut - 1} are right and those at "
                            f"{said} = {cut}..{size - 1} are 0: {because}.\n      {hint}", None)
        return None

    return Reading(lambda b: b, read)


def chunk0_everywhere(keys: Sequence[str], chunk: Callable[[Inputs], int], hint: str) -> list[AsIf]:
    """The inputs ``keys`` (b, l, ...) read in every chunk at chunk 0's positions (a load's position index
    without the chunk offset c*Q, or a fixed chunk index 0): the kernel's output is the answer to the
    inputs whose every chunk of ``keys`` is a copy of chunk 0's. Tried for all of ``keys`` together, then
    each alone."""

    def make(which):
        return lambda b: same_chunks(b, which, chunk(b))

    groups = [tuple(keys)] + ([(k,) for k in keys] if len(keys) > 1 else [])
    return [AsIf(f"every chunk's {' and '.join(g)} a copy of chunk 0's", make(g),
                 f"your kernel reads {' and '.join(g)} of chunk 0 in every chunk: the position index lacks "
                 f"the chunk offset (c*Q + k in elements, or the chunk index c in tiles)", hint)
            for g in groups]


def read_transposed_store(make: Callable[[Inputs], Inputs | None], outputs: Sequence[str]) -> Reading:
    """With p = n (``make``): one output that is exactly the right one transposed (its last two axes
    exchanged) while every other output is right: the tile is transposed where that output is stored."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        for name in outputs:
            g, w = got[name].double(), want[name].double()
            if g.shape[-1] != g.shape[-2] or close(g, w, lab.rtol, lab.atol):
                continue
            others = [k for k in outputs if k != name]
            if close(g, w.transpose(-1, -2), lab.rtol, lab.atol) and all(
                    close(got[k], want[k], lab.rtol, lab.atol) for k in others):
                return (f"With p = n, your {name} is exactly the right one transposed, and your "
                        f"{', '.join(others)} right: the tile is transposed where {name} is stored (a "
                        f"ct.transpose at its store).\n      Store {name} as the (TP, TN) tile it is, no "
                        f"ct.transpose: (p, n) in the array, (p, n) in the tile. (The transposed store "
                        f"compiles only when TP == TN, as here.)", None)
        return None

    return Reading(make, read)


def read_alternating_transpose(output: str, chunk_axis: int, make: Callable[[Inputs], Inputs | None],
                               said: str, what: str, hint: str) -> Reading:
    """With p = n (``make``: the case whose only nonzero state is the one that starts the walk), an output
    right at every other chunk and transposed at the ones between: the kernel transposes the carried tile
    at every step of its walk (the start tile comes out right, the next one transposed, and so on)."""

    def read(lab, inputs, got):
        g, w = got[output].double(), lab.reference(inputs)[output].double()
        if g.shape[-1] != g.shape[-2] or g.shape[chunk_axis] < 2 or not bool(torch.isfinite(g).all()):
            return None
        right, flipped = [], []
        for c in range(g.shape[chunk_axis]):
            gc, wc = g.select(chunk_axis, c), w.select(chunk_axis, c)
            right.append(close(gc, wc, lab.rtol, lab.atol))
            flipped.append(close(gc, wc.transpose(-1, -2), lab.rtol, lab.atol) and not right[-1])
        if not any(flipped) or not all(r or f for r, f in zip(right, flipped)):
            return None
        if not all(flipped[c] != flipped[c - 1] for c in range(1, len(flipped))):
            return None  # transposed at every chunk, or in runs: not a transpose at every step
        chunks = ", ".join(str(c) for c, f in enumerate(flipped) if f)
        return (f"{said}, your {output} comes out transposed at chunk(s) {chunks} and right at the others: "
                f"{what} is transposed at every step of your walk (so it flips back every second chunk).\n"
                f"      {hint}", None)

    return Reading(make, read)


@dataclass
class Linearity:
    """Every output named in ``outputs`` is linear in the inputs ``keys`` (together): run the kernel with
    those inputs zero, as they are, doubled and negated; if the outputs are not zero, or do not double, or
    do not change sign, the kernel applies a nonlinearity or adds a constant (``finding``). Run it after
    the experiments that catch a missing factor (a missing factor is linear too, but a term that ignores the
    doubled input does not double either)."""

    keys: Sequence[str]
    outputs: Sequence[str]
    what: str
    finding: str
    hint: str
    setting: str = ""  # what else the base holds, e.g. "the entering state = 0 and "
    recipe: str | None = None

    def __call__(self, lab: Lab, base: Inputs) -> Finding | None:
        zero, one, two = dict(base), dict(base), dict(base)
        for k in self.keys:
            zero[k], two[k] = torch.zeros_like(base[k]), base[k] * 2
        z, a, b = lab.run(zero), lab.run(one), lab.run(two)
        if z is None or a is None or b is None:
            return None
        if not all(bool(torch.isfinite(t[k]).all()) for t in (a, b) for k in self.outputs):
            return None
        if not all(bool(torch.isfinite(z[k]).all()) for k in self.outputs):
            return (f"With {self.setting}{self.what} = 0 your outputs hold NaN or inf, where they are 0 "
                    f"(every output is linear in {self.what}): your kernel divides by something that is 0 "
                    f"there (a norm? a sum? a normalization), or applies a function undefined at 0 (a "
                    f"log?).\n      {self.hint}", self.recipe)
        from ._harness import UNWRITTEN

        if any(bool((t[k] == UNWRITTEN).any()) for t in (z, a, b) for k in self.outputs):
            return None  # an output element never stored: not a term of the inputs (misplaced() says so)
        if not all(close(z[k], torch.zeros_like(z[k]), lab.rtol, lab.atol) for k in self.outputs):
            return (f"With {self.setting}{self.what} = 0 your outputs are not 0 (every output is linear in "
                    f"{self.what}): part of your output does not come through {self.what}, a term without "
                    f"{self.what} or a function of {self.what} that is not 0 at 0 (softplus, exp, a bias, a "
                    f"clamp).\n      {self.hint}", self.recipe)
        if not all(close(b[k], 2 * a[k], lab.rtol, lab.atol) for k in self.outputs):
            if _grows_as_a_power(a, b, self.outputs):
                return (f"With {self.setting}{self.what} doubled your outputs grow 4, 8, ... times (every "
                        f"output is linear in {self.what}): they grow as a power of {self.what}, so two of "
                        f"them multiply each other in your kernel: terms that belong added are multiplied "
                        f"(a * typed for a +), or one of {self.what} is read where another input belongs "
                        f"(a load from the wrong array).\n      {self.hint}", self.recipe)
            return (f"With {self.setting}{self.what} doubled your outputs do not double (every output is "
                    f"linear in {self.what}): {self.finding}.\n      {self.hint}", self.recipe)
        negated = dict(base)
        for k in self.keys:
            negated[k] = -base[k]
        m = lab.run(negated)
        if m is None or all(close(m[k], -a[k], lab.rtol, lab.atol) for k in self.outputs):
            return None
        return (f"With {self.setting}{self.what} negated your outputs are not negated (every output is "
                f"linear in {self.what}), though doubling doubles them: {self.finding} that treats negative "
                f"values apart (a clamp at 0, a ReLU, an abs).\n      {self.hint}", self.recipe)


def _grows_as_a_power(a: Outputs, b: Outputs, outputs: Sequence[str]) -> bool:
    """Whether every element of ``b`` (the outputs with the inputs doubled) is ``a`` times 2**k, k >= 1, and
    some with k >= 2 (k may differ from element to element: a product of k inputs), where ``a`` is not 0."""
    ratios = []
    for k in outputs:
        x, y = a[k].double().flatten(), b[k].double().flatten()
        big = x.abs() > 1e-6 * max(1.0, float(x.abs().max()))
        if not bool(big.any()):
            return False
        ratios.append(y[big] / x[big])
    r = torch.cat(ratios)
    if not bool((r > 1.5).all()) or not bool((r > 3.5).any()):
        return False
    power = torch.log2(r)
    return bool(((power - power.round()).abs() < 1e-3).all())


@dataclass
class Diagnosis:
    """The experiments of one exercise, in order, and how to pick the base case they change."""

    lab: Lab
    steps: Sequence[Callable[[Lab, Inputs], Finding | None]]
    prelude: Sequence[tuple[Callable[[Inputs], Inputs | None], str, str]] = field(default_factory=list)
    first: Sequence[Callable[[Lab, Inputs], Finding | None]] = ()  # readings of the base, before the prelude

    def __call__(self, base: Inputs) -> Finding | None:
        """The first confirmed finding for ``base`` (a case the kernel got wrong), or None.

        ``prelude`` holds (change, text, hint): a change that, when the kernel is right on it, is the finding
        (e.g. milder decay: the kernel is right except for large exponents); when the kernel is wrong there
        too, the later experiments run on the changed case instead (so that their changes stay finite)."""
        for step in self.first:
            found = step(self.lab, base)
            if found is not None:
                return found
        for make, text, hint in self.prelude:
            changed = make(base)
            if changed is None:
                continue
            if self.lab.right(changed):
                return f"{text}.\n      {hint}", None
            base = changed
        for step in self.steps:
            found = step(self.lab, base)
            if found is not None:
                return found
        return None


# ---------------------------------------------------------------------------------------------- helpers


def replace(inputs: Inputs, **changes) -> Inputs:
    """A copy of ``inputs`` with some entries replaced (tensors are cloned, so a kernel may write freely)."""
    out = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    out.update(changes)
    return out


def positions(mask: torch.Tensor) -> str:
    """'3', '2..5' or '1, 4, 6' for the True indices of a 1-d mask."""
    idx = mask.nonzero().flatten().tolist()
    if not idx:
        return "none"
    if idx == list(range(idx[0], idx[-1] + 1)) and len(idx) > 2:
        return f"{idx[0]}..{idx[-1]}"
    return ", ".join(str(i) for i in idx)


def tame_decay(inputs: Inputs, key: str = "dA_cumsum", limit: float = 4.0,
               above: float = 4.0) -> Inputs | None:
    """The same case with ``dA_cumsum`` scaled so that no exponent passes ``limit`` (None when it is already
    milder than ``above``): a kernel right there and wrong on the case breaks only for strong decay (an
    overflow, a clamp, a division of two small numbers)."""
    dA = inputs[key]
    top = float(dA.abs().max())
    if top <= above:
        return None
    return replace(inputs, **{key: dA * (limit / top)})


def as_float32(inputs: Inputs, keys: Sequence[str]) -> Inputs | None:
    """The same case with the low-precision inputs ``keys`` in float32 (None when they are float32)."""
    if all(inputs[k].dtype == torch.float32 for k in keys):
        return None
    return replace(inputs, **{k: inputs[k].float() for k in keys})


def once(fn: Callable, *args) -> Callable[[], Finding | None]:
    """``fn(*args)``, run on the first call only (a case's outputs share one diagnosis)."""
    memo: list = []

    def call():
        if not memo:
            memo.append(fn(*args))
        return memo[0]

    return call


def scaled_up(make: Callable[[Inputs], Inputs | None], keys: Sequence[str], factor: float = 8.0):
    """``make``'s change with the inputs ``keys`` (every output is linear in them) multiplied by ``factor``:
    a kernel right on both is right for the reason the change tests, not because the change kept its values
    inside a clamp."""

    def changed(b):
        base = make(b)
        return None if base is None else replace(base, **{k: base[k] * factor for k in keys})

    return changed


def same_chunks(inputs: Inputs, keys: Sequence[str], Q: int) -> Inputs | None:
    """``inputs`` with every chunk of the inputs ``keys`` (b, l, ...) a copy of chunk 0's (the ragged last
    chunk its first positions); None with one chunk."""
    l = inputs[keys[0]].shape[1]
    if l <= Q:
        return None
    out = {}
    for k in keys:
        t = inputs[k].clone()
        for start in range(Q, l, Q):
            n = min(Q, l - start)
            t[:, start:start + n] = inputs[k][:, :n]
        out[k] = t
    return replace(inputs, **out)


def chunk_decays(inputs: Inputs) -> torch.Tensor:
    """(b, nchunks, h, 1, 1) float64: every chunk's decay g_c = exp(dA_cumsum[bi, hi, c, Q-1]), laid out to
    scale a (b, nchunks, h, p, n) array of per-chunk states chunk by chunk."""
    return torch.exp(inputs["dA_cumsum"][..., -1].double()).transpose(1, 2)[..., None, None]


def decayed_by_chunk(key: str, factor: Callable[[torch.Tensor], torch.Tensor] = lambda g: g
                     ) -> Callable[[Inputs], Inputs]:
    """A change: ``key`` (b, nchunks, h, ...) multiplied chunk by chunk by ``factor(g_c)``, by default its
    decay g_c = exp(dA_cumsum[bi, hi, c, Q-1]) itself, as a walk that decays a chunk's own term with the
    carried one sees it (``lambda g: 1 - g``: a moving average's gate)."""

    def make(b):
        t = b[key]
        g = factor(chunk_decays(b)[:, :t.shape[1], :, 0, 0])                       # (b, nc, h)
        return replace(b, **{key: (t.double() * g.reshape(*g.shape, *([1] * (t.dim() - 3)))).to(t.dtype)})

    return make


def shifted_chunks(key: str, k: int, keep_last: bool = False) -> Callable[[Inputs], Inputs | None]:
    """A change: ``key`` (b, nchunks, ...) moved by one chunk. k = 1: chunk c gets chunk c - 1's (chunk 0
    gets 0); k = -1: chunk c gets chunk c + 1's (the last chunk 0, or its own with ``keep_last``). None with
    one chunk."""

    def make(b):
        S = b[key]
        if S.shape[1] < 2:
            return None
        out = torch.zeros_like(S)
        if k > 0:
            out[:, 1:] = S[:, :-1]
        else:
            out[:, :-1] = S[:, 1:]
            if keep_last:
                out[:, -1] = S[:, -1]
        return replace(b, **{key: out})

    return make


def same_batch(keys: Sequence[str], batch_axis: int = 0) -> Experiment:
    """Every batch entry of the inputs ``keys`` a copy of the first: right there means the kernel reads or
    writes another batch entry than its own."""

    def make(b):
        if b[keys[0]].shape[batch_axis] < 2:
            return None
        return replace(b, **{k: b[k].narrow(batch_axis, 0, 1).expand_as(b[k]).clone() for k in keys})

    return Experiment("With every batch entry a copy of the first", make,
                      "so your kernel reads or writes another batch entry than its own",
                      "block indices come from ct.bid(...) in the grid's order; use this block's batch entry "
                      "bi in every load and store.")


def same_for_every_head(inputs: Inputs, key: str, axis: int) -> Inputs:
    """``inputs`` with every head of ``inputs[key]`` (its axis ``axis``) a copy of head 0's."""
    t = inputs[key]
    return replace(inputs, **{key: t.narrow(axis, 0, 1).expand_as(t).clone()})


def by_head(t: torch.Tensor, axis: int, first: float = 1.5, step: float = 0.25) -> torch.Tensor:
    """A tensor of ``t``'s shape holding first, first + step, ... by head (its axis ``axis``): the same at
    every position, different from head to head."""
    shape = [1] * t.dim()
    shape[axis] = t.shape[axis]
    values = first + step * torch.arange(t.shape[axis], dtype=t.dtype)
    return values.reshape(shape).expand_as(t).clone()


def small_integers(t: torch.Tensor, seed: int = 0, low: int = -1, high: int = 1) -> torch.Tensor:
    """A tensor of ``t``'s shape and dtype holding random integers in [low, high]: values whose products and
    short sums are exact in bfloat16 (8 significant bits), so that a kernel that rounds to bfloat16 or
    float16 somewhere is still right on them."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high + 1, tuple(t.shape), generator=gen).to(t.dtype)


def rounded_decays() -> Experiment:
    """Right once dA_cumsum holds values that are bfloat16 numbers already (rounded beforehand, still
    float32): the kernel rounds dA_cumsum to a low-precision dtype. A run for the finer experiments of "with
    every decay 1 your output is right"; not applicable where dA_cumsum is not float32 or rounds to itself."""

    def changed(b):
        dA = b["dA_cumsum"]
        if dA.dtype != torch.float32:
            return None
        rounded = dA.to(torch.bfloat16).to(torch.float32)
        return None if torch.equal(rounded, dA) else replace(b, dA_cumsum=rounded)

    return Experiment("With dA_cumsum rounded to bfloat16 values beforehand (still float32)", changed,
                      "so your kernel rounds dA_cumsum to a low-precision dtype (bfloat16 or float16)",
                      "dA_cumsum stays float32 from its load to the exp: rounded to about 3 significant "
                      "digits, a difference of two large running sums such as dA_cs[Q-1] - dA_cs[k] keeps "
                      "few right digits.")


def low_precision(make: Callable[[Inputs], Inputs | None], said: str, keys: Sequence[str], hint: str = "",
                  controls: Sequence[Callable[[Inputs], Inputs | None]] = ()) -> Experiment:
    """Right on inputs whose every value, product and sum is exact in bfloat16 (``make``; ``said`` describes
    them) though the inputs ``keys`` are float32: the kernel rounds to a low-precision dtype somewhere.
    Not applicable to a case whose inputs ``keys`` are not float32 (their own experiment is the float32
    re-run). ``controls``: the same case with only the other changes ``make`` makes (e.g. no decay), on
    which the kernel must stay wrong."""

    def changed(b):
        if any(b[k].dtype != torch.float32 for k in keys):
            return None
        return make(b)

    return Experiment(
        f"With {said} (so that every value, product and sum is exact in bfloat16)", changed,
        "so your kernel rounds to a low-precision dtype (bfloat16 or float16) somewhere: its values lose "
        "their last digits", "these inputs are float32: keep every tile in float32 (a cast to "
        "ct.bfloat16 or ct.float16 keeps about 3 significant digits)" + (f"; {hint}" if hint else "") + ".",
        controls=controls)


def _moves(want: torch.Tensor, axes: Sequence[str]):
    """(description, moved) pairs: ``want`` with its values moved as a wrong store index would move them."""
    named = [(d, a) for d, a in enumerate(axes) if a]
    for i, (d1, a1) in enumerate(named):
        for d2, a2 in named[i + 1:]:
            if want.shape[d1] == want.shape[d2] and want.shape[d1] > 1:
                yield (f"what belongs at {a1} i, {a2} j is at {a1} j, {a2} i: the {a1} and the {a2} are "
                       f"exchanged", want.transpose(d1, d2))
    for d, a in named:
        if want.shape[d] > 2:
            yield f"the {a}s come in reverse order", want.flip(d)


def misplaced(outputs: dict[str, Sequence[str]]) -> Reading:
    """A reading of the base case itself: an output (``outputs`` maps its name to the names of its axes)
    whose values are all right but at the wrong places, e.g. two axes exchanged."""

    def read(lab, inputs, got):
        from ._harness import UNWRITTEN

        want = lab.reference(inputs)
        for name in outputs:
            if not bool((got[name] == UNWRITTEN).all()) or bool((want[name] == 0).all()):
                continue
            for other in outputs:
                for dim in range(got[other].dim()):
                    for i in range(got[other].shape[dim]):
                        piece = got[other].select(dim, i)
                        if other != name and close(piece, want[name], lab.rtol, lab.atol):
                            return (f"Your {name} is never stored (every element still holds the value "
                                    f"the check filled it with), and your {other} at index {i} of axis {dim} "
                                    f"holds the right {name}: the store meant for {name} goes into {other}."
                                    f"\n      Store each result into its own array, at its own indices: "
                                    f"{name} has shape {tuple(want[name].shape)}.", None)
            return (f"Your {name} still holds, in every element, the value the check filled it with: your "
                    f"kernel stores nothing there, or stores what it loaded from that same output (an output "
                    f"read where an input belongs).\n      Every output needs its ct.store(...) of a result "
                    f"computed from the inputs, outside any branch that skips it.", None)
        for name, axes in outputs.items():
            g, w = got[name], want[name]
            if close(g, w, lab.rtol, lab.atol):
                continue
            for other in outputs:
                if other != name and close(g, want[other], lab.rtol, lab.atol):
                    if close(got[other], want[other], lab.rtol, lab.atol):
                        return (f"Your {name} holds what belongs in {other} (and your {other} is right): the "
                                f"store into {name} stores {other}'s tile, e.g. a store line copied and its "
                                f"tile not changed, or a variable overwritten before it.\n      Store into "
                                f"{name} the tile computed for it.", None)
                    return (f"Your {name} holds what belongs in {other}: the stores' arrays are exchanged.\n"
                            f"      The kernel's outputs come in the order of its signature; store each "
                            f"result into its own array.", None)
            eps = torch.finfo(g.dtype).eps if g.dtype.is_floating_point else 0.0
            if not bool((g == UNWRITTEN).all()) and bool(torch.isclose(
                    g.double() - UNWRITTEN, w.double(), rtol=lab.rtol, atol=8 * eps * abs(UNWRITTEN)).all()):
                return (f"Your {name} is the right answer plus {UNWRITTEN:g}, the value the check filled the "
                        f"output with before the launch: your kernel adds to the output array's old contents "
                        f"(an accumulator loaded from the output, or an output += ...).\n      Start the "
                        f"accumulator from ct.zeros(..., dtype=ct.float32) and store the result once.", None)
            for how, moved in _moves(w, axes):
                if not close(moved, w, lab.rtol, lab.atol) and close(g, moved, lab.rtol, lab.atol):
                    return (f"Your {name} holds the right values at the wrong places ({how}), so the "
                            f"store's index, or the block indices it is built from, are off.\n      Each "
                            f"block stores its tile at its own indices, in the order the output's shape "
                            f"lists its axes; ct.bid(0), ct.bid(1), ct.bid(2) follow the grid's axes in the "
                            f"order the launch gives them.", None)
        return None

    return Reading(lambda b: b, read)


def nan_on_cpu(run: Callable[[Inputs], Outputs], inputs: Inputs) -> bool:
    """Whether the kernel's outputs on ``inputs``, run on the CPU tile executor (``run``), hold NaN or inf.
    The executor fills UNDETERMINED padding with NaN, so a kernel that relies on the padding being zero
    shows it there, on every machine; a kernel whose outputs stay finite does not read the padding."""
    try:
        got = run({k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()})
    except Exception:  # noqa: BLE001 - a run that fails confirms nothing
        return False
    return any(not bool(torch.isfinite(v).all()) for v in got.values())


@dataclass
class Confusion:
    """Two inputs of the same shape, ``a`` and ``b``, one read where the other belongs: with ``b`` set equal
    to ``a`` the kernel's output is right, and zeroing one of them leaves every output unchanged: that one
    is never read, the other is read in its place. (Right with the two equal while both are read proves
    nothing: the equality may only hide another mistake, e.g. a clamp that negative values pass.)"""

    a: str
    b: str
    hint: str

    def __call__(self, lab: Lab, base: Inputs) -> Finding | None:
        if tuple(base[self.a].shape) != tuple(base[self.b].shape):
            return None
        changed = replace(base, **{self.b: base[self.a].clone()})
        if not lab.right(changed):
            return None
        said = f"With {self.b} equal to {self.a} your output is right"
        got = lab.run(base)
        for unread, read in ((self.b, self.a), (self.a, self.b)):
            without = lab.run(replace(base, **{unread: torch.zeros_like(base[unread])}))
            if got is not None and without is not None and bool(base[unread].any()) and all(
                    close(without[k], got[k]) for k in got):
                return (f"{said}, and with {unread} = 0 your output does not change: your kernel never reads "
                        f"{unread}, it reads {read} in its place.\n      {self.hint}", None)
        return None  # right with the two equal, yet both are read: some other mistake the equality hides


def read_offset(outputs: Sequence[str], hint: str) -> Reading:
    """A reading of the base case itself: an output that is the right answer plus one constant c != 0 in
    every element (an accumulator started from c: ct.ones, ct.full; or a constant added)."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        for name in outputs:
            g, w = got[name].double(), want[name]
            if close(g, w, lab.rtol, lab.atol) or not bool(torch.isfinite(g).all()):
                continue
            diff = (g - w).flatten()
            c = float(diff.median())
            scale = max(1.0, float(w.abs().max()))
            if abs(c) > 1e-3 * scale and bool(((diff - c).abs() <= 1e-4 * scale).all()):
                return (f"Every element of your {name} is the right value plus the same constant {c:+.4g}: "
                        f"your kernel adds {c:+.4g} everywhere, the start value of an accumulator "
                        f"(ct.ones, ct.full) or a constant added to the result.\n      {hint}", None)
        return None

    return Reading(lambda b: b, read)


def read_clamp(outputs: Sequence[str], hint: str) -> Reading:
    """A reading of the base case itself: an output right wherever the answer is on one side of a value c
    and equal to c wherever the answer is beyond it: a clamp (ct.maximum, ct.minimum, a where)."""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        from ._harness import UNWRITTEN

        for name in outputs:
            g, w = got[name].double().flatten(), want[name].flatten()
            if not bool(torch.isfinite(g).all()):
                return None
            if bool((g == UNWRITTEN).any()):
                continue  # never stored there (misplaced() says so), not clamped
            wrong = ~torch.isclose(g, w, rtol=lab.rtol, atol=lab.atol)
            if not bool(wrong.any()) or (bool(wrong.all()) and len(g) < 2):
                continue
            c = float(g[wrong][0])
            if not bool(torch.isclose(g[wrong], torch.full_like(g[wrong], c), rtol=1e-6, atol=1e-6).all()):
                lo, hi = float(g[wrong].min()), float(g[wrong].max())
                at_lo = torch.isclose(g, torch.full_like(g, lo), rtol=1e-6, atol=1e-6) & wrong
                at_hi = torch.isclose(g, torch.full_like(g, hi), rtol=1e-6, atol=1e-6) & wrong
                if (lo < hi and bool((at_lo | at_hi)[wrong].all()) and bool((w[at_lo] < lo).all())
                        and bool((w[at_hi] > hi).all()) and bool((w[~wrong] >= lo - 1e-6).all())
                        and bool((w[~wrong] <= hi + 1e-6).all())):
                    return (f"Your {name} is right wherever the answer lies in [{lo:.4g}, {hi:.4g}], and "
                            f"{lo:.4g} or {hi:.4g} exactly wherever it lies below or above "
                            f"({int(wrong.sum())} elements): your kernel clips it to [{lo:.4g}, {hi:.4g}] "
                            f"(ct.minimum(ct.maximum(..., {lo:.4g}), {hi:.4g}), or a where).\n      {hint}",
                            None)
                continue
            if bool((w[wrong] < c).all()) and bool((w[~wrong] >= c - 1e-6).all()):
                side, fn = "below", f"ct.maximum(..., {c:.4g})"
            elif bool((w[wrong] > c).all()) and bool((w[~wrong] <= c + 1e-6).all()):
                side, fn = "above", f"ct.minimum(..., {c:.4g})"
            else:
                continue
            if bool(wrong.all()):  # every answer beyond c: the output is c everywhere
                if float(w.max() - w.min()) < 1e-3 * max(1.0, float(w.abs().max())):
                    continue  # a constant answer: nothing to tell a clamp from a constant by
                said = (f"Your {name} is {c:.4g} in every element, where every answer lies {side} it (from "
                        f"{float(w.min()):.4g} to {float(w.max()):.4g})")
            else:
                said = (f"Your {name} is right wherever the answer is not {side} {c:.4g}, and {c:.4g} "
                        f"exactly wherever it is ({int(wrong.sum())} elements)")
            return f"{said}: your kernel clamps at {c:.4g} ({fn}, or a where).\n      {hint}", None
        return None

    return Reading(lambda b: b, read)


def read_one_slice(outputs: dict[str, Sequence[str]], hint: str) -> Reading:
    """A reading of the base case itself: an output wrong exactly at one index of one named axis, and 0 all
    over that slice (everything else right), e.g. only at the last chunk: a guard or a bound that zeroes
    that index. (Wrong but not zero there is not enough: a kernel that reads another batch entry's input is
    wrong at every batch entry but the one it reads.)"""

    def read(lab, inputs, got):
        want = lab.reference(inputs)
        for name, axes in outputs.items():
            g, w = got[name].double(), want[name]
            if not bool(torch.isfinite(g).all()):
                return None
            wrong = ~torch.isclose(g, w, rtol=lab.rtol, atol=lab.atol)
            if not bool(wrong.any()):
                continue
            for dim, axis in enumerate(axes):
                if not axis or wrong.shape[dim] < 2:
                    continue
                hit = wrong.movedim(dim, 0).reshape(wrong.shape[dim], -1).any(1).nonzero().flatten()
                if len(hit) != 1:
                    continue
                i = int(hit[0])
                last = wrong.shape[dim] - 1
                where = "the last" if i == last else "the first" if i == 0 else f"{axis} {i}"
                if not bool((g.movedim(dim, 0)[i] == 0).all()):
                    continue
                return (f"Your {name} is right everywhere except at {axis} {i} ({where} of 0.."
                        f"{last}), where it is 0: your kernel treats that {axis} apart (an if or a where "
                        f"on the index, or a loop bound).\n      {hint}", None)
        return None

    return Reading(lambda b: b, read)
