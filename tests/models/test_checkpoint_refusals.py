"""Checkpoints a user can meet that are not what they claim, each refused in one line before any output (exit 2): a
shard index whose shards are not names in the directory, JSON nested past Python's limit, token ids that are not
integers, one weight stored under two names, a tied head stored apart with other numbers, a tokenizer that loads but
cannot encode. Each was a traceback, a half-written continuation, or a silently wrong model."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import write_llama
from minitransformer import UserError, load_model
from minitransformer.cli import main

GENERATE = ["generate", "--ids", "1,2,3", "--max-new-tokens", "2"]


def refused(capsys, argv: list[str]) -> str:
    """The one line a refused command printed on stderr, nothing on stdout."""
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("minitransformer: error: "), (out, err)
    return err


def sharded(directory, weight_map) -> None:
    """The checkpoint's one file named by an index whose weight_map is `weight_map` (a function of the tensor names)."""
    names = list(load_file(str(directory / "model.safetensors")))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map(names)}))


@pytest.mark.parametrize(
    "shard, said",
    [
        (1, "is not a valid safetensors index"),  # a number, not a file's name: was a TypeError
        ("../other/model.safetensors", "names a shard outside"),
        ("/etc/model.safetensors", "names a shard outside"),
    ],
)
def test_an_index_whose_shards_are_not_files_of_the_directory_is_refused(capsys, tmp_path, shard, said):
    directory = write_llama(tmp_path / "m", vocab_size=64)
    sharded(directory, lambda names: dict.fromkeys(names, shard))
    assert said in refused(capsys, [*GENERATE, "--model", str(directory)])


@pytest.mark.parametrize("where", ["config.json", "model.safetensors.index.json"])
def test_json_nested_past_the_recursion_limit_is_refused_not_a_recursion_error(capsys, tmp_path, where):
    directory = write_llama(tmp_path / "m", vocab_size=64)
    (directory / where).write_text("[" * 100_000)
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert where in said and ("nests too deeply" in said or "not a valid safetensors index" in said), said


@pytest.mark.parametrize("eos", ["2", 2.0, True, {"a": 1}, [[1]], [1, "x"]])
def test_an_end_of_text_id_that_is_not_an_integer_is_refused_at_the_config(capsys, tmp_path, eos):
    """It failed inside generate (a comparison of str and int, an unhashable dict), or after the continuation was
    printed, blaming the ids ("token ids must be integers, not an array of float64")."""
    directory = write_llama(tmp_path / "m", vocab_size=64, eos_token_id=eos)
    for argv in ([*GENERATE, "--model", str(directory)], ["count", "--config", str(directory / "config.json")]):
        assert f"config eos_token_id must be a token id or a list of them, not {eos!r}" in refused(capsys, argv)
    for fine in (None, 5, [5, 7], []):
        write_llama(tmp_path / f"fine{fine}", vocab_size=64, eos_token_id=fine)
        assert load_model(tmp_path / f"fine{fine}").config.eos_token_ids == tuple(np.atleast_1d(fine or []).tolist())


def test_one_weight_stored_under_two_names_is_refused_not_read_as_either(capsys, tmp_path):
    """ "model.layers.0.input_layernorm.weight" and "layers.0.input_layernorm.weight" are one weight of ours: the last
    read won, where transformers took the other."""
    directory = write_llama(tmp_path / "m", vocab_size=64)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["layers.0.input_layernorm.weight"] = tensors["model.layers.0.input_layernorm.weight"] * 7
    save_file(tensors, str(directory / "model.safetensors"))
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert "layers.0.input_layernorm.weight is stored twice" in said and "model.layers.0.input_layernorm" in said, said


