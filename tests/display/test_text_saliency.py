"""Saliency of a text input: |gradient x input embedding| per token, read from the capture of
the model's input embedding (a real tiny GPT-2 and BERT; a plain embedding model)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from actviz.core.capture import capture
from actviz.display.attribution import input_embedding, token_saliency
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec
from tests.display.seq_models import tiny_bert, tiny_gpt2

TOKENS = ("The", " cat", " sat", " on", " a", " mat")
IDS = torch.tensor([[5, 17, 33, 2, 9, 21]])


def test_token_saliency_is_gradient_times_embedding_summed_over_features():
    model = tiny_gpt2()
    layer = input_embedding(model)
    assert layer == "transformer.wte"
    cap = capture(model, {"input_ids": IDS}, [layer, "transformer.h.1"])
    spec = DisplaySpec(layers=("transformer.h.1",), tokens=TOKENS)
    result = prepare(cap, spec, model=model)
    sal = result.token_saliency
    assert sal is not None and sal.layer == "transformer.wte"
    # By hand: the embedding's output times its gradient, summed over the last dim, abs.
    emb, grad = cap[layer].tensor, cap[layer].grad
    want = (emb * grad).sum(dim=-1).abs()[0].numpy()
    np.testing.assert_allclose(sal.values, want, rtol=1e-5, atol=1e-9)
    assert sal.values.shape == (len(TOKENS),) and sal.values.max() > 0
    assert sal.tokens == TOKENS
    assert result.saliency is None and result.saliency_message == ""
    np.testing.assert_allclose(sal.shares().max(), 1.0)
    top = int(np.argmax(want))
    assert sal.describe(top).startswith(f"token {top} {TOKENS[top]!r}: |grad × embedding| ")
    assert not sal.values.flags.writeable


def test_the_same_at_the_device_path_and_for_a_batch_sample():
    model = tiny_gpt2()
    ids = torch.cat([IDS, IDS.flip(1)])
    cap = capture(model, {"input_ids": ids}, ["transformer.wte", "lm_head"])
    spec = DisplaySpec(layers=("lm_head",), tokens=TOKENS, sample=1)
    result = prepare(cap, spec, model=model, device=True)
    emb, grad = cap["transformer.wte"].tensor, cap["transformer.wte"].grad
    want = (emb * grad).sum(dim=-1).abs()[1].numpy()
    np.testing.assert_allclose(result.token_saliency.values, want, rtol=1e-5, atol=1e-9)
    assert result.token_saliency.sample == 1


def test_bert_and_a_plain_embedding_model_find_their_input_embedding():
    assert input_embedding(tiny_bert()) == "bert.embeddings.word_embeddings"
    plain = nn.Sequential(nn.Linear(3, 3), nn.Embedding(10, 4), nn.Embedding(10, 4))
    assert input_embedding(plain) == "1"
    assert input_embedding(nn.Sequential(nn.Linear(3, 3))) is None


def test_without_the_embedding_record_the_message_says_so():
    model = tiny_gpt2()
    cap = capture(model, {"input_ids": IDS}, ["lm_head"])
    result = prepare(cap, DisplaySpec(layers=("lm_head",), tokens=TOKENS), model=model)
    assert result.token_saliency is None
    assert "input embedding" in result.saliency_message
    assert "not a float tensor" not in result.saliency_message
    # A float (image) input never gets a token saliency, whatever layer is named.
    conv = nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU()).eval()
    image_cap = capture(conv, torch.randn(1, 3, 8, 8), ["0"])
    assert image_cap["0"].grad is not None
    assert token_saliency(image_cap, "0") is None
