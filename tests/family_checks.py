"""The checks every family passes against transformers, on random models that transformers itself makes.

The conformance suite (tests/families/test_conformance.py) saves each config of tests/families/conformance_configs.py
with `save_random` and calls these checks on it: logits at every position (past the
attention row chunk and any window), 30 greedy tokens with our KV cache against transformers' `generate`, a
left-padded batch, float64 against a float64 truth, and count = a real run = the closed form. Each returns or
asserts real values; none knows which family it checks.

Importing this module needs torch and transformers; a test module that uses it skips without them
(`pytest.importorskip` before the import).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import transformers

from minitransformer import load_model
from minitransformer.models.model import Model
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_folded, count_generation, count_passes, decode_at, sweep_per_token
from minitransformer.verbs.generate import left_padded
from minitransformer.verbs.options import GenerationOptions

TOLERANCE = 1e-4  # relative to the logits' scale, as validate.py states it
RELATIVE_FLOAT64 = 1e-9
# A recurrent layer's state (a conv's last inputs, a scan's state) against transformers' cache, relative to the state's
# scale, max(1, max |state|). float32 carries 6e-8 of a number; a state is the sum of every earlier position's
# contribution, each through a few layers' products, which ours and transformers' fallbacks add in another order
# (chunks against their chunks, the products' own blocking): on the tests' models (up to 5 layers, 200 positions)
# they differ by at most 3e-6 of the scale, so 1e-5 leaves 3x for another CPU's kernels, while a wrong equation (a
# decay one position off, a chunk's carry lost, the clamp of dt in the wrong form) moves a state by 1e-3 or more.
STATE_TOLERANCE = 1e-5


def save_random(directory: Path, config, seed: int = 11, spread: float = 0.2, dtype=torch.float32):
    """transformers' own model of `config` (a transformers config object), every parameter moved by N(0, spread)
    so that norms' gains, biases and logits spread and greedy tokens do not repeat one token; saved in
    `directory` as save_pretrained writes it. Returns transformers' model (eager attention, float32)."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * spread)
    model.to(dtype).save_pretrained(directory)
    return transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                             attn_implementation="eager").eval()  # fmt: skip


def allowed(reference) -> float:
    reference = reference.detach().numpy() if hasattr(reference, "detach") else np.asarray(reference)
    return TOLERANCE * max(1.0, float(np.abs(reference).max()))


def worst(ours, theirs) -> float:
    """max |ours - theirs| / allowed(theirs): at most 1 passes."""
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    assert np.shape(ours) == theirs.shape, f"ours of shape {np.shape(ours)}, theirs {theirs.shape}"
    return float(np.abs(ours - theirs).max()) / allowed(theirs)


def differ(ours, theirs) -> str:
    """What a failing comparison of logits says: the largest difference, where, and what was allowed."""
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    gap = np.abs(np.asarray(ours) - theirs)
    where = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return (f"max |ours - theirs| = {gap.max():.3g} at {tuple(map(int, where))} (ours {np.asarray(ours)[where]:.6g}, "
            f"theirs {theirs[where]:.6g}), allowed {allowed(theirs):.3g}")  # fmt: skip


def logits_at_every_position(ours: Model, hf, ids) -> float:
    """worst() of our logits against transformers' at every position of one prompt."""
    with torch.no_grad():
        theirs = hf(torch.tensor([list(ids)])).logits[0]
    return worst(ours.logits(list(ids)), theirs)


@dataclass(frozen=True)
class Compared:
    """One comparison of ours with transformers: what was compared, the largest |ours - theirs| and what it may be
    (its repr is what a failing assertion prints)."""

    what: str
    difference: float
    allowed: float

    @property
    def ok(self) -> bool:
        return self.difference <= self.allowed

    def __repr__(self) -> str:
        verdict = "OK" if self.ok else "NOT OK"
        return f"{self.what}: max |ours - theirs| = {self.difference:.3g}, allowed {self.allowed:.3g}: {verdict}"