def test_a_tied_head_stored_apart_is_dropped_when_equal_and_refused_when_not(capsys, tmp_path):
    """tie_word_embeddings with a stored lm_head.weight: the same numbers are the tied head saved twice; others were
    dropped without a word (transformers keeps them, untied: logits 0.89 of their scale apart)."""
    directory = write_llama(tmp_path / "m", vocab_size=64)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].copy()
    save_file(tensors, str(directory / "model.safetensors"))
    tied = load_model(directory)
    np.testing.assert_array_equal(
        tied.logits([1, 2, 3]), load_model(write_llama(tmp_path / "plain", vocab_size=64)).logits([1, 2, 3])
    )
    tensors["lm_head.weight"] = tensors["lm_head.weight"] + 0.5
    save_file(tensors, str(directory / "model.safetensors"))
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert "stores a different lm_head.weight; set tie_word_embeddings to false" in said, said
    for kind in (np.float64, np.int8):  # a head in numbers we do not read: refused as any such tensor (was dropped)
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].astype(kind)
        save_file(tensors, str(directory / "model.safetensors"))
        said = refused(capsys, [*GENERATE, "--model", str(directory)])
        assert f"tensor lm_head.weight is {np.dtype(kind).name.replace('float', 'F').replace('int', 'I')};" in said


