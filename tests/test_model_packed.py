"""Packed rows (``seq_idx``) through the Mamba-2 block and the tiny model.

A packed row must give every sequence exactly what it gets alone: the causal conv reads no input of the
previous sequence, and the SSD's state starts again from zero. The oracle is literal: run every sequence of
every row alone and concatenate. The packs are ragged on purpose: boundaries inside chunks and inside the
conv's window, a sequence shorter than d_conv, one-token sequences, a row that starts with seq_idx 1 and one
whose seq_idx jumps by more than 1. Every dimension has its own size (b 3, l 23, d_model 15, d_inner 30,
h 6, p 5, g 2, n 7, d_conv 4, Q 8), so that a mixed-up axis cannot pass.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch

import mamba2_tutorial as m2
from mamba2_tutorial import fast
from mamba2_tutorial.fast.stages import packs_in_kernels
from mamba2_tutorial.model.block import Mamba2Block, causal_conv1d
from mamba2_tutorial.model.lm import TinyMamba2LM

D_MODEL, D_STATE, D_CONV, HEADDIM, NGROUPS, CHUNK = 15, 7, 4, 5, 2, 8
#: the sequence lengths of each row (l = 23), and the seq_idx of each row's first sequence and its step
PACKS = (
    ((3, 1, 9, 10), 0, 1),  # shorter than d_conv, one token, boundaries at 3, 4 (chunk 0) and 13 (chunk 1)
    ((11, 12), 1, 3),       # starts with seq_idx 1, jumps from 1 to 4 at 11 (inside chunk 1)
    ((20, 2, 1), 0, 1),     # ends with a one-token sequence after a two-token one
)
L = 23


def _seq_idx(packs=PACKS) -> torch.Tensor:
    rows = []
    for lengths, first, step in packs:
        assert sum(lengths) == L
        rows.append(torch.cat([torch.full((n,), first + i * step, dtype=torch.int32)
                               for i, n in enumerate(lengths)]))
    return torch.stack(rows)


def _bounds(packs=PACKS):
    """(row, start, end) of every sequence."""
    out = []
    for row, (lengths, _, _) in enumerate(packs):
        start = 0
        for n in lengths:
            out.append((row, start, start + n))
            start += n
    return out


def _block(dtype=torch.float64, seed=0, **overrides) -> Mamba2Block:
    torch.manual_seed(seed)
    kw = dict(d_state=D_STATE, d_conv=D_CONV, expand=2, headdim=HEADDIM, ngroups=NGROUPS, chunk_size=CHUNK,
              dt_limit=(0.0, 2.0), conv_bias=True, bias=True) | overrides
    block = Mamba2Block(D_MODEL, **kw).to(dtype)
    with torch.no_grad():  # every weight random and large enough that a term crossing a boundary shows
        for param in block.parameters():
            param.normal_(0.0, 0.5)
        block.A_log.copy_(torch.rand(block.nheads, dtype=dtype) * 0.5 - 1.0)  # slow decays: a lot to carry
    return block


def _each_alone(model, inputs, packs=PACKS, **kw):
    """Every sequence of every row run alone, put back in place: the oracle."""
    rows = [[] for _ in range(inputs.shape[0])]
    for row, start, end in _bounds(packs):
        rows[row].append(model(inputs[row:row + 1, start:end], **kw))
    return torch.cat([torch.cat(pieces, dim=1) for pieces in rows], dim=0)


def _grads(model, run, inputs, weight):
    """Gradients of <run(inputs), weight> for every parameter and for the inputs (when floating)."""
    model.zero_grad()
    inputs = inputs.detach().clone().requires_grad_(inputs.is_floating_point())
    out = run(inputs)
    (out * weight).sum().backward()
    grads = {name: param.grad.clone() for name, param in model.named_parameters()}
    if inputs.is_floating_point():
        grads["u"] = inputs.grad.clone()
    return out.detach(), grads


def test_causal_conv1d_with_seq_idx_is_each_sequence_alone():
    torch.manual_seed(0)
    xBC, weight = torch.randn(3, L, 9, dtype=torch.float64), torch.randn(9, 1, D_CONV, dtype=torch.float64)
    seq_idx = _seq_idx()
    for bias in (None, torch.randn(9, dtype=torch.float64)):
        got = causal_conv1d(xBC, weight, bias, seq_idx=seq_idx)
        want = _each_alone(functools.partial(causal_conv1d, weight=weight, bias=bias), xBC)
        m2.assert_close(got, want, rtol=1e-13, atol=1e-13, name="conv")
    unpacked = causal_conv1d(xBC, weight, bias)
    assert (got - unpacked).abs().amax() > 0.1  # the boundaries do change the conv: the test can fail
    one = torch.zeros(3, L, dtype=torch.int32)  # one sequence per row: the plain conv
    assert torch.equal(causal_conv1d(xBC, weight, bias, seq_idx=one), unpacked)


def test_causal_conv1d_rejects_a_bad_seq_idx():
    xBC, weight = torch.randn(2, 6, 3), torch.randn(3, 1, 4)
    good = torch.tensor([[0, 0, 1, 1, 1, 2]] * 2, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"seq_idx must have shape \(b, l\) = \(2, 6\)"):
        causal_conv1d(xBC, weight, seq_idx=good[:, :5])
    with pytest.raises(TypeError, match="seq_idx must be int32"):
        causal_conv1d(xBC, weight, seq_idx=good.long())
    bad = good.clone()
    bad[1, 4] = 0
    with pytest.raises(ValueError, match="non-decreasing.*row 1.*from 1 at position 3 to 0 at 4"):
        causal_conv1d(xBC, weight, seq_idx=bad)
    with pytest.raises(TypeError, match="seq_idx must be a torch.Tensor"):
        causal_conv1d(xBC, weight, seq_idx=[[0] * 6] * 2)


@pytest.mark.parametrize("ssd", ["chunked", "recurrent", "quadratic"])
def test_packed_block_is_each_sequence_alone_float64(ssd):
    """Outputs and the gradients of every parameter and of u, float64, each reference form packed against
    the recurrence run on every sequence alone."""
    block = _block(rmsnorm=ssd != "quadratic", D_has_hdim=ssd == "recurrent")  # the gate in the SSD too
    u = torch.randn(3, L, D_MODEL, dtype=torch.float64)
    weight = torch.randn(3, L, D_MODEL, dtype=torch.float64)
    seq_idx = _seq_idx()
    got, got_grads = _grads(block, lambda v: block(v, seq_idx=seq_idx, ssd=ssd), u, weight)
    want, want_grads = _grads(block, lambda v: _each_alone(block, v, ssd="recurrent"), u, weight)
    m2.assert_close(got, want, rtol=1e-10, atol=1e-10, name="out")
    for name, grad in want_grads.items():
        m2.assert_close(got_grads[name], grad, rtol=1e-9, atol=1e-9, name=f"grad of {name}")
    assert (got - block(u, ssd=ssd)).abs().amax() > 0.1  # packing matters here: the test can fail


def test_packed_block_state_is_the_last_sequence_alone():
    """The decode state after a packed row is its last sequence's: the conv window holds only that sequence's
    inputs (zeros before its start when it is shorter than d_conv), the SSM state only its past; decoding
    on from it continues the last sequence."""
    block = _block()
    u = torch.randn(3, L, D_MODEL, dtype=torch.float64)
    seq_idx = _seq_idx()
    for ssd in ("chunked", "recurrent", "quadratic"):
        _, state = block(u, seq_idx=seq_idx, ssd=ssd, return_state=True)
        for row, (lengths, _, _) in enumerate(PACKS):
            _, alone = block(u[row:row + 1, L - lengths[-1]:], ssd="recurrent", return_state=True)
            m2.assert_close(state.conv[row:row + 1], alone.conv, rtol=1e-12, atol=1e-12, name="conv state")
            m2.assert_close(state.ssm[row:row + 1], alone.ssm, rtol=1e-10, atol=1e-10, name="final_states")
    assert torch.equal(state.conv[2, :, :D_CONV - 1], torch.zeros_like(state.conv[2, :, :D_CONV - 1]))
    u_next = torch.randn(3, D_MODEL, dtype=torch.float64)
    out_t, _ = block.step(u_next, state)
    for row, (lengths, _, _) in enumerate(PACKS):
        whole = torch.cat([u[row:row + 1, L - lengths[-1]:], u_next[row:row + 1, None]], dim=1)
        m2.assert_close(out_t[row], block(whole, ssd="recurrent")[0, -1], rtol=1e-10, atol=1e-10,
                        name="out_t")


def test_packed_block_with_cutile_kernels_float32():
    """``ssd="cutile"`` (ssd_forward on the CPU tile executor, float32) on a packed batch against the float64
    block run on every sequence alone: inference with the shipped config for this size, inference with a
    config whose kernels reset the state themselves (a fused state stage and a whole-chunk scan, through an
    SSD function that takes seq_idx), and training (the gradients of every parameter and of u). Two rows,
    to keep the executor's time down."""
    packs = PACKS[:2]
    truth = _block()
    block = copy.deepcopy(truth).float()
    u = torch.randn(2, L, D_MODEL, dtype=torch.float64)
    weight = torch.randn(2, L, D_MODEL, dtype=torch.float64)
    seq_idx = _seq_idx(packs)
    in_kernels = fast.FastConfig(state=fast.Fused(), scan=fast.ChunkScan())
    assert packs_in_kernels(in_kernels)
    resetting = functools.partial(m2.ssd_forward, backend="cpu", config=in_kernels)
    want, want_grads = _grads(truth, lambda v: _each_alone(truth, v, packs, ssd="recurrent"), u, weight)
    with torch.no_grad():
        shipped = block(u.float(), seq_idx=seq_idx, ssd="cutile", backend="cpu")
        reset = block(u.float(), seq_idx=seq_idx, ssd=resetting)
    got, got_grads = _grads(block, lambda v: block(v, seq_idx=seq_idx, ssd="cutile", backend="cpu"),
                            u.float(), weight.float())
    for out in (shipped, reset, got):
        assert m2.relative_error(out, want) < 1e-5, m2.relative_error(out, want)
    for name, grad in want_grads.items():
        error = m2.relative_error(got_grads[name], grad)
        assert error < 1e-4, f"grad of {name}: {error:.1e}"


