"""The CLI on timm names and Hugging Face folders, with ``--input "text:..."``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers", reason="needs the hf extra (transformers)")
pytest.importorskip("tokenizers", reason="needs the hf extra (tokenizers)")

from tests.io.hf_tiny import save_tiny_gpt2, tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("cli-hf") / "tiny-gpt2")


def test_info_runs_text_through_a_model_folder(cli, gpt2_dir):
    code, out, err = cli("info", "--model", str(gpt2_dir), "--input", "text:the cat sat on")
    assert code == 0, err
    assert "opened tiny-gpt2 (GPT2LMHeadModel) (hf)" in err
    assert "running text 'the cat sat on': 4 tokens" in err
    vocab = len(tiny_tokenizer(bert=False))
    lm_head = next(line for line in out.splitlines() if line.strip().startswith("lm_head"))
    assert lm_head.split()[-1] == f"1x4x{vocab}"


def test_export_takes_a_token_as_target(cli, gpt2_dir, tmp_path):
    out_dir = tmp_path / "out"
    code, out, err = cli(
        "export", "--model", str(gpt2_dir), "--input", "text:the dog sat on",
        "--layers", "transformer.h.1", "--target", "mat", "--out", str(out_dir),
    )  # fmt: skip
    assert code == 0, err
    summary = json.loads((out_dir / "summary.json").read_text())
    mat = tiny_tokenizer(bert=False).get_vocab()["mat"]
    assert summary["target"]["index"] == mat
    assert summary["target"]["description"] == f"logit of token {mat} at the last position"
    assert summary["input_shapes"] == {"input_ids": [1, 4], "attention_mask": [1, 4]}
    code, _, err = cli(
        "export", "--model", str(gpt2_dir), "--input", "text:the dog",
        "--target", "the dog", "--out", str(out_dir),
    )  # fmt: skip
    assert code == 2 and "--target: 'the dog' is 2 tokens" in err


def test_text_input_on_a_model_without_tokenizer_is_one_clear_error(cli, tmp_path):
    pytest.importorskip("timm", reason="needs the timm extra")
    code, out, err = cli(
        "export", "--model", "timm:test_vit", "--weights", "none", "--input", "text:hello",
        "--out", str(tmp_path / "x"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (
        "actviz: error: text:hello: text input needs the model's tokenizer, and "
        "timm/test_vit (random init) has none (open a Hugging Face model folder that holds "
        "its tokenizer files, and pass model=the opened model)"
    )