def test_a_tokenizer_that_loads_but_cannot_encode_is_refused_in_a_line(capsys, tmp_path):
    """A WordLevel vocabulary without its [UNK] token: the library's own exception escaped from encode."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    directory = write_llama(tmp_path / "m", vocab_size=64)
    tokenizer = Tokenizer(models.WordLevel({"hello": 0, "world": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(directory / "tokenizer.json"))
    assert load_model(directory).tokenizer.encode("hello world") == [0, 1]
    said = refused(capsys, ["generate", "--model", str(directory), "hello there", "--max-new-tokens", "2"])
    assert "tokenizer.json cannot encode the prompt" in said and "[UNK]" in said, said
    with pytest.raises(UserError, match="cannot encode"):
        load_model(directory).tokenizer.encode("goodbye")


def test_a_config_without_model_type_reads_as_gpt2_only_where_its_architectures_are_gpt2_s(capsys, tmp_path):
    """A Llama's config.json missing model_type (architectures: LlamaForCausalLM) was counted as a GPT-2 without a
    word, and generate blamed its tensors; an old GPT-2 file (no model_type) still reads as GPT-2."""
    directory = write_llama(tmp_path / "m", vocab_size=64, architectures=["LlamaForCausalLM"])
    config = json.loads((directory / "config.json").read_text())
    del config["model_type"]
    (directory / "config.json").write_text(json.dumps(config))
    for argv in ([*GENERATE, "--model", str(directory)], ["count", "--config", str(directory / "config.json")]):
        said = refused(capsys, argv)
        assert "no model_type, and its architectures (LlamaForCausalLM) are not GPT-2's" in said, said
    for named in (["GPT2LMHeadModel"], ["TFGPT2LMHeadModel"]):
        old = {"n_layer": 2, "n_head": 2, "n_embd": 8, "vocab_size": 64, "architectures": named}
        (tmp_path / "gpt2.json").write_text(json.dumps(old))
        assert main(["count", "--config", str(tmp_path / "gpt2.json"), "--tokens", "3"]) == 0, named
        assert "2 layers, d_model 8, 2 heads of 4, d_ff 32" in capsys.readouterr().out  # GPT-2's 4 x d_model MLP


def test_a_config_missing_the_heads_a_follower_reads_is_refused_by_name(capsys, tmp_path):
    """num_key_value_heads follows num_attention_heads: with both left out, a KeyError ('n_head') from inside."""
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 128,
              "vocab_size": 100}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    said = refused(capsys, ["count", "--config", str(tmp_path / "config.json")])
    assert "config.json lacks num_attention_heads: a llama model needs its shapes spelled out" in said, said


def test_more_experts_than_a_layer_can_have_here_are_refused_before_any_walk(capsys, tmp_path):
    """10**7 experts ran params for minutes and gigabytes (each expert's tensors walked); refused as read."""
    from minitransformer.families.config import MAX_EXPERTS

    for experts, fine in ((10**7, False), (MAX_EXPERTS + 1, False), (MAX_EXPERTS, True)):
        config = {"model_type": "mixtral", "hidden_size": 8, "num_hidden_layers": 1, "intermediate_size": 4,
                  "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64, "num_local_experts": experts,
                  "num_experts_per_tok": 2}  # fmt: skip
        (tmp_path / "config.json").write_text(json.dumps(config))
        if fine:
            assert main(["params", "--config", str(tmp_path / "config.json")]) == 0
            capsys.readouterr()
        else:
            said = refused(capsys, ["params", "--config", str(tmp_path / "config.json")])
            assert f"num_local_experts={experts:,} is more experts than a layer can have here" in said, said


def test_a_tensor_the_index_places_in_a_shard_that_lacks_it_is_said_so(capsys, tmp_path):
    """The index names two shards; one tensor moved to the other file: "missing from the weights" named no index."""
    directory = write_llama(tmp_path / "m", vocab_size=64)
    tensors = load_file(str(directory / "model.safetensors"))
    moved = "model.layers.1.mlp.up_proj.weight"
    save_file({moved: tensors.pop(moved)}, str(directory / "model-00002.safetensors"))
    save_file(tensors, str(directory / "model-00001.safetensors"))
    (directory / "model.safetensors").unlink()
    names = [*tensors, moved]
    sharded = {n: "model-00001.safetensors" for n in names}  # the moved one listed in the wrong file
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": sharded}))
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert "layers.1.mlp.up_proj.weight is missing from the weights" in said, said
    assert "model.safetensors.index.json lists it in model-00001.safetensors, which does not hold it" in said, said


def test_a_weights_or_tokenizer_file_this_user_may_not_read_is_said_so(capsys, tmp_path, monkeypatch):
    """safetensors said "No such file or directory ... re-download it" of a file it may not open; tokenizers asked for
    an upgrade. Denied here by open() itself (chmod 000 does not stop root)."""
    import builtins

    directory = write_llama(tmp_path / "m", vocab_size=64)
    real = builtins.open
    for name in ("model.safetensors", "tokenizer.json"):
        if name == "tokenizer.json":
            (directory / name).write_text("{}")
        denied = str(directory / name)

        def open_(file, *args, denied=denied, **kwargs):
            if str(file) == denied:
                raise PermissionError(13, "Permission denied", str(file))
            return real(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", open_)
        said = refused(capsys, [*GENERATE, "--model", str(directory)])
        monkeypatch.setattr(builtins, "open", real)
        assert f"cannot read {denied}: Permission denied" in said, said


@pytest.mark.parametrize("where", ["read_text", "is_file", "iterdir"])
def test_a_model_file_this_user_may_not_read_is_refused_in_a_line(capsys, tmp_path, monkeypatch, where):
    """A config.json, an index or a directory without read permission (chmod 000: root reads past it, so the denial
    is made here) was a PermissionError traceback from wherever the loader met it first."""
    from pathlib import Path

    directory = write_llama(tmp_path / "m", vocab_size=64)
    (directory / "model.safetensors").rename(directory / "model-00001-of-00001.safetensors")  # iterdir finds shards
    real = getattr(Path, where)

    def denied(self, *args, **kwargs):
        if self.parent == directory or self == directory:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, where, denied)
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert f"cannot read {directory}" in said and "ermission denied" in said, said


@pytest.mark.parametrize("where", ["config.json", "model.safetensors.index.json"])
def test_a_number_past_python_s_digits_is_refused_in_a_line(capsys, tmp_path, where):
    """JSON holds integers of any length; Python reads no more than 4,300 digits (a ValueError, not a JSONDecodeError:
    a traceback)."""
    directory = write_llama(tmp_path / "m", vocab_size=64)
    huge = "9" * 5000
    if where == "config.json":
        text = (directory / where).read_text().replace('"vocab_size": 64', f'"vocab_size": {huge}')
        assert huge in text
        (directory / where).write_text(text)
    else:
        (directory / where).write_text(f'{{"metadata": {{"total_size": {huge}}}, "weight_map": {{}}}}')
    said = refused(capsys, [*GENERATE, "--model", str(directory)])
    assert f"{where} is not valid" in said or f"{where} is not a valid" in said, said