def test_packed_tiny_model_is_each_sequence_alone():
    """The tiny model, float64, chunked SSD: logits and every parameter's gradient of a packed batch equal
    those of every sequence run alone; the states after it are the last sequences'."""
    torch.manual_seed(0)
    model = TinyMamba2LM(11, d_model=D_MODEL, n_layers=2, d_state=D_STATE, d_conv=D_CONV, expand=2,
                         headdim=HEADDIM, ngroups=NGROUPS, chunk_size=CHUNK).double()
    with torch.no_grad():
        for block in model.blocks:
            block.out_proj.weight.mul_(8.0)  # a block's output as large as its input: boundaries show
    tokens = torch.randint(0, 11, (3, L))
    weight = torch.randn(3, L, 11, dtype=torch.float64)
    seq_idx = _seq_idx()
    got, got_grads = _grads(model, lambda t: model(t, seq_idx=seq_idx), tokens, weight)
    want, want_grads = _grads(model, lambda t: _each_alone(model, t, ssd="recurrent"), tokens, weight)
    m2.assert_close(got, want, rtol=1e-10, atol=1e-10, name="logits")
    for name, grad in want_grads.items():
        m2.assert_close(got_grads[name], grad, rtol=1e-9, atol=1e-9, name=f"grad of {name}")
    assert (got - model(tokens)).abs().amax() > 1e-3  # packing matters here: the test can fail
    _, states = model(tokens, seq_idx=seq_idx, return_states=True)
    _, alone = model(tokens[2:, L - 1:], return_states=True)  # row 2 ends with a one-token sequence
    for state, want_state in zip(states, alone):
        m2.assert_close(state.conv[2:], want_state.conv, rtol=1e-12, atol=1e-12, name="conv state")
        m2.assert_close(state.ssm[2:], want_state.ssm, rtol=1e-10, atol=1e-10, name="final_states")
    with pytest.raises(ValueError, match=r"seq_idx must have shape \(b, l\) = \(3, 23\)"):
        model(tokens, seq_idx=seq_idx[:2])


