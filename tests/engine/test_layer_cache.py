"""The model's cache, layer by layer (engine/kvcache.py): attention layers keep keys and values that grow with the
context, recurrent layers a fixed-size state that their forward pass overwrites in place, some layers nothing; what
each keeps is the config's to declare (config.layer_cache), and memory accounting reads the same declaration."""

from __future__ import annotations

import numpy as np
import pytest

from minitransformer.engine.kvcache import NOTHING, KeysValues, KVCache, LayerCache, LayerState, State
from minitransformer.engine.shapes import ShapeOnly
from minitransformer.errors import UserError

LAYERS = (
    State((("conv", (3, 10)), ("recurrent", (4, 8, 6)))),
    KeysValues(2, 8, rows=(("index_keys", (5,)),)),
    NOTHING,
    KeysValues(2, 8, 4, window=3),
)


def test_each_layer_keeps_what_its_declaration_says():
    cache = KVCache(capacity=7, batch=(2,), layers=LAYERS, dtype=np.float64)
    state, attention, nothing, sliding = (cache.layer(i) for i in range(4))
    assert isinstance(state, LayerState) and isinstance(nothing, LayerState) and nothing.arrays == {}
    assert state["conv"].shape == (2, 3, 10) and state["recurrent"].shape == (2, 4, 8, 6)
    assert not state["recurrent"].any() and state["recurrent"].dtype == np.float64  # a fresh sequence: zeros
    assert cache.overwrites and not KVCache(capacity=7, layers=LAYERS[1:3]).overwrites  # NOTHING keeps nothing
    with pytest.raises(KeyError, match="layer 0's state has no 'ssm': it holds 'conv', 'recurrent'"):
        state["ssm"]  # a bare KeyError('ssm') named neither the layer nor what it holds
    assert isinstance(attention, LayerCache) and attention.keys.shape == (2, 2, 7, 8)
    assert sliding.values.shape == (2, 2, 7, 4) and attention.rows["index_keys"].shape == (2, 7, 5)
    assert len(cache.keys) == len(cache.values) == 2  # the attention layers' only
    numbers = 2 * (3 * 10 + 4 * 8 * 6) + 2 * 7 * (2 * 16 + 5) + 2 * 7 * 2 * 12
    assert cache.nbytes == 8 * numbers


def test_a_state_is_overwritten_in_place_and_does_not_grow_with_the_capacity():
    small, large = (KVCache(capacity=n, layers=LAYERS[:1]) for n in (4, 4000))
    assert small.nbytes == large.nbytes == 4 * (30 + 192)
    state = small.layer(0)
    held = state["recurrent"]
    held[...] = 1.0
    assert small.layer(0)["recurrent"] is held and held.sum() == 192


def test_keys_values_and_rows_are_appended_and_read_back_from_the_window():
    cache = KVCache(capacity=6, layers=LAYERS[1:])
    attention, sliding = cache.layer(0), cache.layer(2)
    k = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
    K, V = attention.append(k, k + 1)
    rows = attention.extend("index_keys", np.ones((4, 5), np.float32))
    assert K.shape == (2, 4, 8) and rows.shape == (4, 5) and (V == k + 1).all()
    sliding.append(k, k[..., :4])
    cache.advance(4)
    K, _ = sliding.append(k[:, :1], k[:, :1, :4])  # position 4 sees positions 2..4 through a window of 3
    assert K.shape == (2, 3, 8) and (K[:, -1] == k[:, 0]).all() and (K[:, 0] == k[:, 2]).all()
    assert attention.extend("index_keys", np.zeros((1, 5), np.float32)).shape == (5, 5)
    with pytest.raises(UserError, match="holds 6 positions and 7 are needed"):
        attention.append(np.zeros((2, 3, 8), np.float32), np.zeros((2, 3, 8), np.float32))


def test_shape_only_stand_ins_where_there_are_no_weights():
    cache = KVCache(capacity=9, batch=(3,), shape_only=True, layers=LAYERS)
    assert isinstance(cache.layer(0)["recurrent"], ShapeOnly) and cache.layer(0)["recurrent"].shape == (3, 4, 8, 6)
    assert cache.layer(1).keys.shape == (3, 2, 9, 8)


def test_the_older_signature_still_makes_attention_layers():
    cache = KVCache(3, 4, 16, 10, (2,), window=(None, 5, None), d_value=8)
    assert [s.window for s in cache.specs] == [None, 5, None] and cache.window == (None, 5, None)
    assert cache.nbytes == 3 * 2 * 4 * 10 * (16 + 8) * 4


def test_a_pass_past_the_cache_s_context_says_how_many_fit_or_to_start_a_new_cache(small_gpt2):
    """A full cache's next pass was refused with "give at most 0 tokens after the cached ones" (nothing to do), then
    with the overflow alone; it says to start a new cache. One with room says how many tokens fit."""
    n = small_gpt2.config.n_positions
    for cached, fed, says in ((n, 1, f"the cache holds {n} positions already: start a new one (model.new_cache())"),
                              (n - 4, 6, "give at most 4 tokens after the cached ones")):  # fmt: skip
        cache = small_gpt2.new_cache()
        small_gpt2.run(list(range(cached)), cache=cache)
        with pytest.raises(UserError) as refused:
            small_gpt2.run([1] * fed, cache=cache)
        assert f"{cached + fed} positions exceed this model's context of {n}; {says}" == str(refused.value), str(
            refused.value
        )
