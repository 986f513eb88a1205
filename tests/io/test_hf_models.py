"""Hugging Face sources: save_pretrained folders with a tokenizer trained here, text input,
next-token targets, the remote-code gate and hub ids from the local cache only.

Models are tiny and random (2 layers, width 16), built once per module; nothing is downloaded.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
tokenizers = pytest.importorskip("tokenizers", reason="needs the hf extra (tokenizers)")

import actviz  # noqa: E402
from actviz.core.targets import parse_target, resolve_target  # noqa: E402
from actviz.io.errors import (  # noqa: E402
    InputError,
    ModelLoadError,
    TrustNeededError,
    UntrustedFileError,
)
from actviz.io.input_files import open_input  # noqa: E402
from actviz.io.models.loading import open_model  # noqa: E402
from tests.io.hf_tiny import (  # noqa: E402
    LABELS,
    remote_code_sandbox,
    save_remote_code_model,
    save_tiny_bert,
    save_tiny_gpt2,
    save_tiny_vit,
)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    return save_tiny_gpt2(tmp_path_factory.mktemp("hf") / "tiny-gpt2")


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory) -> Path:
    return save_tiny_bert(tmp_path_factory.mktemp("hf") / "tiny-bert")


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return open_model(gpt2_dir)


def test_gpt2_folder_opens_with_its_tokenizer_and_eager_attention(gpt2, gpt2_dir):
    assert gpt2.kind == "hf" and gpt2.task == "causal-lm"
    assert gpt2.name == "tiny-gpt2 (GPT2LMHeadModel)"
    assert type(gpt2.model).__name__ == "GPT2LMHeadModel" and not gpt2.model.training
    assert gpt2.model.config._attn_implementation == "eager"
    assert gpt2.tokenizer is not None and gpt2.processor is None and gpt2.categories is None
    # The weights are the saved ones: the same logits as transformers' own loading.
    ref = transformers.GPT2LMHeadModel.from_pretrained(gpt2_dir, attn_implementation="sdpa")
    ids = torch.tensor([[4, 5, 6, 7]])
    with torch.no_grad():
        ours = gpt2.model(input_ids=ids).logits
        theirs = ref.eval()(input_ids=ids).logits
    # Eager and SDPA attention agree to float rounding (documented in hf_models).
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)


def test_opening_prints_no_progress_bar_of_its_own(gpt2_dir, capfd):
    from transformers.utils import logging as hf_logging

    assert hf_logging.is_progress_bar_enabled()
    capfd.readouterr()
    loaded = open_model(gpt2_dir)
    err = capfd.readouterr().err
    assert loaded.kind == "hf" and "Loading weights" not in err and "it/s" not in err
    assert hf_logging.is_progress_bar_enabled()  # put back for the user's own loads


def test_text_input_round_trip(gpt2):
    inp = open_input("text:the cat sat on", model=gpt2)
    assert inp.kind == "text" and inp.image is None
    expected = gpt2.tokenizer("the cat sat on")["input_ids"]
    assert inp.value["input_ids"].tolist() == [expected]
    assert inp.value["attention_mask"].tolist() == [[1, 1, 1, 1]]
    assert set(inp.value) == {"input_ids", "attention_mask"}
    assert inp.tokens == ["the", "cat", "sat", "on"]
    assert "4 tokens" in inp.description
    # load_input gives the value itself, as for every other source.
    value = actviz.load_input("text:the cat sat on", model=gpt2)
    assert torch.equal(value["input_ids"], inp.value["input_ids"])
    # Words the tokenizer never saw become its unknown token.
    assert open_input("text:the zebra", model=gpt2).tokens == ["the", "[UNK]"]
    # An image is refused with what to give instead.
    from PIL import Image

    with pytest.raises(InputError, match=r"^<image>: tiny-gpt2 \(GPT2LMHeadModel\) reads text"):
        open_input(Image.new("RGB", (8, 8)), model=gpt2)


def test_next_token_target_is_the_top_logit_at_the_last_position(gpt2):
    inp = open_input("text:the dog sat on the", model=gpt2)
    cap = actviz.capture(gpt2.model, inp.value, ["transformer.h.1"])
    with torch.no_grad():
        logits = gpt2.model(**inp.value).logits
    top = int(logits[0, -1].argmax())
    assert cap.target_index == top
    assert cap.target_value == pytest.approx(float(logits[0, -1, top]), abs=1e-6)
    assert cap.target_description == f"next-token logit at the last position (token {top})"
    assert cap.warnings == [] or all("tensors" not in w for w in cap.warnings)


def test_target_by_token_text_or_id(gpt2):
    tok = gpt2.tokenizer
    mat = tok.get_vocab()["mat"]
    assert parse_target("mat", None, tok) == mat
    assert parse_target("'mat'", None, tok) == mat
    assert parse_target(str(mat), None, tok) == mat
    with pytest.raises(ValueError, match=r"'the cat' is 2 tokens"):
        parse_target("the cat", None, tok)
    with pytest.raises(ValueError, match="no class names"):
        parse_target("mat", None, None)
    inp = open_input("text:the cat", model=gpt2)
    out = gpt2.model(**inp.value)
    chosen = resolve_target(out, mat)
    assert (
        chosen.index == mat and chosen.description == f"logit of token {mat} at the last position"
    )
    assert float(chosen.value.detach()) == pytest.approx(float(out.logits[0, -1, mat].detach()))
    with pytest.raises(ValueError, match="out of range"):
        resolve_target(out, len(tok) + 3)


def test_bert_classifier_folder_names_its_classes_and_targets_the_top_class(bert_dir):
    loaded = open_model(bert_dir)
    assert loaded.task == "classifier" and loaded.categories == list(LABELS.values())
    inp = open_input("text:a cat sat", model=loaded)
    assert inp.tokens == ["[CLS]", "a", "cat", "sat", "[SEP]"]
    cap = actviz.capture(loaded.model, inp.value, ["bert.encoder.layer.0"])
    with torch.no_grad():
        logits = loaded.model(**inp.value).logits
    assert cap.target_index == int(logits[0].argmax())
    assert cap.target_value == pytest.approx(float(logits[0].max()), abs=1e-6)
    assert parse_target("positive", loaded.categories, loaded.tokenizer) == 2


def test_text_input_needs_a_tokenizer(tmp_path, gpt2_dir):
    folder = tmp_path / "no-tokenizer"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(gpt2_dir / name, folder / name)
    loaded = open_model(folder)
    assert loaded.tokenizer is None
    with pytest.raises(InputError, match="text input needs the model's tokenizer"):
        open_input("text:the cat", model=loaded)
    with pytest.raises(InputError, match="no model was given"):
        open_input("text:the cat")


def test_folder_without_weights_or_config_is_refused(tmp_path, gpt2_dir):
    (tmp_path / "only-config").mkdir()
    shutil.copy(gpt2_dir / "config.json", tmp_path / "only-config" / "config.json")
    with pytest.raises(ModelLoadError, match="no weights"):
        open_model(tmp_path / "only-config")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="without config.json"):
        open_model(tmp_path / "empty")


def test_remote_code_is_refused_without_trust_and_runs_with_it(tmp_path, gpt2_dir, gpt2):
    folder = save_remote_code_model(tmp_path / "remote", gpt2_dir)
    with pytest.raises(TrustNeededError) as info:
        open_model(folder)
    assert isinstance(info.value, UntrustedFileError)  # the window's trust question applies
    assert info.value.path == str(folder)
    assert str(info.value) == (
        f"{folder}: this model runs Python code shipped with it (its config.json maps "
        "AutoModelForCausalLM to modeling_evil.EvilForCausalLM); only open it if you trust "
        "where it came from: pass trust=True in Python, --trust on the command line, or "
        "confirm the dialog in the GUI"
    )
    with remote_code_sandbox(tmp_path):
        loaded = open_model(folder, trust=True)
    assert type(loaded.model).__name__ == "EvilForCausalLM" and loaded.task == "causal-lm"
    ids = torch.tensor([[4, 5, 6]])
    with torch.no_grad():
        assert torch.equal(loaded.model(input_ids=ids).logits, gpt2.model(input_ids=ids).logits)


def test_hub_id_opens_only_from_the_local_cache(tmp_path, monkeypatch, gpt2_dir):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache") as info:
        open_model("someone/tiny-gpt2")
    assert "hf download someone/tiny-gpt2" in str(info.value)
    # The cache's own layout: refs/main names the snapshot that holds the files.
    repo = cache / "models--someone--tiny-gpt2"
    shutil.copytree(gpt2_dir, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    loaded = open_model("someone/tiny-gpt2")
    assert loaded.name == "someone/tiny-gpt2 (GPT2LMHeadModel)" and loaded.tokenizer is not None


def test_image_model_folder_preprocesses_with_its_image_processor(tmp_path):
    import numpy as np
    from PIL import Image

    folder = save_tiny_vit(tmp_path / "tiny-vit")
    loaded = open_model(folder)
    assert loaded.task == "classifier" and loaded.categories == ["cat", "dog"]
    assert loaded.processor is not None and loaded.tokenizer is None
    assert loaded.input_size == (32, 32)
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (48, 40, 3), dtype=np.uint8), "RGB")
    inp = open_input(img, model=loaded)
    expected = loaded.processor(images=img, return_tensors="pt")["pixel_values"]
    assert torch.equal(inp.value, expected) and inp.image.shape == (32, 32, 3)
    assert (
        inp.description == "<image>: RGB 40x48 -> 1x3x32x32 (resize 32x32, mean/std normalisation)"
    )
    # The overlay undoes the processor's normalisation: back to the resized picture.
    resized = np.asarray(img.resize((32, 32), Image.Resampling.BILINEAR), dtype=np.int16)
    assert np.abs(inp.image.astype(np.int16) - resized).max() <= 1
    cap = actviz.capture(loaded.model, inp.value, ["vit.layers.0"])
    with torch.no_grad():
        logits = loaded.model(inp.value).logits
    assert cap.target_index == int(logits[0].argmax())


def test_without_transformers_a_folder_says_what_to_install(monkeypatch, gpt2_dir, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers fails
    with pytest.raises(ModelLoadError, match=r"needs pip install 'actviz\[hf\]'"):
        open_model(gpt2_dir)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match=r"^someone/tiny: file not found$"):
        open_model("someone/tiny")


def test_a_folder_with_pytorch_model_bin_opens_the_same(tmp_path, gpt2_dir, gpt2):
    from safetensors.torch import load_file

    folder = tmp_path / "bin"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(gpt2_dir / name, folder / name)
    torch.save(load_file(gpt2_dir / "model.safetensors"), folder / "pytorch_model.bin")
    loaded = open_model(folder)
    ids = torch.tensor([[4, 5, 6]])
    with torch.no_grad():
        assert torch.equal(loaded.model(input_ids=ids).logits, gpt2.model(input_ids=ids).logits)