def states_and_logits_step_by_step(ours: Model, hf, prompt: list[int], steps: int = 3, then: list[int] = ()):
    """Our cache against transformers' cache after the prompt, after each of `steps` greedy decode steps (transformers'
    token fed to both) and after a pass of the positions `then` from the cache (chunks that start from a state): each
    recurrent layer's every state array (the conv's last K - 1 inputs against the last K transformers keeps, the scan's
    state; a hybrid attention layer's too, Falcon-H1's) within STATE_TOLERANCE of its scale, and each pass's logits
    within TOLERANCE. Returns every comparison, passes in order, each pass's logits first."""
    cache = ours.new_cache(capacity=len(prompt) + steps + len(then))
    compared: list[Compared] = []

    def compare(label: str, mine, output) -> int:
        theirs = output.logits[0].numpy()
        compared.append(Compared(f"{label}: logits {list(theirs.shape)}", float(np.abs(mine - theirs).max()),
                                 allowed(theirs)))  # fmt: skip
        for i, held in enumerate(cache.layers):
            for name, array in held.arrays.items() if hasattr(held, "arrays") else ():  # an attention layer's: none
                if hasattr(output.cache, "linear_cache"):  # MiniMaxCache: each lightning layer's state beside them
                    state = output.cache.linear_cache[i][0].numpy()
                elif name == "conv":  # transformers keeps [C, K] inputs, the first of which no later window reads
                    state = output.cache.layers[i].conv_states[0][0, :, 1:].T.numpy()
                else:
                    state = output.cache.layers[i].recurrent_states[0][0].numpy()
                assert array.shape == state.shape, (
                    f"{label}: layer {i} {name}: ours {array.shape}, theirs {state.shape}"
                )
                difference = float(np.abs(array - state).max())
                scale = max(1.0, float(np.abs(state).max()))
                compared.append(Compared(f"{label}: layer {i} {name} {list(state.shape)}", difference,
                                         STATE_TOLERANCE * scale))  # fmt: skip
        return int(np.argmax(theirs[-1]))

    logits = ours.run(prompt, cache=cache, all_positions=True)
    with torch.no_grad():
        output = hf(torch.tensor([prompt]), use_cache=True)
    token = compare(f"prompt of {len(prompt)}", logits, output)
    for step in range(1, steps + 1):
        logits = ours.run([token], cache=cache, all_positions=True)
        with torch.no_grad():
            output = hf(torch.tensor([[token]]), cache=output.cache, use_cache=True)
        token = compare(f"decode step {step}", logits, output)
    if then:
        logits = ours.run(list(then), cache=cache, all_positions=True)
        with torch.no_grad():
            output = hf(torch.tensor([list(then)]), cache=output.cache, use_cache=True)
        compare(f"then {len(then)} positions from the cache", logits, output)
    return compared


def greedy(ours: Model, hf, prompt: list[int], steps: int = 30) -> list[int]:
    """transformers' greedy tokens with its KV cache; asserts that ours, step by step with our KV cache, gives each
    step's logits within the tolerance and the same token, and that our generate gives them all."""
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), max_new_tokens=steps, do_sample=False, eos_token_id=None,
                          pad_token_id=0, output_logits=True, return_dict_in_generate=True)  # fmt: skip
    their_tokens = out.sequences[0, len(prompt) :].tolist()
    cache = ours.new_cache()
    logits = ours.run(prompt, cache=cache)[-1]
    for step, token in enumerate(their_tokens):
        theirs = out.logits[step][0]
        assert worst(logits, theirs) <= 1, f"step {step}: {differ(logits, theirs)}"
        mine = int(np.argmax(logits))
        assert mine == token, (f"step {step}: our token {mine} (logit {logits[mine]:.6g}), transformers' {token} "
                               f"(our logit {logits[token]:.6g}, theirs {float(theirs[token]):.6g})")  # fmt: skip
        if step + 1 < steps:
            logits = ours.run([token], cache=cache)[-1]
    generated = ours.generate(prompt, max_new_tokens=steps, stop_at_eos=False, ledger=False, candidates=0)
    assert generated.new_tokens == their_tokens, f"our generate {generated.new_tokens}, transformers' {their_tokens}"
    return their_tokens


