"""Hugging Face's canonical models have ids without an organisation (``gpt2``,
``bert-base-uncased``); one in the local cache opens like ``org/name``. Before, such a name was
"unknown model", and the message never said hub ids are accepted."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
pytest.importorskip("tokenizers", reason="needs the hf extra (tokenizers)")

from actviz.io.errors import ModelLoadError  # noqa: E402
from actviz.io.models.loading import open_model  # noqa: E402
from tests.io.hf_tiny import save_tiny_gpt2  # noqa: E402


def test_a_cached_bare_hub_id_opens(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    repo = cache / "models--tinygpt2"
    shutil.copytree(folder, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.chdir(tmp_path)
    loaded = open_model("tinygpt2")
    assert loaded.name == "tinygpt2 (GPT2LMHeadModel)" and loaded.tokenizer is not None


def test_an_unknown_name_mentions_hub_ids(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelLoadError) as info:
        open_model("bert-base-uncased")
    assert "Hugging Face hub id already in the local cache" in str(info.value)
