"""Configs as transformers writes them and as published: each family's published config.json (published_configs.py:
older transformers' spellings, a multimodal model's text_config) and the config.json transformers 5.24 writes for the
same model (its config class made of the published keys, as its AutoModelForCausalLM reads them, then
save_pretrained) read to the same ModelConfig, and to the family's preset. A family joins the table with a published
config here.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from published_configs import PUBLISHED, Published  # noqa: E402

from minitransformer.families.table import ARCHITECTURES, PRESETS, config_from_hf_dict  # noqa: E402

CASES = [pytest.param(p, id=f"{family}-{i}-{p.preset}") for family, entries in PUBLISHED.items()
         for i, p in enumerate(entries)]  # fmt: skip


def test_every_family_of_the_table_has_a_published_config():
    missing = sorted(set(ARCHITECTURES) - set(PUBLISHED))
    assert not missing, f"add a published config.json of {missing} to tests/families/published_configs.py"


def written_by_transformers(published: Published, directory) -> dict:
    """The config.json transformers 5.24 writes for a published one: its config class of the published keys (a
    multimodal one's text model: what AutoModelForCausalLM reads), saved with save_pretrained."""
    keys = {k: v for k, v in published.config.items() if k not in ("model_type", "architectures")}
    config = type(transformers.AutoConfig.for_model(published.config["model_type"]))(**keys).get_text_config()
    config.save_pretrained(directory)
    return json.loads((directory / "config.json").read_text())


def fields_differing(a, b) -> dict:
    x, y = dataclasses.asdict(a), dataclasses.asdict(b)
    return {key: (x[key], y[key]) for key in x if x[key] != y[key]}


@pytest.mark.parametrize("published", CASES)
def test_a_published_config_and_transformers_own_spelling_read_alike(published, tmp_path):
    """Both spellings of each key that published configs spell otherwise (the pairs each entry names: the published
    key in the published file, transformers' in the file it writes and not in the published one) read to one config:
    field for field, but for the fields the entry says differ (with their reason), and the preset's."""
    saved = written_by_transformers(published, tmp_path)
    for old, new in published.spellings:
        assert old in published.config or old in published.text, f"{old} not in the published config"
        assert new in saved and new not in published.config, (
            f"{new}: in transformers' file {new in saved} (expected True), in the published one "
            f"{new in published.config} (expected False)"
        )
    name = published.preset or "published"
    as_published, as_written = config_from_hf_dict(published.config, name), config_from_hf_dict(saved, name)
    differs = fields_differing(as_published, as_written)
    assert differs == published.differs, f"fields (published, transformers'): {differs}, expected {published.differs}"
    assert as_published.d_head == as_written.d_head, (as_published.d_head, as_written.d_head)
    if published.preset is not None:
        preset = dataclasses.replace(PRESETS[published.preset], **{f: p for f, (p, _) in published.differs.items()})
        assert as_published == preset, f"fields (published, preset): {fields_differing(as_published, preset)}"