def hf_inputs(rows, pad_id: int):
    """input_ids, attention_mask and position_ids as transformers' batched generate makes them (left padding)."""
    ids, pads = left_padded(rows, pad_id)
    mask = (np.arange(ids.shape[1])[None, :] >= pads[:, None]).astype(np.int64)
    positions = mask.cumsum(-1) - 1
    positions[mask == 0] = 1
    return ids, pads, mask, positions


def batch_logits(ours: Model, hf, rows: list[list[int]], pad_id: int = 0) -> float:
    """worst() of a left-padded batch's logits at every real position against transformers' (its attention mask
    and position ids); asserts each row equals its prompt alone."""
    ids, pads, mask, positions = hf_inputs(rows, pad_id)
    with torch.no_grad():
        reference = hf(torch.tensor(ids), attention_mask=torch.tensor(mask),
                       position_ids=torch.tensor(positions)).logits.numpy()  # fmt: skip
    logits = ours.run(ids, all_positions=True, pads=pads)
    assert np.isfinite(logits).all(), f"{int((~np.isfinite(logits)).sum())} of {logits.size} logits not finite"
    for row, prompt in enumerate(rows):
        alone = ours.logits(prompt)
        assert worst(logits[row, pads[row] :], alone) <= 1, (
            f"row {row} against itself alone: {differ(logits[row, pads[row] :], alone)}"
        )
    real = mask.astype(bool)
    return worst(logits[real], reference[real])


def float64_against_truth(directory: Path, ids: list[int]) -> float:
    """max |dlogit| / max(1, max |logit|) of our float64 pass against transformers' model in float64, where the
    family's float64_reference recomputes in float64 what transformers keeps in float32 (validate's truth)."""
    from minitransformer.verbs.validate import load_reference

    ours = load_model(directory, dtype="float64")
    _, reference = load_reference(ours, "float64")
    with torch.no_grad():
        theirs = reference(torch.tensor([ids])).logits[0].numpy()
    mine = ours.logits(ids)
    assert mine.dtype == theirs.dtype == np.float64, f"ours {mine.dtype}, theirs {theirs.dtype}: both float64"
    return float(np.abs(mine - theirs).max()) / max(1.0, float(np.abs(theirs).max()))


def count_equals_a_real_run_and_the_closed_form(model: Model, n_prompt: int, n_new: int) -> int:
    """count from the config alone = the ledger of a real run = formulas' closed form (MACs, with and without the
    KV cache); returns the MACs."""
    counted = count_generation(model.config, n_prompt, n_new)
    real = count_passes(model, n_prompt, n_new)
    counted_records, real_records = [p.expand().records for p in counted.passes], [p.records for p in real.phases]
    assert counted_records == real_records, first_difference(counted_records, real_records, "count", "the real run")
    closed = formulas.generation_macs(model.config, n_prompt, n_new)
    assert counted.totals.macs == real.totals.macs == closed, (
        f"MACs: count {counted.totals.macs:,}, the real run {real.totals.macs:,}, the closed form {closed:,}"
    )
    decode_steps_alone_are_those_after_their_prefill(model.config, counted.decodes)
    uncached = count_generation(model.config, n_prompt, n_new, use_cache=False)
    closed = formulas.generation_macs(model.config, n_prompt, n_new, use_cache=False)
    assert uncached.totals.macs == closed, (
        f"MACs without the cache: count {uncached.totals.macs:,}, closed form {closed:,}"
    )
    the_sweep_is_the_counted_passes(replace(model.config, n_positions=n_prompt + n_new - 1))
    return counted.totals.macs


