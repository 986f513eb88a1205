"""`actviz export` of a Hugging Face folder with text input writes the sequence views."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actviz.cli import main


def test_cli_export_of_text_writes_token_and_attention_files(tmp_path, capsys):
    pytest.importorskip("transformers", reason="needs the hf extra")
    pytest.importorskip("tokenizers", reason="needs the hf extra")
    from tests.io.hf_tiny import save_tiny_gpt2

    folder = save_tiny_gpt2(tmp_path / "tiny-gpt2")
    out = tmp_path / "out"
    code = main(
        [
            "export", "--model", str(folder), "--input", "text:the cat sat",
            "--layers", "transformer.h.0,transformer.h.1", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tokens"] == ["the", "cat", "sat"]
    saved = np.load(out / "transformer.h.1_tokens.npz")
    assert saved["heat"].shape == (3, 16)
    assert summary["attention"]["layers"] == ["transformer.h.0.attn", "transformer.h.1.attn"]
    probs = np.load(out / "attention.npz")["transformer.h.0.attn"]
    np.testing.assert_allclose(probs.sum(-1), 1, atol=1e-6)
    lens = json.loads((out / "logit_lens.json").read_text())
    assert lens["layers"] == ["transformer.h.0", "transformer.h.1"]
    assert lens["positions"][-1][-1]["top"][0]["text"]  # the tokenizer's string
