"""Mamba-2's stage table: the pre-RMSNorm block of the Llama family with the Mamba-2 mixer as its one branch
(forward.py, mixer.py, ssd.py), in the order a pass runs them. A prompt runs the chunked scan's stages (ssd.*), a
decode step the recurrent ones (ssm.input, ssm.state, ssm.output): the table has both. Nemotron-H's Mamba layers
run the same stages (MIXER)."""

from __future__ import annotations

from functools import cache

from ...engine.stages import CONV_WINDOWS, LAST, LOGITS, READS_STATE, STATE, WRITES_STATE, Stage, StageTable

# The parts of a state-space model's arithmetic (count's summary groups products by them): the products with weights,
# and the scan's, which read and write a state of fixed size and hold no weights (the engine's STATE).
SSM_PROJECTIONS = "state-space projections and conv"
SSM_SCAN = STATE

EMBED = (Stage("embed", ("embed",), "lookup", "x = W_te[ids]  (no positions: the scan is in order)", "ids [T]"),)
NORM = Stage("ln_1", ("ln_1",), "norm", "h = RMSNorm(x)", "x [T, D]", reads_stream=True)
MIXER = (
    Stage("ssm.in_proj", ("mixer.in_proj",), "matmul", "[z, xBC, dt] = h W_in", "h [T, D], W_in [D, I+Cv+Hs]",
          SSM_PROJECTIONS, product="projection"),
    Stage("ssm.split", ("mixer.z", "mixer.xBC", "mixer.dt_in"), "reshape",
          "z (the gate, I), xBC (x, B and C: Cv), dt (one per head)", "[T, I+Cv+Hs]"),
    Stage("ssm.conv", ("mixer.conv",), "matmul",
          "u = causal conv of xBC: each channel and position a dot product of its last K inputs (the K - 1 before "
          "this pass kept in the conv state, zeros at the start) with its kernel", "xBC [T, Cv], w [Cv, K]",
          SSM_PROJECTIONS, state=CONV_WINDOWS, product="conv"),
    Stage("ssm.conv_act", ("mixer.conv_act",), "activation", "xBC = act(u + b)  (SiLU)", "u [T, Cv]"),
    Stage("ssm.heads", ("mixer.x", "mixer.B", "mixer.C"), "reshape",
          "x -> Hs heads of P (Ng groups of Hg); B, C -> Ng groups of N, shared by a group's heads", "xBC [T, Cv]"),
    Stage("ssm.dt", ("mixer.dt",), "activation",
          "dt = softplus(dt + dt_bias)  (clamped to time_step_limit in the chunked form)", "dt [T, Hs]"),
    Stage("ssm.discretize", ("mixer.dA", "mixer.x_dt"), "scale",
          "a = dt A  (A = -exp(A_log): a decay exp(a) < 1 per head), x_dt = dt x  (per-head scalars: elementwise)",
          "dt [Hs, T], x [Hs, T, P]"),
    # The chunked form (a pass of several positions): Nc chunks of L, the last padded with zeros.
    Stage("ssd.chunks", ("mixer.ssd.x_dt", "mixer.ssd.dA", "mixer.ssd.B", "mixer.ssd.C"), "reshape",
          "x_dt, a, B, C in Nc chunks of L = min(chunk_size, T) positions, the last padded with zeros",
          "x_dt [Hs, T, P], a [Hs, T], B, C [Ng, T, N]"),
    Stage("ssd.decay", ("mixer.ssd.decay",), "mask",
          "Λ[l, s] = exp(a_s+1 + ... + a_l) for s <= l, 0 above: each head's decay from s to l within a chunk",
          "a [Hs, T]"),
    Stage("ssd.scores", ("mixer.ssd.scores",), "matmul",
          "S = C B^T within each chunk  (per group: its heads share B and C)", "C, B [Ng, T, N], in chunks",
          SSM_SCAN),
    Stage("ssd.weights", ("mixer.ssd.weights",), "scale", "W = S ∘ Λ  (each head its group's S and its own decay)",
          "S, Λ of each chunk"),
    Stage("ssd.mix", ("mixer.ssd.mix",), "matmul", "Y = W x_dt  (within each chunk, as attention mixes values)",
          "W of each chunk, x_dt [Hs, T, P]", SSM_SCAN),
    Stage("ssd.chunk_state", ("mixer.ssd.chunk_state",), "matmul",
          "h_c = (Λ[L-1, :] ∘ x_dt)^T B: what each chunk adds to the state, decayed to its end",
          "x_dt [Hs, T, P], B [Ng, T, N], in chunks", SSM_SCAN, state=WRITES_STATE),
    Stage("ssd.carry", ("mixer.ssd.states", "mixer.ssd.last_state"), "scale",
          "h = exp(a_0 + ... + a_L-1) h + h_c, chunk after chunk: the state before each chunk, and after the last",
          "each chunk's h_c [Hs, P, N]"),
    Stage("ssd.from_state", ("mixer.ssd.from_state",), "matmul",
          "Y_s = C h^T: each chunk reads the state before it",
          "C [Ng, T, N], each chunk's h^T [Hs, N, P]", SSM_SCAN, state=READS_STATE),
    Stage("ssd.decay_in", ("mixer.ssd.y",), "scale", "Y = Y + exp(a_0 + ... + a_l) Y_s", "Y, Y_s of each chunk"),
    # The recurrent form (a decode step: one position after a cached state).
    Stage("ssm.input", ("mixer.input",), "matmul", "x_dt ⊗ B  (an outer product: P N dot products of length 1 a head)",
          "x_dt^T [Hs, P, 1], B [Ng, 1, N]", SSM_SCAN, state=WRITES_STATE),
    Stage("ssm.state", ("mixer.state",), "scale", "h = exp(a) h + x_dt ⊗ B  (the state, kept in the cache)",
          "h [Hs, P, N]"),
    Stage("ssm.output", ("mixer.output",), "matmul", "y = C h^T  (P dot products of length N a head)",
          "C [Ng, 1, N], h^T [Hs, N, P]", SSM_SCAN, state=READS_STATE),
    Stage("ssm.skip", ("mixer.y",), "scale", "y = y + D x  (D per head), heads side by side", "y, x [Hs, T, P]"),
    Stage("ssm.gate", ("mixer.gated",), "multiply", "y = y silu(z)", "y, z [T, I]"),
    Stage("ssm.norm", ("mixer.normed",), "norm", "y = RMSNorm(y) over each of Ng groups of I/Ng", "y [T, I]"),
    Stage("ssm.out_proj", ("mixer.out",), "matmul", "m = y W_out", "y [T, I], W_out [I, D]", SSM_PROJECTIONS,
          product="projection"),
)  # fmt: skip
RESID = Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]")
FINAL = (Stage("ln_f", ("ln_f",), "norm", "h = RMSNorm_f(x)", "x [T, D]"), LAST, LOGITS)
SYMBOLS = (
    "T new positions, D d_model, Hs state-space heads of P, Ng groups of Hg heads sharing B and C, N the "
    "state per head and channel of P, I = Hs P, Cv = I + 2 Ng N conv channels, K the conv's kernel, Ks = K - 1, "
    "Nc chunks of L positions, V vocabulary, R logit rows"
)


@cache
def mamba2_family() -> StageTable:
    return StageTable("mamba2", EMBED, (NORM, *MIXER, RESID), FINAL, SYMBOLS)


def stages_of(config) -> StageTable:
    return mamba2_family()
