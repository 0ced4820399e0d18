"""The Mamba-2 block, its decode step and the tiny model (mamba2_tutorial.model).

* the block equals Hugging Face transformers' ``Mamba2Mixer`` (pure-PyTorch path, on the CPU) with the same
  weights, for several random configs (ngroups > 1, ragged lengths, finite dt_limit, biases);
* decoding token by token after a cuTile prefill (``ssd_forward`` on the CPU executor) equals the chunked
  forward, for prompts that end mid-chunk;
* the tiny language model learns (its loss falls) and generates the same tokens by decode as by full forwards.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

import mamba2_tutorial as m2
from mamba2_tutorial.model.block import Mamba2Block, causal_conv1d, ssd_function
from mamba2_tutorial.model.decode import Mamba2State, conv_window
from mamba2_tutorial.model.inference import answer_queries, generate
from mamba2_tutorial.model.lm import TinyMamba2LM
from mamba2_tutorial.model.memory import layer_inputs, memory_at
from mamba2_tutorial.model.tasks import IGNORE, AssociativeRecall
from mamba2_tutorial.model.train import evaluate_lm, recall_accuracy, train_lm


def _transformers():
    """transformers' mamba2 module and Mamba2Config (a dev dependency; only the parity tests need it)."""
    modeling = pytest.importorskip("transformers.models.mamba2.modeling_mamba2")
    return modeling, modeling.Mamba2Config

# d_model, d_state, d_conv, expand, headdim, ngroups, chunk_size, seqlen, time_step_limit, use_bias, conv_bias
CONFIGS = {
    "g1": (16, 8, 4, 2, 8, 1, 16, 37, (0.0, math.inf), False, True),  # 37 = 2·16 + 5: ragged
    "g2-ragged": (24, 6, 3, 2, 12, 2, 8, 21, (0.0, math.inf), False, True),
    "g4-limit-bias": (32, 16, 4, 2, 8, 4, 16, 50, (0.01, 0.3), True, False),
    "g2-expand1": (24, 5, 2, 1, 6, 2, 4, 13, (0.0, math.inf), False, True),
}


def _pair(name: str, seed: int = 0):
    """transformers' Mamba2Mixer with random weights, and our block with the same weights."""
    modeling, Mamba2Config = _transformers()
    d, n, k, e, p, g, Q, l, limit, bias, conv_bias = CONFIGS[name]
    h = e * d // p
    torch.manual_seed(seed)
    cfg = Mamba2Config(hidden_size=d, state_size=n, conv_kernel=k, expand=e, head_dim=p, num_heads=h,
                       n_groups=g, chunk_size=Q, num_hidden_layers=1, time_step_limit=limit, use_bias=bias,
                       use_conv_bias=conv_bias, layer_norm_epsilon=1e-5)
    theirs = modeling.Mamba2Mixer(cfg, layer_idx=0).eval()
    with torch.no_grad():  # every weight random, so that no term can hide behind a 0 or a 1
        for param in theirs.parameters():
            param.normal_(0.0, 0.5)
        theirs.A_log.copy_(torch.rand(h) * 2.0)  # A in [-e², -1]
    ours = Mamba2Block(d, d_state=n, d_conv=k, expand=e, headdim=p, ngroups=g, chunk_size=Q, dt_limit=limit,
                       bias=bias, conv_bias=conv_bias)
    ours.load_state_dict(theirs.state_dict())  # the same names and shapes as mamba_ssm's and transformers'
    u = torch.randn(2, l, d)
    return theirs, ours.eval(), u


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("ssd", ["chunked", "recurrent", "quadratic"])
def test_block_matches_transformers_mixer(name, ssd):
    theirs, ours, u = _pair(name)
    with torch.no_grad():
        expected = theirs(u)
        got = ours(u, ssd=ssd)
    assert got.shape == expected.shape == u.shape
    m2.assert_close(got, expected, name="out")
    assert m2.relative_error(got, expected) < 2e-6, m2.relative_error(got, expected)


@pytest.mark.parametrize("name", ["g2-ragged", "g4-limit-bias"])
def test_block_with_cutile_kernels_matches_transformers_mixer(name):
    theirs, ours, u = _pair(name, seed=1)
    with torch.no_grad():
        m2.assert_close(ours(u, ssd="cutile", backend="cpu"), theirs(u), name="out")


