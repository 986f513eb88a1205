"""Export writes the token heat maps, attention maps, rollout and logit lens (PNG + arrays)."""

from __future__ import annotations

import json

import numpy as np
import torch
from PIL import Image

import actviz
from actviz.display.attention import capture_attention
from actviz.io.export.capture_export import export_capture
from tests.display.seq_models import tiny_gpt2, tiny_vit

IDS = torch.tensor([[3, 7, 1, 9, 4]])
TOKENS = ["a", "b", "c", "d", "e"]


def test_export_writes_token_attention_and_lens_files(tmp_path):
    model = tiny_gpt2()
    layers = ["transformer.h.0", "transformer.h.1", "transformer.ln_f"]
    cap = actviz.capture(model, {"input_ids": IDS}, layers)
    files = export_capture(cap, tmp_path, tokens=TOKENS, model=model)
    names = {p.name for p in files}
    assert {"transformer.ln_f_tokens.png", "transformer.ln_f_tokens.npz"} <= names
    assert {"attention_transformer.h.0.attn.png", "attention.npz", "logit_lens.json"} <= names
    assert "attention" not in cap.extra  # the caller's capture is left as it was
    saved = np.load(tmp_path / "transformer.ln_f_tokens.npz")
    np.testing.assert_array_equal(saved["heat"], cap["transformer.ln_f"].tensor[0].numpy())
    np.testing.assert_array_equal(saved["grad_heat"], cap["transformer.ln_f"].grad[0].abs().numpy())
    assert list(saved["tokens"]) == TOKENS
    own = capture_attention(model, {"input_ids": IDS})
    probs = np.load(tmp_path / "attention.npz")
    np.testing.assert_array_equal(probs["transformer.h.1.attn"], own.probs["transformer.h.1.attn"])
    lens = json.loads((tmp_path / "logit_lens.json").read_text())
    top = int(model(input_ids=IDS).logits[0, -1].argmax())
    assert lens["positions"][-1][-1]["top"][0]["id"] == top
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["tokens"] == TOKENS
    assert summary["token_layers"]["transformer.ln_f"][0] == "transformer.ln_f_tokens.png"
    with Image.open(tmp_path / "attention_transformer.h.0.attn.png") as img:
        assert img.width > 300 and img.height > 100  # mean + 4 heads


def test_export_of_a_vit_writes_the_rollout(tmp_path):
    model = tiny_vit()
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    image = (x[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    cap = actviz.capture(model, x, ["blocks.1"])
    files = export_capture(cap, tmp_path, image=image, model=model)
    names = {p.name for p in files}
    assert {"rollout.png", "rollout.npy", "attention.npz", "blocks.1_features.png"} <= names
    rollout = np.load(tmp_path / "rollout.npy")
    assert rollout.shape == (32, 32) and rollout.max() == 1.0