def test_an_ssd_function_without_seq_idx_is_refused_on_a_packed_row():
    block = _block()
    u = torch.randn(1, L, D_MODEL, dtype=torch.float64)

    def unpacked_only(x, dt, A, B, C, chunk_size, **options):  # **options: packing goes through
        return m2.ssd_chunked(x, dt, A, B, C, chunk_size, **options)

    def strict(x, dt, A, B, C, chunk_size, *, D, z, dt_bias, dt_softplus, dt_limit, return_final_states):
        return m2.ssd_chunked(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus,
                              dt_limit=dt_limit, return_final_states=return_final_states)

    seq_idx = _seq_idx()[:1]
    m2.assert_close(block(u, ssd=strict), block(u), name="out")  # unpacked it runs
    with pytest.raises(TypeError, match="ssd 'strict' takes no seq_idx"):
        block(u, seq_idx=seq_idx, ssd=strict)
    with pytest.raises(TypeError, match="seq_idx"):  # ssd_chunked itself refuses it by name
        block(u, seq_idx=seq_idx, ssd=unpacked_only)


def test_packed_block_matches_transformers_mixer_on_each_sequence():
    """transformers' ``Mamba2Mixer`` in its PyTorch path has no packing: its forward takes ``**kwargs`` and
    hands them to the conv and the scan, whose PyTorch fallbacks drop a ``seq_idx`` unread (only the hub
    kernels would read it). So the packed block is compared with the mixer run on every sequence alone."""
    modeling = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")
    h = 2 * D_MODEL // HEADDIM
    cfg = modeling.Mamba2Config(hidden_size=D_MODEL, state_size=D_STATE, conv_kernel=D_CONV, expand=2,
                                head_dim=HEADDIM, num_heads=h, n_groups=NGROUPS, chunk_size=CHUNK,
                                num_hidden_layers=1, time_step_limit=(0.0, float("inf")), use_bias=False,
                                use_conv_bias=True, layer_norm_epsilon=1e-5)
    torch.manual_seed(3)
    theirs = modeling.Mamba2Mixer(cfg, layer_idx=0).eval()
    with torch.no_grad():
        for param in theirs.parameters():
            param.normal_(0.0, 0.5)
        theirs.A_log.copy_(torch.rand(h) * 2.0)
    ours = Mamba2Block(D_MODEL, d_state=D_STATE, d_conv=D_CONV, expand=2, headdim=HEADDIM, ngroups=NGROUPS,
                       chunk_size=CHUNK)
    ours.load_state_dict(theirs.state_dict())
    u = torch.randn(3, L, D_MODEL)
    with torch.no_grad():
        want = _each_alone(theirs, u)
        got = ours(u, seq_idx=_seq_idx())
    m2.assert_close(got, want, name="out")
    assert m2.relative_error(got, want) < 2e-6, m2.relative_error(got, want)