def test_gated_rmsnorm_groups_match_transformers():
    modeling, Mamba2Config = _transformers()
    # their mixer's gated norm (d_inner = 24 channels in 3 groups of 8); its class name varies across versions
    config = Mamba2Config(hidden_size=12, expand=2, head_dim=4, num_heads=6, n_groups=3, state_size=4,
                          num_hidden_layers=1, layer_norm_epsilon=1e-5)
    theirs = modeling.Mamba2Mixer(config, layer_idx=0).norm
    ours = m2.GatedRMSNorm(24, group_size=8, eps=1e-5)
    with torch.no_grad():
        theirs.weight.normal_()
        ours.weight.copy_(theirs.weight)
    y, z = torch.randn(3, 5, 24), torch.randn(3, 5, 24)
    m2.assert_close(ours(y, z), theirs(y, z), name="norm")
    # per group: scaling one group of y·silu(z) leaves the others unchanged, and itself too (it is normalised)
    scaled = y.clone()
    scaled[..., 8:16] *= 7.0
    exact = m2.GatedRMSNorm(24, group_size=8, eps=0.0)  # without eps, scaling is invisible to a group's norm
    m2.assert_close(exact(scaled, z), exact(y, z), name="norm, one group scaled")
    whole = m2.GatedRMSNorm(24, eps=0.0)  # one group: scaling a part changes every channel
    assert not torch.allclose(whole(scaled, z), whole(y, z))


def test_causal_conv1d_is_torch_conv_and_causal():
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(6, 6, 4, groups=6, padding=3)
    xBC = torch.randn(2, 11, 6)
    expected = conv(xBC.transpose(1, 2))[..., :11].transpose(1, 2)
    got = causal_conv1d(xBC, conv.weight, conv.bias)
    m2.assert_close(got, expected, name="conv")
    future = xBC.clone()
    future[:, 7:] = torch.randn(2, 4, 6)  # change the inputs from t = 7 on
    m2.assert_close(causal_conv1d(future, conv.weight, conv.bias)[:, :7], got[:, :7], name="conv before t=7")
    # the conv state after a prefill is the window of the last d_conv inputs, zero-padded in front
    assert torch.equal(conv_window(xBC[:, :2], 4)[..., :2], torch.zeros(2, 6, 2))
    assert torch.equal(conv_window(xBC, 4), xBC[:, -4:].transpose(1, 2))


def _decode_block(seed=0, **overrides):
    torch.manual_seed(seed)
    kw = dict(d_state=8, d_conv=4, expand=2, headdim=8, ngroups=2, chunk_size=8, dt_limit=(0.0, 2.0))
    kw.update(overrides)
    block = Mamba2Block(16, **kw).eval()
    with torch.no_grad():
        for param in (block.D, block.conv1d.bias, block.dt_bias):
            param.normal_(0.0, 0.5)
        if block.norm is not None:
            block.norm.weight.normal_(1.0, 0.3)
    return block


@pytest.mark.parametrize("overrides", [{}, {"rmsnorm": False, "D_has_hdim": True}],
                         ids=["default", "gate-in-ssd"])
@pytest.mark.parametrize("prompt", [1, 3, 13, 21])  # Q = 8: every prompt ends mid-chunk
def test_decode_after_cutile_prefill_matches_the_chunked_forward(prompt, overrides):
    block = _decode_block(**overrides)
    l = 27
    u = torch.randn(2, l, 16)
    with torch.no_grad():
        full, full_state = block(u, ssd="chunked", return_state=True)
        out, state = block(u[:, :prompt], ssd="cutile", backend="cpu", return_state=True)
        assert isinstance(state, Mamba2State) and state.ssm.shape == (2, block.nheads, 8, 8)
        assert state.conv.shape == (2, block.conv_dim, 4)
        outs = [out]
        for t in range(prompt, l):
            out_t, state = block.step(u[:, t], state)
            outs.append(out_t[:, None])
    m2.assert_close(torch.cat(outs, 1), full, name="out",
                    hint="cuTile prefill + decode steps vs the chunked forward")
    m2.assert_close(state.ssm, full_state.ssm, name="state")
    m2.assert_close(state.conv, full_state.conv, name="conv state")


