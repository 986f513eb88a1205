"""The one walker over nested outputs and inputs: container types kept at every level."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch
import torchvision
from torch import nn

import actviz
from actviz.core.structures import (
    first_tensor,
    iter_tensors,
    map_leaves,
    map_tensors,
    named_tensors,
    replace_first,
    shapes,
)

Pair = collections.namedtuple("Pair", ["features", "logits"])


@dataclasses.dataclass(frozen=True)
class Boxes:
    coords: torch.Tensor
    label: str = "box"


class Opaque:
    """Neither a tensor nor a container: kept as it is."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


def test_walker_keeps_types_and_non_tensor_leaves():
    opaque = Opaque(torch.ones(1))
    obj = {
        "pair": Pair(torch.ones(2), torch.zeros(3)),
        "od": collections.OrderedDict(b=torch.full((1,), 2.0), a=[torch.ones(4), "text", None]),
        "box": Boxes(torch.ones(5)),
        "opaque": opaque,
        "size": torch.Size([2, 3]),
    }
    assert [t.numel() for t in iter_tensors(obj)] == [2, 3, 1, 4, 5]
    doubled = map_tensors(obj, lambda t: t * 2)
    assert type(doubled["pair"]) is Pair and torch.equal(
        doubled["pair"].features, 2 * torch.ones(2)
    )
    assert type(doubled["od"]) is collections.OrderedDict and list(doubled["od"]) == ["b", "a"]
    assert doubled["od"]["a"][1:] == ["text", None]
    assert type(doubled["box"]) is Boxes and doubled["box"].label == "box"
    assert torch.equal(doubled["box"].coords, 2 * torch.ones(5))
    assert doubled["opaque"] is opaque and type(doubled["size"]) is torch.Size
    assert [p for p, _ in named_tensors(obj)] == [
        "output['pair'][0]",
        "output['pair'][1]",
        "output['od']['b']",
        "output['od']['a'][0]",
        "output['box'].coords",
    ]
    assert first_tensor(obj) is obj["pair"].features
    new = torch.full((2,), 7.0)
    swapped = replace_first(obj, new)
    assert swapped["pair"].features is new and swapped["pair"].logits is obj["pair"].logits
    assert map_leaves(["a", torch.ones(1)], lambda x: type(x).__name__) == ["str", "Tensor"]


class PairNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> Pair:
        features = self.body(x)
        return Pair(features, self.head(features))


class PairBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = PairNet()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).logits


def test_namedtuple_output_and_record():
    torch.manual_seed(0)
    model = PairBlock().eval()
    x = torch.randn(2, 4)
    cap = actviz.capture(model, x, layers=["net"])
    rec = cap["net"]
    assert type(rec.output) is Pair and type(rec.grad_output) is Pair
    expected = model.net(x)
    assert torch.equal(rec.output.logits, expected.logits)
    assert torch.equal(rec.output.features, expected.features)
    # default target: top-1 logit per row; its gradient through head reaches features
    assert rec.grad_output.features.abs().sum() > 0
    top = torch.zeros_like(expected.logits)
    top[torch.arange(2), expected.logits.argmax(1)] = 1.0
    assert torch.allclose(rec.grad_output.logits, top)


def test_segmentation_output_stays_an_ordered_dict():
    torch.manual_seed(0)
    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=3
    ).eval()
    x = torch.randn(1, 3, 64, 64)
    cap = actviz.capture(model, x, layers=["backbone"])
    assert type(cap.output) is collections.OrderedDict and list(cap.output) == ["out"]
    assert type(cap["backbone"].output) is collections.OrderedDict
    assert list(cap["backbone"].output) == ["low", "high"]
    assert type(cap["backbone"].grad_output) is collections.OrderedDict
    with torch.no_grad():
        assert torch.equal(cap.output["out"], model(x)["out"])


def _tiny_transformer(kind: str) -> nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "gpt2":
        config = transformers.GPT2Config(
            vocab_size=40, n_positions=16, n_embd=16, n_layer=2, n_head=2,
            bos_token_id=None, eos_token_id=None,
        )  # fmt: skip
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, num_labels=3,
    )  # fmt: skip
    return transformers.BertForSequenceClassification(config).eval()


@pytest.mark.parametrize(
    ("kind", "layer", "record_type", "output_type"),
    [
        ("bert", "bert", "BaseModelOutputWithPoolingAndCrossAttentions", "SequenceClassifierOutput"),
        ("gpt2", "transformer", "BaseModelOutputWithPastAndCrossAttentions", "CausalLMOutputWithCrossAttentions"),
    ],
)  # fmt: skip
def test_hugging_face_outputs_keep_their_model_output_type(kind, layer, record_type, output_type):
    model = _tiny_transformer(kind)
    ids = torch.randint(0, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    cap = actviz.capture(model, {"input_ids": ids}, layers=[layer])
    assert type(cap.output).__name__ == output_type
    with torch.no_grad():
        expected = model(input_ids=ids)
    assert torch.equal(cap.output.logits, expected.logits)
    rec = cap[layer]
    assert type(rec.output).__name__ == record_type
    assert type(rec.grad_output).__name__ == record_type
    assert torch.equal(rec.output.last_hidden_state, rec.tensor)
    assert rec.grad_output.last_hidden_state.abs().sum() > 0
    if kind == "gpt2":  # the cache is neither a tensor nor a container: kept, not None
        assert type(cap.output.past_key_values).__name__ == "DynamicCache"


def test_describe_says_what_a_nested_input_holds_in_one_line():
    from collections import namedtuple

    from actviz.core.structures import describe

    pair = namedtuple("pair", "a b")
    x = {"input_ids": torch.zeros(1, 8, dtype=torch.long), "mask": [torch.ones(2, 3)], "n": 3}
    assert describe(x) == "{input_ids: 1x8 int64, mask: (2x3 float32), n: int}"
    assert describe(pair(torch.zeros(()), [1, 2])) == "(scalar float32, list)"
    assert describe(tuple(torch.zeros(1) for _ in range(7))) == (
        "(1 float32, 1 float32, 1 float32, 1 float32, ... (3 more))"
    )


def test_shapes_are_json_for_every_container_the_walker_knows():
    # transformers is an extra (actviz[hf]): the base install's suite skips this test.
    ModelOutput = pytest.importorskip("transformers.utils").ModelOutput  # noqa: N806

    t = torch.zeros(2, 3)
    nested = {"pair": Pair(t, torch.zeros(4)), "boxes": Boxes(torch.zeros(5, 4))}
    nested |= {"images": [t, "text"], "out": ModelOutput(logits=torch.zeros(1, 7))}
    assert shapes(nested) == {
        "pair": [[2, 3], [4]],
        "boxes": {"coords": [5, 4], "label": None},
        "images": [[2, 3], None],
        "out": {"logits": [1, 7]},
    }
    assert shapes(t) == [2, 3] and shapes((t,)) == [[2, 3]] and shapes("x") is None
