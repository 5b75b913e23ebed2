"""validate's float64 truth for DeepSeek-V4: transformers' model in float64 (its experts one by one, its eager path:
torch's grouped_mm takes no float64), with what it computes in float32 whatever the dtype recomputed in float64. Its
modules kept in float32 (the hyper-connections and their head, the norms, the sinks, the compressors' position
biases, the routers' correction biases) are converted; the forwards that cast to float32 inside (the norms', the
hyper-connections' `.float()`, the rotation's `rope.float()`, the compressors' softmax over a window's slots in
float32, the indexer's scores) run as transformers writes them, those casts taken out (their source, on this
instance only); the rotary modules' frequencies are the config's in float64 (as families/llama/reference.py's)."""

from __future__ import annotations

import inspect
import textwrap
import types

import numpy as np

from ...errors import UserError
from .. import rotary

NOTE = (
    "  (transformers' float64 DeepSeek-V4 keeps its hyper-connections, norms, sinks and biases in float32 and casts to "
    "float32 inside\n  its norms, rotations, compressors and indexer; its reference here has them in float64, as "
    "families/deepseek_v4/reference.py explains)"
)
# The modules whose forward casts to float32 (or calls the rotation, which does), and the casts taken out of their
# source
CAST = tuple(
    f"DeepseekV4{name}"
    for name in ("Attention", "RMSNorm", "UnweightedRMSNorm", "HyperConnection", "HyperHead", "HCACompressor")
    + ("CSACompressor", "Indexer", "IndexerScorer")
)
CASTS = ((".to(torch.float32)", ""), (".float()", ""), (", dtype=torch.float32", ""))


def in_float64(function, namespace: dict):
    """A function of transformers' modeling file with its float32 casts taken out (its decorators too), defined in
    `namespace`."""
    source = textwrap.dedent(inspect.getsource(function))
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("@"))
    for cast, kept in CASTS:
        source = source.replace(cast, kept)
    exec(compile(source, inspect.getsourcefile(function) or "<transformers>", "exec"), namespace)  # noqa: S102
    return namespace[function.__name__]


def float64_throughout(reference, model, torch) -> None:
    """transformers' model in float64 throughout, on this instance only (see above)."""
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as modeling

    reference.set_experts_implementation("eager")
    reference.to(torch.float64)
    namespace = dict(vars(modeling))
    namespace["apply_rotary_pos_emb"] = in_float64(modeling.apply_rotary_pos_emb, namespace)
    forwards = {name: in_float64(getattr(modeling, name).forward, namespace) for name in CAST}
    config, replaced = model.config, 0
    ropes = {
        "main": config.rope(first_of(config, sliding=True)),
        "compress": config.rope(first_of(config, sliding=False)),
    }
    float64 = np.dtype(np.float64)
    frequencies = {
        kind: torch.tensor(rotary.inverse_frequencies(r, float64)) for kind, r in ropes.items() if r is not None
    }

    def rotary_forward(module, x, position_ids, layer_type=None):
        angles = position_ids[..., None].to(torch.float64) * frequencies[layer_type]
        return angles.cos().to(x.dtype), angles.sin().to(x.dtype)

    for module in reference.modules():
        name = type(module).__name__
        if name in forwards:
            module.forward = types.MethodType(forwards[name], module)
            replaced += 1
        elif name == "DeepseekV4RotaryEmbedding":
            module.forward = types.MethodType(rotary_forward, module)
    if not replaced:
        raise UserError("validate in float64 recomputes transformers' DeepSeek-V4 modules in float64, and found none")


def first_of(config, sliding: bool) -> int:
    """A layer of the kind asked (sliding, or compressed), or the first layer where the model has none."""
    return next((i for i in range(config.n_layer) if (config.ratio(i) == 0) == sliding), 0)