def test_decode_from_the_zero_state_is_the_forward_and_leaves_the_old_state_alone():
    block = _decode_block(seed=3)
    u = torch.randn(3, 10, 16)
    with torch.no_grad():
        state = first = block.allocate_state(3)
        outs = []
        for t in range(10):
            out_t, state = block.step(u[:, t], state)
            outs.append(out_t)
        m2.assert_close(torch.stack(outs, 1), block(u), name="out")
    assert first.ssm.abs().max() == 0 and first.conv.abs().max() == 0  # nothing updated in place


def test_bad_input_names_the_argument():
    block = _decode_block()
    bad_conv = Mamba2State(torch.zeros(2, block.conv_dim, 3), torch.zeros(2, block.nheads, 8, 8))
    cases = [
        (lambda: block(torch.randn(2, 5, 15)), "d_model"),
        (lambda: block(torch.randn(5, 16)), "u"),
        (lambda: block.step(torch.randn(2, 16), bad_conv), "state.conv"),
        (lambda: block.step(torch.randn(2, 16), (1, 2)), "Mamba2State"),
        (lambda: Mamba2Block(16, headdim=5), "headdim"),
        (lambda: Mamba2Block(16, headdim=8, ngroups=3), "ngroups"),
        (lambda: Mamba2Block(16, headdim=8, ssd="fast"), "ssd"),
        (lambda: TinyMamba2LM(10, d_model=16, headdim=8, d_state=4)(torch.tensor([[3, 11]])), "tokens"),
        (lambda: TinyMamba2LM(10, d_model=16, headdim=8, d_state=4)(torch.zeros(1, 3)), "tokens"),
        (lambda: AssociativeRecall(num_keys=4, num_pairs=5), "num_pairs"),
    ]
    for call, word in cases:
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert word in str(info.value), (word, str(info.value))


def test_chunked_reference_is_differentiable():
    """Training runs the SSD as ssd_chunked: its gradients must be right (float64 gradcheck, every input)."""
    inp = m2.make_inputs(m2.SSDShape(1, 11, 2, 3, 1, 4, 4, "grad"), seed=0, dtype=torch.float64)
    args = [inp[k].clone().requires_grad_(True) for k in ("x", "dt", "A", "B", "C", "D")]
    dt_bias = torch.randn(2, dtype=torch.float64, requires_grad=True)

    def f(x, dt, A, B, C, D, dt_bias):
        return m2.ssd_chunked(x, dt, A, B, C, 4, D=D, dt_bias=dt_bias, dt_softplus=True, dt_limit=(0.0, 5.0))

    assert torch.autograd.gradcheck(f, (*args, dt_bias))


def test_every_parameter_gets_a_gradient_through_both_ssds():
    """The reference SSD and the cuTile kernels (forward and backward, on the CPU executor) give every
    parameter of the block its gradient, as close to the float64 block's as each other (A_log's gradient is
    a sum with cancellation: about 5e-4 relative error in float32, for the reference SSD too)."""
    block = _decode_block()
    u = torch.randn(2, 9, 16)

    def grads(blk, inp, **kw):
        blk.zero_grad()
        blk(inp, **kw).square().mean().backward()
        return {name: param.grad.clone() for name, param in blk.named_parameters()}

    truth = grads(copy.deepcopy(block).double(), u.double())
    ref_grads, cutile_grads = grads(block, u), grads(block, u, ssd="cutile", backend="cpu")
    for name, want in truth.items():
        assert ref_grads[name].abs().sum() > 0, name
        e_ref = m2.relative_error(ref_grads[name], want)
        e_cutile = m2.relative_error(cutile_grads[name], want)
        assert e_cutile <= max(2 * e_ref, 1e-5), f"{name}: cuTile {e_cutile:.1e}, reference SSD {e_ref:.1e}"
    with torch.no_grad():  # the block's default form, unpacked, is ssd_chunked itself
        inputs = {k: v for k, v in block.ssd_inputs(u).items() if k not in ("gate", "xBC")}
        assert torch.equal(ssd_function("chunked")(**inputs, chunk_size=block.chunk_size),
                           m2.ssd_chunked(**inputs, chunk_size=block.chunk_size))


