"""Token views, ViT patch maps, the logit lens, and their route through prepare()."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import actviz
from actviz.display.attribution import grad_cam
from actviz.display.logit_lens import lens_layers, logit_lens
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec
from actviz.display.token_maps import (
    SequenceLayout,
    patch_maps,
    sequence_kind,
    sequence_layout,
    token_view,
)
from tests.display.seq_models import tiny_gpt2, tiny_vit

IDS = torch.tensor([[3, 7, 1, 9, 4]])
TOKENS = ("a", "b", "c", "d", "e")


def test_token_view_heat_norms_and_gradient():
    x = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4) - 5
    g = -x
    view = token_view(x, ["x", "y", "z"], sample=1, grad=g)
    np.testing.assert_array_equal(view.heat, x[1].numpy())
    np.testing.assert_allclose(view.norms, np.linalg.norm(x[1].numpy(), axis=1), rtol=1e-6)
    np.testing.assert_array_equal(view.grad_heat, np.abs(g[1].numpy()))
    assert view.tokens == ("x", "y", "z") and view.sample == 1
    assert view.describe(2, 3) == "token 2 'z', feature 3: value 18"
    assert view.describe(0, 1, gradient=True) == "token 0 'x', feature 1: |grad| 8"
    with pytest.raises(ValueError, match="2 tokens"):
        token_view(x, ["x", "y"])
    with pytest.raises(ValueError):
        view.heat[0, 0] = 1  # read-only


def test_patch_maps_drop_the_class_token_and_keep_row_major_order():
    layout = SequenceLayout((2, 3), prefix=1)
    x = torch.zeros(1, 7, 2)
    x[0, 1:, 0] = torch.arange(6.0)  # patch index as feature 0
    maps = patch_maps(x, layout)
    assert maps.shape == (2, 2, 3)
    np.testing.assert_array_equal(maps[0], [[0, 1, 2], [3, 4, 5]])
    assert sequence_kind((1, 7, 2), None, layout) == "patches"
    assert sequence_kind((1, 5, 2), TOKENS, None) == "tokens"
    assert sequence_kind((1, 4, 2), TOKENS, None) is None
    assert sequence_kind((1, 5, 2, 2), TOKENS, None) is None


def test_logit_lens_against_a_manual_computation():
    model = tiny_gpt2()
    lens = lens_layers(model)
    assert lens is not None
    assert lens.blocks == ("transformer.h.0", "transformer.h.1")
    assert (lens.norm, lens.unembed) == ("transformer.ln_f", "lm_head")
    cap = actviz.capture(model, {"input_ids": IDS}, list(lens.blocks), gradients=False)
    table = logit_lens(model, cap, k=3, tokens=TOKENS)
    assert table.ids.shape == (2, 5, 3)
    with torch.no_grad():
        out = model(input_ids=IDS, output_hidden_states=True)
        for i, hidden in enumerate(out.hidden_states[1:2]):  # block 0's output
            probs = torch.softmax(model.lm_head(model.transformer.ln_f(hidden[0])), -1)
            top = torch.topk(probs, 3, dim=-1)
            np.testing.assert_array_equal(table.ids[i], top.indices.numpy())
            np.testing.assert_allclose(table.probs[i], top.values.numpy(), rtol=1e-5)
        # the last block's row is the model's own prediction
        final = torch.topk(torch.softmax(out.logits[0], -1), 3, dim=-1)
    np.testing.assert_array_equal(table.ids[-1], final.indices.numpy())
    rows = table.rows(-1)
    assert [r[0] for r in rows] == ["transformer.h.0", "transformer.h.1"]
    assert rows[1][1][0][0] == int(final.indices[-1, 0])
    assert rows[1][1][0][1] == f"#{int(final.indices[-1, 0])}"  # no tokenizer: ids
    one = logit_lens(model, cap, position=2, k=3)
    np.testing.assert_array_equal(one.ids[:, 0], table.ids[:, 2])
    assert lens_layers(torch.nn.Linear(2, 2)) is None


def test_prepare_routes_sequence_layers_to_the_token_view():
    model = tiny_gpt2()
    layers = ["transformer.h.0.mlp", "transformer.ln_f"]
    cap = actviz.capture(model, {"input_ids": IDS}, layers)
    spec = DisplaySpec(layers=tuple(layers), tokens=TOKENS)
    result = prepare(cap, spec, model=model)
    layer = result.layers["transformer.ln_f"]
    assert layer.tokens is not None and layer.mosaic is None
    assert layer.tokens.tokens == TOKENS
    np.testing.assert_array_equal(layer.tokens.heat, cap["transformer.ln_f"].tensor[0].numpy())
    grad = np.abs(cap["transformer.ln_f"].grad[0].numpy())
    np.testing.assert_array_equal(layer.tokens.grad_heat, grad)
    assert result.logit_lens is None  # no block captured
    cap = actviz.capture(model, {"input_ids": IDS}, [*layers, "transformer.h.1"])
    lens = prepare(cap, spec, model=model).logit_lens
    assert lens is not None and lens.layers == ("transformer.h.1",)
    np.testing.assert_array_equal(lens.ids[0], logit_lens(model, cap).ids[0])
    # the device path (one host copy per frame, live mode) gives the same token view
    host = prepare(cap, spec, device=True).layers["transformer.ln_f"].tokens
    np.testing.assert_array_equal(host.heat, layer.tokens.heat)
    np.testing.assert_array_equal(host.grad_heat, layer.tokens.grad_heat)
    assert host.shape == layer.tokens.shape
    # without tokens: the plain heat map as before
    plain = prepare(cap, DisplaySpec(layers=tuple(layers)))
    assert plain.layers["transformer.ln_f"].tokens is None


def test_prepare_shows_vit_tokens_as_patch_maps():
    model = tiny_vit()
    layout = sequence_layout(model)
    assert layout == SequenceLayout((2, 2), 1)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    cap = actviz.capture(model, x, ["blocks.0", "blocks.1"])
    result = prepare(cap, DisplaySpec(layers=("blocks.0", "blocks.1"), layout=layout))
    layer = result.layers["blocks.1"]
    assert layer.view.kind == "maps" and layer.view.data.shape == (48, 2, 2)
    np.testing.assert_array_equal(
        layer.view.data[5], cap["blocks.1"].tensor[0, 1:, 5].reshape(2, 2).numpy()
    )
    assert layer.mosaic is not None and layer.mosaic.total_channels == 48
    assert layer.grad_view is not None and layer.grad_view.data.shape == (48, 2, 2)
    host = prepare(cap, DisplaySpec(layers=("blocks.1",), layout=layout), device=True)
    np.testing.assert_array_equal(host.layers["blocks.1"].view.data, layer.view.data)

    # Grad-CAM on the patch grid; the last block's patch tokens never reach the class-token
    # head (zero gradient), so only blocks.0 is offered.
    assert list(result.grad_cams) == ["blocks.0"] and result.gradcam_default == "blocks.0"
    act, grad = cap["blocks.0"].tensor, cap["blocks.0"].grad
    grid = (
        act[:, 1:].transpose(1, 2).reshape(1, 48, 2, 2),
        grad[:, 1:].transpose(1, 2).reshape(1, 48, 2, 2),
    )
    np.testing.assert_allclose(
        result.grad_cams["blocks.0"], grad_cam(*grid, size=(32, 32)), atol=1e-6
    )
    assert prepare(cap, DisplaySpec(layers=("blocks.0",))).grad_cams == {}  # no layout: none