def the_sweep_is_the_counted_passes(config) -> None:
    """count --plot's MACs per token (sweep_per_token, in closed form) at each of its contexts, across a context that
    passes the config's windows, chunks and top-k: the decode step counted at that context (decode_at) and the pass
    of that many positions without the cache."""
    sweep = sweep_per_token(config, points=5)
    for t, with_cache, without in zip(sweep["context"], sweep["with_cache"], sweep["without_cache"]):
        step = decode_at(config, t).macs
        recomputed = count_folded(config, t, GenerationOptions(max_new_tokens=1, use_cache=False))[0].macs
        assert (with_cache, without) == (step, recomputed), (
            f"context {t}: sweep {with_cache:,} and {without:,}, counted {step:,} and {recomputed:,}"
        )


def decode_steps_alone_are_those_after_their_prefill(config, decodes: list) -> None:
    """A decode step counted alone (decode_at: a shape-only cache advanced to its context, no prefill run) records
    what the same step records after its prefill and earlier steps: each step of a generation, and the last one's
    context at a batch of 3."""
    for step in decodes:
        alone = decode_at(config, step.context)
        assert alone.expand().records == step.expand().records, first_difference(
            [alone.expand().records], [step.expand().records], f"decode at {step.context} alone", "after its prefill"
        )
    if not decodes:
        return
    t = decodes[-1].context
    after = count_folded(config, t - 1, GenerationOptions(max_new_tokens=2), 3)[1].expand().records
    alone = decode_at(config, t, 3).expand().records
    assert alone == after, first_difference([alone], [after], f"batch 3 at {t} alone", "after its prefill")


def first_difference(a: list[list], b: list[list], a_is: str, b_is: str) -> str:
    """Where two ledgers' passes of records first differ: the pass, the record, and each side's."""
    if len(a) != len(b):
        return f"{a_is} has {len(a)} passes, {b_is} {len(b)}"
    for n, (x, y) in enumerate(zip(a, b)):
        for i, (r, q) in enumerate(zip(x, y)):
            if r != q:
                return f"pass {n}, record {i}: {a_is} {r}, {b_is} {q}"
        if len(x) != len(y):
            return f"pass {n}: {a_is} has {len(x)} records, {b_is} {len(y)}"
    return "no difference"


def transformers_parameters(config) -> int:
    """transformers' count of a config's parameters, on the meta device: no memory, no download."""
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def expert_loads_follow_the_router(model: Model, ids: list[int]) -> int:
    """Every routed expert product of a prefill says, expert by expert, the tokens the router sent there (the
    captured choice `moe.chosen`, counted) and their dot products and MACs (those tokens' rows, each of the product's
    width and length); over the experts they sum to T k rows whatever the router chose. Returns the layers checked
    (a mixture has at least one). Any family with experts owes it: a ledger that gave one expert another's tokens
    would pass every total."""
    from minitransformer.engine.ledger import Phase

    phase = Phase("prefill", 0, len(ids), len(ids))
    _, cache = model.run_with_cache(ids, phase=phase, names="blocks.*.moe.chosen")
    c, checked = model.config, 0
    for i in range(c.n_layer):
        chosen = cache.get(f"blocks.{i}.moe.chosen")
        if chosen is None:  # a layer without experts
            continue
        assert chosen.shape == (len(ids), c.top_k), (
            f"layer {i}: chosen {chosen.shape}, expected ({len(ids)}, {c.top_k})"
        )
        loads = np.bincount(np.asarray(chosen).ravel(), minlength=c.n_experts).tolist()
        routed = [r for r in phase.layer_records(i) if r.breakdown is not None]
        assert routed, f"layer {i} routed tokens but no product says which expert computed what"
        for record in routed:
            # the record's shapes stand for all T tokens side by side: [T, n] x [n, k w], each token's k rows
            width, length = record.out_shape[-1] // c.top_k, record.dot_length
            where = f"layer {i} {record.op}"
            experts = [p.expert for p in record.breakdown]
            assert experts == list(range(c.n_experts)), f"{where}: experts {experts}, expected 0 to {c.n_experts - 1}"
            tokens = [p.tokens for p in record.breakdown]
            assert tokens == loads, f"{where}: tokens per expert {tokens}, the router sent {loads}"
            dot_products = [p.dot_products for p in record.breakdown]
            assert dot_products == [n * width for n in loads], f"{where}: dot products {dot_products}, {width} a token"
            macs = [p.macs for p in record.breakdown]
            assert macs == [n * width * length for n in loads], f"{where}: MACs {macs}, {width} x {length} a token"
            whole = len(ids) * c.top_k * width * length
            assert record.macs == whole, f"{where}: {record.macs:,} MACs, T k w n = {whole:,}"
        checked += 1
    assert checked > 0, "no layer captured a router's choice"
    return checked


