"""The life of "The capital of France is" inside GPT-2, from token ids to the answer.

    python examples/walkthrough.py                  # the default model (GPT-2 if it is here, else the demo)
    python examples/walkthrough.py --model DIR      # any GPT-2 checkpoint directory

Every number printed is read from the model's own tensors, captured with `model.run_with_cache`,
and every dot-product count from the ledger of the same pass.
"""

from __future__ import annotations

import argparse

import numpy as np

from minitransformer import UserError, load_model
from minitransformer.engine.ledger import Phase
from minitransformer.views.report import count


def products(phase: Phase, op: str, layer: int | None = 0) -> str:
    r = phase.find(op, layer)
    return f"{count(r.dot_products)} dot products of length {r.dot_length} ({count(r.macs)} MACs)"


def shape(x: np.ndarray) -> str:
    return f"{str(list(x.shape)):<13}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model name or directory (default: load_model()'s choice)")
    parser.add_argument("--prompt", default="The capital of France is")
    args = parser.parse_args()

    model = load_model(args.model)
    c = model.config
    tok = model.tokenizer
    ids = tok.encode(args.prompt)
    T, last = len(ids), c.n_layer - 1
    print(
        f"The life of {args.prompt!r} in {model.name}: {c.n_layer} blocks, D = {c.n_embd} dimensions, "
        f"H = {c.n_head} heads of dh = {c.d_head}, MLP width F = {c.d_ff}, vocabulary V = {c.vocab_size:,}\n"
    )

    print("1. Text becomes tokens, tokens become ids")
    print(f"   {' '.join(repr(tok.token_str(i)) for i in ids)}  ->  {ids}   (T = {T} positions)\n")

    phase = Phase("prefill", 0, T, T)
    logits, cache = model.run_with_cache(ids, all_positions=False, phase=phase)  # logits for the last position
    x = cache["embed"]
    print("2. Embedding: each id picks a row of W_te [V, D], each position a row of W_pe [positions, D]")
    print(
        f"   embed                {shape(x)}  one D-vector per token; their lengths: "
        f"{[round(float(n), 2) for n in np.linalg.norm(x, axis=-1)]}\n"
    )

    a = "blocks.0.attn"
    weights = cache[f"{a}.weights"]
    print("3. Block 0, attention: each position gathers information from the positions before it")
    print(
        f"   ln_1                 {shape(cache['blocks.0.ln_1'])}  every row rescaled to mean 0, std 1 (then "
        f"LayerNorm's gain and bias)"
    )
    print(f"   attn.qkv             {shape(cache[f'{a}.qkv'])}  = [T, D] x [D, 3D]: {products(phase, 'qkv')}")
    print(f"   attn.q, .k, .v       {shape(cache[f'{a}.q'])} each: split into {c.n_head} heads of {c.d_head}")
    print(
        f"   attn.qk              {shape(cache[f'{a}.qk'])}  every query meets every key, per head: "
        f"{products(phase, 'scores')}"
    )
    print(
        f"   attn.scores          {shape(cache[f'{a}.scores'])}  scaled by 1/sqrt(dh), future masked to -inf "
        f"({int(np.isneginf(cache[f'{a}.scores']).sum())} entries)"
    )
    print(f"   attn.weights         {shape(weights)}  softmax: each row sums to 1. Head 0, who attends to whom:")
    labels = [tok.token_str(i).strip() or repr(tok.token_str(i)) for i in ids]
    width = max(len(s) for s in labels) + 2
    print(" " * (25 + width) + "".join(f"{s[:7]:>8}" for s in labels))
    for row, label in enumerate(labels):
        cells = "".join(f"{w:8.2f}" if col <= row else f"{'.':>8}" for col, w in enumerate(weights[0, row]))
        print(f"{'':25}{label:>{width}}{cells}")
    print(f"   attn.mix             {shape(cache[f'{a}.mix'])}  weights x values, per head: {products(phase, 'mix')}")
    print(f"   attn.z               {shape(cache[f'{a}.z'])}  the heads side by side again")
    print(f"   attn.out             {shape(cache[f'{a}.out'])}  = [T, D] x [D, D]: {products(phase, 'out')}")
    print(f"   resid_mid            {shape(cache['blocks.0.resid_mid'])}  x + attention: the residual stream\n")

    print("4. Block 0, MLP: each position on its own, widened and narrowed again")
    print(f"   mlp.up               {shape(cache['blocks.0.mlp.up'])}  = [T, D] x [D, F]: {products(phase, 'mlp.up')}")
    act = cache["blocks.0.mlp.act"]
    print(
        f"   mlp.act              {shape(act)}  {c.activation_function}: {100 * np.mean(act > 0):.0f}% of the "
        f"{act.size:,} values positive"
    )
    print(
        f"   mlp.down             {shape(cache['blocks.0.mlp.down'])}  = [T, F] x [F, D]: {products(phase, 'mlp.down')}"
    )
    print(f"   resid_post           {shape(cache['blocks.0.resid_post'])}  x + MLP: block 0's output\n")

    print(f"5. Blocks 1..{last} repeat the same shapes; what the last position (the one that predicts) does in each:")
    print("   block  |x| at the last position  its strongest attention (mean over heads)")
    for i in range(c.n_layer):
        stream = cache[f"blocks.{i}.resid_post"][-1]
        attends = cache[f"blocks.{i}.attn.weights"][:, -1, :].mean(axis=0)
        j = int(np.argmax(attends))
        print(f"   {i:>5}  {np.linalg.norm(stream):>23.2f}  {labels[j]!r} ({attends[j]:.2f})")
    print()

    print("6. The end of the pass: the last position's vector against every token's embedding")
    print(f"   ln_f                 {shape(cache['ln_f'])}  the final LayerNorm")
    print(f"   last                 {shape(cache['last'])}  only the last position predicts the next token")
    print(f"   logits               {shape(logits)}  = [1, D] x [D, V]: {products(phase, 'logits', None)}")
    scores = logits[-1]
    p = np.exp(scores - scores.max())
    p /= p.sum()
    top = np.argsort(-p)[:5]
    print("   most likely next tokens: " + ", ".join(f"{tok.token_str(int(i))!r} {100 * p[i]:.1f}%" for i in top))
    answer = int(top[0])
    print(f"   total for this pass: {count(phase.dot_products)} dot products, {count(phase.macs)} MACs\n")

    print(f"7. Decode: {tok.token_str(answer)!r} goes back in as one new position; the keys grow by one")
    kv = model.new_cache()
    model.run(ids, cache=kv)
    step_phase = Phase("decode", 1, 1, T + 1)
    _, step = model.run_with_cache([answer], all_positions=False, kv_cache=kv, phase=step_phase)
    print(f"   attn.q               {shape(step[f'{a}.q'])}  one query row per head")
    print(f"   attn.keys            {shape(step[f'{a}.keys'])}  all {T + 1} positions, {T} of them from the cache")
    print(f"   attn.scores          {shape(step[f'{a}.scores'])}  nothing to mask: the new position is the latest")
    print(f"   this step: {count(step_phase.dot_products)} dot products (the prefill: {count(phase.dot_products)})\n")

    result = model.generate(ids, max_new_tokens=6, candidates=0, ledger=False)
    print(f"8. The answer, greedy: {args.prompt + result.text!r}")


if __name__ == "__main__":
    try:
        main()
    except UserError as err:  # no model here, a prompt the model cannot take...: say so in one line
        raise SystemExit(f"walkthrough.py: {err}") from None
