"""Attention maps equal the model's own, the model is left as found, rollout is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actviz.core.capture import CaptureTooLarge
from actviz.display.attention import (
    attention_modules,
    attention_rollout,
    capture_attention,
    eager_attention,
    rollout_map,
)
from actviz.display.token_maps import SequenceLayout
from tests.conftest import assert_no_hooks
from tests.display.seq_models import tiny_bert, tiny_gpt2, tiny_vit

IDS = torch.tensor([[3, 7, 1, 9, 4, 2]])


def test_rollout_of_a_hand_made_two_layer_example():
    a1 = np.array([[[1.0, 0.0], [0.5, 0.5]]])  # one head
    a2 = np.array([[[0.0, 1.0], [1.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]])  # two heads
    # (A1 + I) rows renormalised: [[1, 0], [.25, .75]]; mean of A2 heads + I renormalised:
    # [[.75, .25], [.5, .5]]; rollout = A2' @ A1'.
    expected = np.array([[0.8125, 0.1875], [0.625, 0.375]])
    np.testing.assert_allclose(attention_rollout([a1, a2]), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(attention_rollout([a1]), [[1.0, 0.0], [0.25, 0.75]], atol=1e-12)
    with pytest.raises(ValueError, match="at least one"):
        attention_rollout([])


def test_rollout_map_takes_the_class_row_over_the_patch_grid():
    rollout = np.zeros((5, 5))
    rollout[0, 1:] = [0.1, 0.2, 0.3, 0.5]  # class token row over a 2x2 grid
    grid = rollout_map(rollout, SequenceLayout((2, 2), prefix=1))
    np.testing.assert_allclose(grid, [[0.0, 0.25], [0.5, 1.0]], atol=1e-6)
    assert rollout_map(rollout, SequenceLayout((2, 2), 1), size=(8, 8)).shape == (8, 8)


def test_gpt2_attention_equals_its_output_attentions(no_hooks_left):
    model = tiny_gpt2()
    before = model(input_ids=IDS).logits
    maps = capture_attention(model, {"input_ids": IDS})
    assert maps is not None
    assert maps.layers == ("transformer.h.0.attn", "transformer.h.1.attn")
    assert model.config._attn_implementation == "sdpa"  # put back
    assert_no_hooks(model)
    with eager_attention(model):
        own = model(input_ids=IDS, output_attentions=True).attentions
    assert model.config._attn_implementation == "sdpa"
    for name, ref in zip(maps.layers, own, strict=True):
        assert maps.probs[name].shape == (1, 4, 6, 6)
        np.testing.assert_array_equal(maps.probs[name], ref.detach().numpy())
    # causal: nothing above the diagonal, rows sum to 1
    heads = maps.heads("transformer.h.1.attn")
    assert np.triu(heads, 1).max() == 0
    np.testing.assert_allclose(heads.sum(-1), 1, atol=1e-6)
    np.testing.assert_allclose(maps.mean("transformer.h.1.attn"), heads.mean(0))
    with pytest.raises(CaptureTooLarge):  # the window's memory budget applies
        capture_attention(model, {"input_ids": IDS}, max_bytes=100)
    assert model.config._attn_implementation == "sdpa"
    # the unfused path agrees with the model's own (sdpa) outputs to rounding
    torch.testing.assert_close(model(input_ids=IDS).logits, before, rtol=1e-5, atol=1e-5)


def test_bert_attention_equals_its_output_attentions():
    model = tiny_bert()
    inputs = {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}
    maps = capture_attention(model, inputs)
    assert maps is not None and len(maps.layers) == 2
    assert maps.layers[0] == "bert.encoder.layer.0.attention.self"
    with eager_attention(model):
        own = model(**inputs, output_attentions=True).attentions
    for name, ref in zip(maps.layers, own, strict=True):
        np.testing.assert_array_equal(maps.probs[name], ref.detach().numpy())
    assert model.config._attn_implementation == "sdpa"


def test_timm_vit_attention_is_the_unfused_softmax():
    model = tiny_vit()
    fused = [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")]
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    maps = capture_attention(model, x)
    assert maps is not None and maps.layers == ("blocks.0.attn", "blocks.1.attn")
    assert [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")] == fused
    # manual: softmax(q k^T * scale) of block 0 from its own qkv projection
    attn = model.blocks[0].attn
    with torch.no_grad():
        tokens = model._pos_embed(model.patch_embed(x))
        h = model.blocks[0].norm1(tokens)
        qkv = attn.qkv(h).reshape(1, 5, 3, 3, 16).permute(2, 0, 3, 1, 4)
        q, k = attn.q_norm(qkv[0]), attn.k_norm(qkv[1])
        ref = ((q * attn.scale) @ k.transpose(-2, -1)).softmax(-1)
    assert maps.probs["blocks.0.attn"].shape == (1, 3, 5, 5)
    np.testing.assert_allclose(maps.probs["blocks.0.attn"], ref.numpy(), rtol=1e-6, atol=1e-7)


def test_models_without_attention_give_none():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    assert attention_modules(model) == []
    assert capture_attention(model, torch.zeros(1, 4)) is None