def move_correction_biases(hf, seed: int) -> None:
    """The routers' correction biases (buffers, which save_random leaves at zero) moved by N(0, 0.3), so that choosing
    by s + b differs from choosing by s: DeepSeek-V3's and V3.2's and GLM's (layer.mlp.gate), Nemotron-H's
    (layer.mixer.gate), MiniMax-M2's (layer.mlp, beside its gate), LFM2-MoE's (layer.feed_forward.expert_bias)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in hf.model.layers:
            mixture = (
                getattr(layer, "mlp", None) or getattr(layer, "mixer", None) or getattr(layer, "feed_forward", None)
            )
            gate = getattr(mixture, "gate", None)
            biases = (getattr(gate, "e_score_correction_bias", None), getattr(mixture, "e_score_correction_bias", None),
                      getattr(mixture, "expert_bias", None))  # fmt: skip
            bias = next((bias for bias in biases if bias is not None), None)
            if bias is not None:
                bias.copy_(torch.randn(bias.shape, generator=generator) * 0.3)


def hash_tables_and_biases(hf, seed: int) -> None:
    """move_correction_biases, and each hash-routed layer's table (tid2eid, a buffer transformers' init leaves at
    zero: every token to expert 0, k times) made k different experts a token, at random: DeepSeek-V4's."""
    move_correction_biases(hf, seed)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for layer in hf.model.layers:
            table = getattr(layer.mlp.gate, "tid2eid", None)
            if table is not None:
                experts = layer.mlp.experts.num_experts
                rows = [torch.randperm(experts, generator=generator)[: table.shape[1]] for _ in range(table.shape[0])]
                table.copy_(torch.stack(rows))


def moderate_decays(hf, seed: int) -> None:
    """Each DeltaNet layer's A_log (a KDA layer's, in its forget gate) moved to log(uniform(0.02, 0.3)): decays whose
    sum over a chunk float32 holds to about 1e-6. (transformers' own A in (0.01, 16) makes log-decays of -40 a position, whose cumulative sums over a
    64-position chunk reach -1,000, where a float32 carries 1e-4 absolute: its fallback and ours then differ by 1e-4
    relative in the decays themselves, each as far from the float64 truth as the other.)"""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in hf.model.layers:
            gate = getattr(layer, "linear_attn", None) or getattr(layer.self_attn, "forget_gate", None)  # KDA's
            if gate is not None:
                a = gate.A_log
                a.copy_((torch.rand(a.shape, generator=generator) * 0.28 + 0.02).log())


def traced_shapes(model: Model, ids: list[int], new_tokens: int = 2) -> dict[str, list[int]]:
    """trace's stage-by-stage listing of every block (the step-through's passes): asserts that it generates what
    generate does, and returns the shapes it printed for the prefill's stages, name -> shape."""
    import io
    import re

    from minitransformer.views.trace import trace

    out = io.StringIO()
    result = trace(model, ids, new_tokens=new_tokens, layers=list(range(model.config.n_layer)), out=out)
    assert result.stopped_at is None, f"the trace stopped at {result.stopped_at}"
    generated = model.generate(ids, max_new_tokens=new_tokens, stop_at_eos=False, ledger=False, candidates=0)
    assert result.new_tokens == generated.new_tokens, f"trace {result.new_tokens}, generate {generated.new_tokens}"
    operands_as_computed(out.getvalue(), result.phases)
    prefill = out.getvalue().split("=== decode step 1", 1)[0]
    shapes, name = {}, None
    for line in prefill.splitlines():
        if line and not line.startswith((" ", "=")) and re.match(r"^[\w.]+\s", line + " "):
            name = line.split()[0]
        elif line.startswith("    out  ") and name is not None:
            shapes[name] = [int(n) for n in re.findall(r"\d+", line.split(" = ", 1)[1].split("]", 1)[0])]
            name = None
    return shapes