def test_recall_task():
    task = AssociativeRecall(num_keys=8, num_values=5, num_pairs=4, num_queries=3)
    batch = task.sample(16, seed=3)
    assert batch.tokens.shape == batch.targets.shape == (16, task.seq_len)
    assert torch.equal(batch.tokens, task.sample(16, seed=3).tokens)  # seeded
    assert not torch.equal(batch.tokens, task.sample(16, seed=4).tokens)
    keys, values = batch.context[:, 0::2], batch.context[:, 1::2]
    assert (keys < 8).all() and (values >= 8).all() and (values < task.vocab_size).all()
    assert all(len(set(row.tolist())) == 4 for row in keys)  # distinct keys
    for i in range(16):
        for j, q in enumerate(batch.queries[i].tolist()):
            pair = keys[i].tolist().index(q)
            assert pair == batch.pair_of_query[i, j]
            assert batch.answers[i, j] == values[i, pair]
            assert batch.tokens[i, batch.query_positions[j] + 1] == batch.answers[i, j]
    assert (batch.targets != IGNORE).sum() == 16 * 3


def _tiny_lm(task, seed=0):
    torch.manual_seed(seed)
    return TinyMamba2LM(task.vocab_size, d_model=32, n_layers=2, d_state=8, headdim=8, chunk_size=8).eval()


def test_lm_decode_matches_forward_and_generation_agrees():
    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=5, num_queries=3)
    model = _tiny_lm(task)
    batch = task.sample(3, seed=0)
    with torch.no_grad():
        logits = model(batch.tokens)
        _, states = model(batch.tokens[:, :7], ssd="cutile", backend="cpu", return_states=True)
        steps = [model.step(batch.tokens[:, t], states)[0] for t in range(7, 8)]
        step_logits, states = model.step(batch.tokens[:, 7], states)
    m2.assert_close(steps[0], logits[:, 7], name="logits")
    m2.assert_close(step_logits, logits[:, 7], name="logits")
    # greedy generation by prefill + decode == argmax of a full forward, token after token
    new = generate(model, batch.tokens[:, :9], 4, ssd="cutile", backend="cpu")
    seq = batch.tokens[:, :9]
    with torch.no_grad():
        for _ in range(4):
            seq = torch.cat([seq, model(seq).argmax(-1)[:, -1:]], 1)
    assert torch.equal(new, seq[:, 9:])
    # the recall queries answered by decode == the forward's argmax on the sequence the model saw
    answers, seen = answer_queries(model, batch, ssd="cutile", backend="cpu")
    assert seen.shape == batch.tokens.shape and torch.equal(seen[:, batch.query_positions], batch.queries)
    with torch.no_grad():
        assert torch.equal(model(seen).argmax(-1)[:, batch.query_positions], answers)
    assert torch.equal(seen[:, batch.query_positions + 1], answers)


def test_memory_terms_rebuild_the_ssd_output():
    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=4, num_queries=2)
    model = _tiny_lm(task, seed=1)
    batch = task.sample(2, seed=1)
    u = layer_inputs(model, batch.tokens)
    assert len(u) == 2 and u[1].shape == (2, task.seq_len, 32)
    block = model.blocks[1]
    mem = memory_at(block, u[1], 9)
    inp = block.ssd_inputs(u[1])
    inp.pop("gate"), inp.pop("xBC")
    y = m2.ssd_chunked(**inp, chunk_size=block.chunk_size)  # (b, l, h, p)
    m2.assert_close(mem.y, y[:, 9], name="y_t", hint="sum of the memory terms + D·x_t vs the SSD")
    assert mem.decay.shape == mem.contribution.shape == (2, block.nheads, 10)
    assert torch.all(mem.decay[..., -1] == 1) and torch.all(mem.decay[..., 1:] >= mem.decay[..., :-1])


