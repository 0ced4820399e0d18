"""A Mamba-2 block from Hugging Face transformers: a ``Mamba2Config``, or a ``Mamba2Mixer`` with its weights.

Every field of ``Mamba2Config`` that the mixer reads has its place in :class:`~.block.Mamba2Block`
(:data:`CONFIG_FIELDS`); the fields that belong to the whole model (vocabulary, layer count, residual
precision, token ids) are listed in :data:`MODEL_FIELDS`, and a field in neither list is refused, so that a
new transformers release cannot add a setting that is silently dropped. transformers itself is not imported
here: any object with the config's attributes (or the mixer's) will do.

    block = block_from_transformers(config)           # a new block, initialised as Mamba2Block initialises
    block = block_from_transformers(mixer)            # the mixer's hyperparameters, weights, dtype and device
"""

from __future__ import annotations

import torch

from .block import Mamba2Block

__all__ = ["CONFIG_FIELDS", "MIXER_FIELDS", "MODEL_FIELDS", "block_from_transformers"]

#: Mamba2Config field -> Mamba2Block keyword
CONFIG_FIELDS = {
    "hidden_size": "d_model",
    "state_size": "d_state",
    "conv_kernel": "d_conv",
    "expand": "expand",
    "head_dim": "headdim",
    "n_groups": "ngroups",
    "chunk_size": "chunk_size",
    "layer_norm_epsilon": "norm_eps",
    "time_step_min": "dt_min",
    "time_step_max": "dt_max",
    "time_step_floor": "dt_init_floor",
    "time_step_limit": "dt_limit",
    "use_bias": "bias",
    "use_conv_bias": "conv_bias",
}

#: Mamba2Mixer attribute -> Mamba2Block keyword (the mixer keeps its settings as attributes, not its config)
MIXER_FIELDS = {
    "hidden_size": "d_model",
    "ssm_state_size": "d_state",
    "conv_kernel_size": "d_conv",
    "head_dim": "headdim",
    "n_groups": "ngroups",
    "chunk_size": "chunk_size",
    "layer_norm_epsilon": "norm_eps",
    "time_step_min": "dt_min",
    "time_step_max": "dt_max",
    "time_step_floor": "dt_init_floor",
    "time_step_limit": "dt_limit",
    "use_bias": "bias",
    "use_conv_bias": "conv_bias",
}

#: Mamba2Config fields checked rather than mapped: the head count (it must be expand · hidden_size / head_dim)
#: and the activation (the block's is silu)
CHECKED_FIELDS = ("num_heads", "hidden_act")

#: Mamba2Config fields of the whole model, not of one block; ``time_step_rank`` is Mamba-1's and the Mamba-2
#: mixer reads it without using it
MODEL_FIELDS = ("vocab_size", "num_hidden_layers", "pad_token_id", "bos_token_id", "eos_token_id",
                "initializer_range", "residual_in_fp32", "rescale_prenorm_residual", "use_cache",
                "tie_word_embeddings", "time_step_rank", "layer_types")


def _own_fields(config) -> set[str]:
    """The config's own fields: those its class adds to a plain transformers ``PretrainedConfig``."""
    fields = set(config.to_dict()) if hasattr(config, "to_dict") else set(vars(config))
    for base in type(config).__mro__[1:]:
        if base.__name__ in ("PretrainedConfig", "PreTrainedConfig"):
            try:
                fields -= set(base().to_dict())
            except TypeError:  # a base that cannot be built bare: keep every field
                pass
            break
    return {f for f in fields if not f.startswith("_")}


def _is_mixer(obj) -> bool:
    return isinstance(obj, torch.nn.Module) and hasattr(obj, "ssm_state_size") and hasattr(obj, "in_proj")


def _check(kw: dict, num_heads: int, act: str, where: str) -> None:
    d_inner = kw["expand"] * kw["d_model"]
    if d_inner != num_heads * kw["headdim"]:
        raise ValueError(f"{where}: num_heads = {num_heads} does not match expand · hidden_size / head_dim = "
                         f"{kw['expand']} · {kw['d_model']} / {kw['headdim']}"
                         "; the block takes h = d_inner / p")
    if act not in ("silu", "swish"):
        raise ValueError(f"{where}: hidden_act = {act!r}, but the Mamba-2 block's activation is silu")


def block_from_transformers(config_or_mixer, **options) -> Mamba2Block:
    """A :class:`~.block.Mamba2Block` with every block setting of a transformers ``Mamba2Config`` (or of a
    ``Mamba2Mixer``, whose weights, dtype and device it also takes). ``options``: further keywords of
    ``Mamba2Block`` (``ssd``, ``backend``, ...); one that a config field already sets is refused.
    ValueError for a config with a field this mapping does not know, a head count that is not
    expand · hidden_size / head_dim, or an activation other than silu."""
    if _is_mixer(config_or_mixer):
        mixer = config_or_mixer
        kw = {ours: getattr(mixer, theirs) for theirs, ours in MIXER_FIELDS.items()}
        if mixer.intermediate_size % mixer.hidden_size:
            raise ValueError(f"the mixer's intermediate_size {mixer.intermediate_size} is not a multiple of "
                             f"its hidden_size {mixer.hidden_size}")
        kw["expand"] = mixer.intermediate_size // mixer.hidden_size
        _check(kw, mixer.num_heads, mixer.activation, "Mamba2Mixer")
    else:
        config = config_or_mixer
        unknown = _own_fields(config) - set(CONFIG_FIELDS) - set(CHECKED_FIELDS) - set(MODEL_FIELDS)
        if unknown:
            raise ValueError(f"Mamba2Config has fields this mapping does not know: {sorted(unknown)}; map "
                             "each to a Mamba2Block keyword (CONFIG_FIELDS) or list it as model-level "
                             "(MODEL_FIELDS)")
        kw = {ours: getattr(config, theirs) for theirs, ours in CONFIG_FIELDS.items()}
        _check(kw, config.num_heads, config.hidden_act, "Mamba2Config")
        mixer = None
    kw["dt_limit"] = tuple(float(v) for v in kw["dt_limit"])
    clash = sorted(set(options) & set(kw))
    if clash:
        raise ValueError(f"{clash} come from the transformers config; change the config instead")
    # transformers' mixer: D per head, the gated RMSNorm after the gate, one norm group per SSM group
    kw |= dict(D_has_hdim=False, rmsnorm=True, norm_before_gate=False)
    if mixer is None:
        return Mamba2Block(**kw, **options)
    weight = mixer.in_proj.weight
    block = Mamba2Block(**kw, **options, device=weight.device, dtype=weight.dtype)
    block.load_state_dict(mixer.state_dict())
    return block