def folded_blocks(model: Model, ids: list[int], shown: list[int]) -> list[list[str]]:
    """The blocks each pass of a two-token trace folds into one line, the others than `shown`, in order."""
    import io
    import re

    from minitransformer.views.trace import trace

    out = io.StringIO()
    trace(model, ids, new_tokens=2, layers=shown, out=out)
    passes = re.split(r"^=== (?:prefill|decode step \d+): T = ", out.getvalue(), flags=re.M)[1:]
    return [re.findall(r"^(blocks\.\d+) +folded: ", text, flags=re.M) for text in passes]


def operands_as_computed(text: str, phases) -> None:
    """Every product trace shows, in every pass: the sizes its `in` line gives its two operands are those the pass's
    record of it holds (a_shape, b_shape), as computed. A layer's own sizes (its window past the others', a dense MLP's
    width among experts, its own heads) were shown in the pass's (layer-wide) sizes."""
    import re

    passes = re.split(r"^=== (?:prefill|decode step \d+): T = ", text, flags=re.M)[1:]
    assert len(passes) == len(phases), f"{len(passes)} passes shown, {len(phases)} in the ledger"
    checked = 0
    for shown, phase in zip(passes, phases):
        heading = re.match(
            r"\d+ new positions? attending to t = (\d+)((?:, \d+ in the layers of a (?:window|chunk) of \d+)*);", shown
        )
        assert heading is not None, shown[:200]
        keys = {int(heading.group(1)), *map(int, re.findall(r", (\d+) in the layers", heading.group(2)))}
        for record in phase.records:  # every layer's scores over keys the heading names
            if record.op == "scores" and record.b_shape is not None:
                assert record.b_shape[-1] in keys, f"pass {phase.step} layer {record.layer}: {record.b_shape} {keys}"
        records = {f"blocks.{r.layer}.{r.stage.names[0]}" if r.layer is not None else r.stage.names[0]: r
                   for r in phase.records if r.kind == "matmul" and r.a_shape is not None}  # fmt: skip
        for name, reads in re.findall(r"^([\w.]+)  .*\n    in   (.*)$", shown, flags=re.M):
            record = records.get(name)
            if record is None:
                continue
            sizes = [[int(n) for n in group.split(", ")] for group in re.findall(r"\] = \[([\d, ]+)\]", reads)]
            if record.breakdown is not None or [len(s) for s in sizes[:2]] != [
                len(record.a_shape),
                len(record.b_shape),
            ]:
                continue  # an expert's rows, a convolution's windows, a scan's chunks: operands as the equation reads
            assert sizes[:2] == [list(record.a_shape), list(record.b_shape)], (
                f"pass {phase.step} {name}: shown {reads!r}, computed {record.a_shape} x {record.b_shape}"
            )
            checked += 1
    assert checked, "no product's operands were shown"


def float64_batch_against_truth(directory: Path, ids) -> float:
    """float64_against_truth for a batch of equal-length rows [B, T]: our float64 logits against validate's float64
    truth, max |dlogit| / max(1, max |logit|)."""
    from minitransformer.verbs.validate import load_reference

    ours = load_model(directory, dtype="float64")
    _, reference = load_reference(ours, "float64")
    with torch.no_grad():
        theirs = reference(torch.as_tensor(np.asarray(ids))).logits.numpy()
    mine = ours.logits(ids)
    assert mine.dtype == theirs.dtype == np.float64 and mine.shape == theirs.shape, (
        f"ours {mine.dtype} {mine.shape}, theirs {theirs.dtype} {theirs.shape}: both float64, of one shape"
    )
    return float(np.abs(mine - theirs).max()) / max(1.0, float(np.abs(theirs).max()))