def test_training_lowers_the_loss():
    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=4, num_queries=2)
    model = _tiny_lm(task)
    before = evaluate_lm(model, task, batch_size=128)
    result = train_lm(model, task, steps=120, batch_size=32, lr=1e-2, seed=0, progress=False, eval_every=60)
    assert len(result.losses) == 120 and result.eval_steps == [60, 120]
    first, last = sum(result.losses[:10]) / 10, sum(result.losses[-10:]) / 10
    assert last < first - 0.5, (first, last)  # from ~ln(16) to well below
    assert result.final_accuracy > max(before, task.chance) + 0.05, (before, result.final_accuracy)
    again = train_lm(_tiny_lm(task), task, steps=5, batch_size=8, seed=0, progress=False)
    rerun = train_lm(_tiny_lm(task), task, steps=5, batch_size=8, seed=0, progress=False)
    assert again.losses == rerun.losses  # seeded
    batch = task.sample(64, seed=9)
    with torch.no_grad():
        assert recall_accuracy(model(batch.tokens), batch) == recall_accuracy(
            model(batch.tokens, ssd="recurrent"), batch)


def test_plots():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from mamba2_tutorial.figures.model import plot_memory, plot_training, token_labels
    from mamba2_tutorial.model.train import TrainResult

    result = TrainResult(losses=[3.0, 2.0, 1.0, 0.5], eval_steps=[2, 4], accuracies=[0.2, 0.9], seconds=1.0,
                         steps=4, cpu="cpu")
    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=4, num_queries=2)
    model = _tiny_lm(task)
    batch = task.sample(1, seed=0)
    mem = memory_at(model.blocks[0], layer_inputs(model, batch.tokens)[0], 8)
    labels = token_labels(batch.tokens[0], task.num_keys)
    assert labels[:2] == [f"k{int(batch.tokens[0, 0])}", f"v{int(batch.tokens[0, 1]) - 8}"]
    for fig in (plot_training(result, chance=0.125, chance_in_context=0.25),
                plot_memory(mem, labels, highlight=[2, 3])):
        FigureCanvasAgg(fig).draw()
        for ax in fig.axes:
            if ax.get_label() != "<colorbar>":
                assert ax.get_ylabel() and ax.get_title()
    with pytest.raises(ValueError, match="labels"):
        plot_memory(mem, labels[:3])


@pytest.mark.gpu
def test_decode_and_recall_on_the_gpu():
    """The same checks with the kernels on the GPU: a cuTile prefill ending mid-chunk, then decode steps, and
    the tiny model's answers by prefill + decode (all tensors on the GPU)."""
    block = _decode_block(seed=5)
    u = torch.randn(2, 19, 16)
    with torch.no_grad():
        full = block(u)
        gpu_block = block.cuda()
        out, state = gpu_block(u[:, :11].cuda(), ssd="cutile", backend="gpu", return_state=True)
        outs = [out]
        for t in range(11, 19):
            out_t, state = gpu_block.step(u[:, t].cuda(), state)
            outs.append(out_t[:, None])
    m2.assert_close(torch.cat(outs, 1).cpu(), full, name="out", hint="GPU cuTile prefill + decode steps")

    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=5, num_queries=3)
    model = _tiny_lm(task)
    batch = task.sample(4, seed=0)
    answers, seen = answer_queries(model, batch, ssd="chunked")
    gpu_answers, gpu_seen = answer_queries(model.cuda(), task.sample(4, seed=0, device="cuda"), ssd="cutile",
                                           backend="gpu")
    assert torch.equal(gpu_answers.cpu(), answers) and torch.equal(gpu_seen.cpu(), seen)


@pytest.mark.gpu
def test_training_on_the_gpu_follows_the_reference():
    """The tiny model trained on the GPU through the cuTile forward and backward (the fast path's kernels),
    and through the chunked float reference: same seed, same data, same initialisation, the same loss curve
    within float32 tolerance."""
    task = AssociativeRecall(num_keys=8, num_values=8, num_pairs=4, num_queries=2)
    curves = {}
    for ssd in ("chunked", "cutile"):
        torch.manual_seed(0)
        model = TinyMamba2LM(task.vocab_size, d_model=64, n_layers=2, d_state=16, headdim=16,
                             chunk_size=16).cuda()
        result = train_lm(model, task, steps=40, batch_size=32, lr=3e-3, seed=0, ssd=ssd, progress=False,
                          eval_every=40, eval_batch=64)
        curves[ssd] = torch.tensor(result.losses)
    assert curves["chunked"][-1] < 0.9 * curves["chunked"][0], "the loss must fall"
    gap = (curves["cutile"] - curves["chunked"]).abs().max().item()
    assert gap < 1e-3, f"the loss curves differ by up to {gap:.1e}"
