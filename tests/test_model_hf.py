"""A block from transformers' ``Mamba2Config`` or ``Mamba2Mixer`` in one call, every field mapped; and a
float64 block that is float64 throughout.

The parity test sets every block field of the config away from its default (a forgotten ``layer_norm_epsilon``
would show there), with random weights, so that no term hides behind a 0 or a 1.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import mamba2_tutorial as m2
from mamba2_tutorial.model.block import Mamba2Block
from mamba2_tutorial.model.hf import CONFIG_FIELDS, MIXER_FIELDS, block_from_transformers
from mamba2_tutorial.reference import ssd_recurrent

transformers = pytest.importorskip("transformers", reason="transformers is a dev dependency (make install)")
from transformers import Mamba2Config  # noqa: E402
from transformers.models.mamba2.modeling_mamba2 import Mamba2Mixer  # noqa: E402

#: every block field away from its default
ODD = dict(hidden_size=20, num_heads=10, head_dim=4, expand=2, n_groups=2, state_size=6, conv_kernel=3,
           chunk_size=8, layer_norm_epsilon=1e-2, time_step_min=0.01, time_step_max=0.2, time_step_floor=0.02,
           time_step_limit=(0.02, 0.5), use_bias=True, use_conv_bias=False, num_hidden_layers=1)


def _random_mixer(seed=0, **fields):
    torch.manual_seed(seed)
    mixer = Mamba2Mixer(Mamba2Config(**fields), layer_idx=0).eval()
    with torch.no_grad():
        for param in mixer.parameters():
            param.normal_(0.0, 0.5)
        mixer.A_log.copy_(torch.rand(mixer.num_heads) * 2.0)
    return mixer


@pytest.mark.parametrize("seed", [0, 1])
def test_a_block_from_a_mixer_computes_what_the_mixer_computes(seed):
    mixer = _random_mixer(seed, **ODD)
    block = block_from_transformers(mixer)
    u = torch.randn(2, 19, ODD["hidden_size"])
    with torch.no_grad():
        want, got = mixer(u), block(u)
    m2.assert_close(got, want, name="out")
    assert m2.relative_error(got, want) < 2e-6
    # the same block built from the config alone, then given the weights
    from_config = block_from_transformers(Mamba2Config(**ODD))
    from_config.load_state_dict(mixer.state_dict())
    with torch.no_grad():
        m2.assert_close(from_config.eval()(u), want, name="out, block from the config")


def test_every_config_field_reaches_the_block():
    block = block_from_transformers(Mamba2Config(**ODD))
    assert (block.d_model, block.d_state, block.d_conv, block.expand, block.headdim, block.ngroups,
            block.chunk_size) == (20, 6, 3, 2, 4, 2, 8)
    assert block.nheads == ODD["num_heads"] and block.norm.eps == ODD["layer_norm_epsilon"]
    assert block.dt_limit == ODD["time_step_limit"]
    assert block.in_proj.bias is not None and block.out_proj.bias is not None and block.conv1d.bias is None
    dt0 = F.softplus(block.dt_bias.detach())  # initialised in [max(dt_min, floor), dt_max]
    assert dt0.min() >= ODD["time_step_floor"] - 1e-6 and dt0.max() <= ODD["time_step_max"] + 1e-6
    assert set(CONFIG_FIELDS.values()) == set(MIXER_FIELDS.values()) | {"expand"}


def test_fields_the_mapping_does_not_know_and_inconsistent_configs_are_refused():
    config = Mamba2Config(**ODD)
    config.ssm_dropout = 0.1  # a setting a later release might add
    with pytest.raises(ValueError, match="ssm_dropout"):
        block_from_transformers(config)
    inconsistent = Mamba2Config(**ODD)
    inconsistent.num_heads = 7  # transformers checks this when a config is built, not when it is changed
    with pytest.raises(ValueError, match="num_heads = 7"):
        block_from_transformers(inconsistent)
    with pytest.raises(ValueError, match="silu"):
        block_from_transformers(Mamba2Config(**(ODD | {"hidden_act": "gelu"})))
    with pytest.raises(ValueError, match="chunk_size"):
        block_from_transformers(Mamba2Config(**ODD), chunk_size=16)
    assert block_from_transformers(Mamba2Config(**ODD), ssd="recurrent").ssd == "recurrent"


def _float64_block_by_hand(block: Mamba2Block, u: torch.Tensor) -> torch.Tensor:
    """The block's computation written out in float64, apart from the block's own pieces."""
    d_inner, h, p, g, n = block.d_inner, block.nheads, block.headdim, block.ngroups, block.d_state
    zxbcdt = F.linear(u, block.in_proj.weight, block.in_proj.bias)
    z, xBC, dt = torch.split(zxbcdt, [d_inner, block.conv_dim, h], dim=-1)
    conv = F.conv1d(xBC.transpose(1, 2), block.conv1d.weight, block.conv1d.bias, padding=block.d_conv - 1,
                    groups=block.conv_dim)[..., : u.shape[1]].transpose(1, 2)
    x, B, C = torch.split(F.silu(conv), [d_inner, g * n, g * n], dim=-1)
    b, l = u.shape[:2]
    y = ssd_recurrent(x.reshape(b, l, h, p), dt, -torch.exp(block.A_log), B.reshape(b, l, g, n),
                      C.reshape(b, l, g, n), D=block.D, dt_bias=block.dt_bias, dt_softplus=True,
                      dt_limit=block.dt_limit).reshape(b, l, d_inner)
    gated = (y * F.silu(z)).reshape(b, l, g, d_inner // g)
    normed = gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + block.norm.eps)
    return F.linear(normed.reshape(b, l, d_inner) * block.norm.weight, block.out_proj.weight,
                    block.out_proj.bias)


def test_a_float64_block_is_float64_throughout():
    mixer = _random_mixer(2, **ODD)
    block = block_from_transformers(mixer).double()
    assert block.A.dtype == torch.float64
    u = torch.randn(2, 23, ODD["hidden_size"], dtype=torch.float64)
    with torch.no_grad():
        got = block(u, ssd="recurrent")
        want = _float64_block_by_hand(block, u)
    assert got.dtype == torch.float64
    assert m2.relative_error(got, want) < 1e-12, m2.relative_error(got, want)
    assert math.isfinite(float(got.abs().max()))
