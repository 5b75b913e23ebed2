"""The parts families are built from, each owning everything about itself: its checkpoint tensors with their shapes
and kinds (`tensors`), its forward pass with every stage declared at the line that computes it (engine/stages.py's
`product` and `step`, handed to the tape), and its closed forms (`products`: the dot products of each of its matrix
products, written from its equations alone, which the tests hold to the ledger).

- part.py: what a part is (`Part`, `Tensor`, `linear`);
- norms.py: RMSNorm, (1 + w) RMSNorm, LayerNorm;
- attention.py: grouped-query attention and its variants (biases, q and k norms per head or over the whole
  projection, a sliding window), the attention core every attention shares;
- mlps.py: the gated MLP, the ungated MLP of two products;
- latent.py: multi-head latent attention (DeepSeek-V3's MLA); indexer.py: DeepSeek Sparse Attention, the lightning
  indexer and MLA over each query's chosen keys (DeepSeek-V3.2's, GLM-5's with its shared top-k);
- moe.py: mixtures of experts: the routers (softmax, gpt-oss's top-k softmax, DeepSeek-V3's group-limited sigmoid),
  the routed experts (SwiGLU, gpt-oss's fused and clamped), the shared expert, the mixture, a dense MLP or experts by
  the kind of layer;
- block.py: the blocks that wire parts into a layer (pre-norm, post-norm, a layer of one branch, a block per kind);
- decoder.py: the decoder around the blocks (embedding, each layer's inputs, final norm, logits), from which a family's
  stage table, checkpoint layout and closed forms are derived;
- the hybrids' recurrent layers and what they bring: mamba2.py, the Mamba-2 mixer, and ssd.py, its scan; mamba1.py,
  the Mamba-1 mixer and its selective scan (a state per channel, recurrent at every position); deltanet.py,
  the Gated DeltaNet, and delta_rule.py, its gated delta rule (each scan in chunks over a prompt, recurrent in a
  decode step); gated_attention.py, attention with an output gate; hybrid.py, the closed forms of a decoder whose
  layers are not all attention.
"""
