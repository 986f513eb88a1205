"""What a user meets when feature visualisation cannot do what was asked: the message says
why and what to change, before any optimisation."""

from __future__ import annotations

import pytest
from torch import nn

from actviz.analysis.visualize.feature_vis import layer_channels, visualize
from actviz.analysis.visualize.visualization import VisualizeError
from tests.display.seq_models import tiny_bert_encoder


def test_a_bare_text_model_is_refused_as_one_without_the_input_size_hint():
    # A text model shown with explore() / set_model (no tokenizer attached): the message says
    # it reads token ids, not that an input size would help.
    bert = tiny_bert_encoder()
    for call in (
        lambda: visualize(bert, "encoder.layer.0.output", [0], steps=1, size=16),
        lambda: layer_channels(bert, "encoder.layer.0.output", size=16),
    ):
        with pytest.raises(VisualizeError) as info:
            call()
        text = str(info.value)
        assert "token ids" in text and "embeddings.word_embeddings" in text, text
        assert "input_size" not in text, text
    toy = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2))
    with pytest.raises(VisualizeError, match="token ids"):
        visualize(toy, "1", [0], steps=1, size=16)


def test_channels_out_of_range_are_all_named_with_the_range_there_is(demo):
    # 0-200 on a 64-channel layer: the message named [64, 65, 66, 67, 68] only, as if five
    # were wrong.
    with pytest.raises(VisualizeError) as info:
        visualize(demo, "features.block3", range(201), steps=1, size=16)
    text = str(info.value)
    assert "64 channels (0-63)" in text and "137" in text and "64-200" in text, text
    with pytest.raises(VisualizeError) as info:
        visualize(demo, "features.block3", [3, 70, 99], steps=1, size=16)
    assert "70,99" in str(info.value), str(info.value)
    with pytest.raises(VisualizeError, match=r"8 classes \(0-7\)"):
        visualize(demo, None, target=[1, 9], steps=1, size=16)


def test_a_batch_below_one_is_refused(demo):
    # batch=0 (--batch 0) ran one image at a time without a word.
    with pytest.raises(VisualizeError, match="batch"):
        visualize(demo, "features.block3", [0], steps=1, size=16, batch=0)
