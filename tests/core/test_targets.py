"""The one target parser and the targets of every output kind (no model needed here)."""

from __future__ import annotations

import struct

import pytest
import torch

from actviz.core.targets import (
    AUTO_TARGET_TEXT,
    detections,
    parse_target,
    resolve_target,
    target_choices,
    top1_target,
)

CATS = ["circle", "square", "star", "starfish"]


def test_parse_target_indices_names_and_entries():
    assert parse_target(None, CATS) is None
    assert parse_target("", CATS) is None
    assert parse_target("  auto (top-1) ", CATS) is None
    assert parse_target("auto (top detection)", None) is None
    assert parse_target("3", CATS) == 3
    assert parse_target(" -1 ", None) == -1
    assert parse_target("2: star", CATS) == 2  # an entry of the selector list
    assert parse_target("Star", CATS) == 2  # exact name (any case) wins over "starfish"
    assert parse_target("squ", CATS) == 1  # the only name containing the text
    assert parse_target("detection 4", None) == 4
    assert parse_target("Score of detection 12: label 3 (car), 0.912", None) == 12


def test_parse_target_errors_say_why():
    with pytest.raises(ValueError, match="no class named 'hexagon'"):
        parse_target("hexagon", CATS)
    with pytest.raises(ValueError, match=r"did you mean 'square', 'star'\?$"):
        parse_target("sqare", CATS)  # a typo gets the closest names
    with pytest.raises(ValueError, match=r"matches 2 classes \(2: star, 3: starfish"):
        parse_target("sta", CATS)
    with pytest.raises(ValueError, match="no class names"):
        parse_target("cat", None)


def test_every_choice_parses_back_to_its_target():
    choices = target_choices(CATS)
    assert choices[:3] == [AUTO_TARGET_TEXT, "0: circle", "1: square"]
    assert [parse_target(c, CATS) for c in choices] == [None, 0, 1, 2, 3]
    dets = [
        {
            "boxes": torch.tensor([[0.0, 0, 4, 4], [1, 1, 3, 3]]),
            "scores": torch.tensor([0.9, 0.25]),
            "labels": torch.tensor([2, 0]),
        }
    ]
    choices = target_choices(CATS, dets)
    assert choices == [
        "auto (top detection)",
        "score of detection 0: label 2 (star), 0.900",
        "score of detection 1: label 0 (circle), 0.250",
    ]
    assert [parse_target(c, CATS) for c in choices] == [None, 0, 1]
    assert target_choices(None, dets)[1] == "score of detection 0: label 2, 0.900"


def _dets(scores: list[float], labels: list[int]) -> dict[str, torch.Tensor]:
    n = len(scores)
    return {
        "boxes": torch.arange(4 * n, dtype=torch.float32).reshape(n, 4),
        "scores": torch.tensor(scores, requires_grad=True),
        "labels": torch.tensor(labels, dtype=torch.int64),
    }


def test_detection_default_is_the_top_score_and_an_int_picks_a_detection():
    out = [_dets([0.3, 0.8, 0.5], [7, 11, 2])]
    assert detections(out) is not None and detections([{"boxes": torch.zeros(1, 4)}]) is None
    t = resolve_target(out, None)
    assert t.description == "score of detection 1: label 11"
    assert t.index == 11 and t.value.item() == pytest.approx(0.8) and t.warning is None
    (g,) = torch.autograd.grad(t.value, out[0]["scores"])
    assert g.tolist() == [0.0, 1.0, 0.0]
    t = resolve_target(out, 2)
    assert (t.description, t.index, t.value.item()) == ("score of detection 2: label 2", 2, 0.5)
    assert resolve_target(out, -1).description == "score of detection 2: label 2"
    with pytest.raises(ValueError, match="detection 3 is out of range: image 0 has 3 detections"):
        resolve_target(out, 3)
    two = [_dets([0.4], [5]), _dets([0.1, 0.6], [1, 9])]
    t = resolve_target(two, None)
    assert t.value.item() == pytest.approx(1.0)  # 0.4 + 0.6
    assert t.description == (
        "top detection score of each of 2 images, summed (image 0: score of detection 0: label 5)"
    )


def test_nothing_detected_is_a_clear_value_error():
    out = [_dets([], [])]
    with pytest.raises(ValueError, match=r"detected nothing \(boxes \(0, 4\) for 1 image\)") as e:
        resolve_target(out, None)
    assert "callable target" in str(e.value)
    with pytest.raises(ValueError, match="image 0 has 0 detections.*callable target"):
        resolve_target(out, 0)


@pytest.mark.parametrize("shape", [(0, 4), (0,), (2, 0)])
def test_empty_output_names_its_shape(shape):
    with pytest.raises(ValueError, match=r"is empty \(shape .*callable target") as e:
        resolve_target(torch.zeros(shape, requires_grad=True), None)
    assert str(shape).replace(" ", "") in str(e.value).replace(" ", "")


def test_segmentation_default_is_the_top_class_over_its_pixels():
    logits = torch.zeros(1, 3, 2, 2)
    logits[0, 1] = torch.tensor([[5.0, 4.0], [0.0, 0.0]])  # class 1 wins two pixels
    logits[0, 2] = torch.tensor([[0.0, 0.0], [2.0, -1.0]])  # class 2 one, class 0 one
    logits.requires_grad_(True)
    out = {"out": logits, "aux": torch.ones(1, 3, 2, 2)}
    t = resolve_target(out, None)
    assert (t.index, t.value.item()) == (1, 9.0)
    assert t.description == "class 1 logit summed over its 2 pixels"
    assert t.warning.startswith("the output holds 2 tensors (output['out'] (1, 3, 2, 2), ")
    assert "the target uses output['out']" in t.warning
    t = resolve_target(out, 2)
    assert t.value.item() == 2.0 and t.description == "class 2 logit summed over its 1 pixels"
    logits.data[0, 0] = -10.0  # class 0 is now predicted nowhere
    t = resolve_target(out, 0)
    assert t.value.item() == -40.0 and "over all pixels (none predicted 0)" in t.description


def test_tuple_output_warns_which_tensor_the_default_used():
    out = (torch.tensor([[1.0, 3.0, 2.0]], requires_grad=True), torch.zeros(5))
    t = resolve_target(out, None)
    assert t.description == "top-1 logit (class 1)" and t.value.item() == 3.0
    assert t.warning == (
        "the output holds 2 tensors (output[0] (1, 3), output[1] (5,)); the target uses "
        "output[0] (1, 3) (pass a callable target to use another)"
    )
    assert resolve_target(out[0], None).warning is None
    assert resolve_target(out, lambda o: o[1].sum()).warning is None
    with pytest.raises(TypeError, match="not str"):
        resolve_target(out, "1")


# --------------------------------------------------------------------------------------------
# Language models: (N, T, V) logits as Hugging Face outputs hold them
# --------------------------------------------------------------------------------------------


def _lm_output() -> dict:
    logits = torch.tensor(
        [[[0.0, 1.0, 2.0, 0.5], [3.0, 0.0, 0.0, 0.0], [0.1, 0.2, 0.9, 1.5]]],
        requires_grad=True,
    )  # (1, 3 positions, 4 tokens): the last position's top token is 3
    hidden = torch.zeros(1, 3, 8)
    return {"logits": logits, "hidden_states": (hidden, hidden)}


def test_language_model_default_is_the_next_token_at_the_last_position():
    out = _lm_output()
    t = resolve_target(out, None)
    assert (t.index, float(t.value.detach())) == (3, 1.5)
    assert t.description == "next-token logit at the last position (token 3)"
    assert t.warning is None  # hidden states beside the logits are extras, not ambiguity
    (grad,) = torch.autograd.grad(t.value, out["logits"])
    assert grad.nonzero().tolist() == [[0, 2, 3]]
    chosen = resolve_target(out, 1)
    assert (chosen.index, float(chosen.value.detach())) == (1, pytest.approx(0.2))
    assert chosen.description == "logit of token 1 at the last position"
    assert resolve_target(out, -1).index == 3
    with pytest.raises(ValueError, match="target token 4 is out of range: the vocabulary has 4"):
        resolve_target(out, 4)


def test_classifier_logits_beside_attentions_are_the_target_without_warning():
    logits = torch.tensor([[0.2, 2.0, -1.0]])
    out = {"logits": logits, "attentions": (torch.ones(1, 2, 5, 5),)}
    t = resolve_target(out, None)
    assert (t.index, float(t.value), t.warning) == (1, 2.0, None)
    assert t.description == "top-1 logit (class 1)"


class _WordTokenizer:
    """What parse_target uses of a tokenizer: its vocabulary, encode and token strings."""

    vocab = {"the": 0, "cat": 1, "Ġworld": 2, " world": 3}

    def get_vocab(self):
        return dict(self.vocab)

    def encode(self, text, add_special_tokens=False):
        return [self.vocab[w] for w in text.split()]

    def convert_ids_to_tokens(self, ids):
        names = {v: k for k, v in self.vocab.items()}
        return [names[i] for i in ids]


def test_parse_target_reads_tokens_by_text_or_id():
    tok = _WordTokenizer()
    assert parse_target("cat", None, tok) == 1
    assert parse_target("Ġworld", None, tok) == 2  # a vocabulary entry as written
    assert parse_target("' world'", None, tok) == 3  # quotes keep the leading space
    assert parse_target("17", None, tok) == 17  # ids are ids
    with pytest.raises(ValueError, match=r"^'the cat' is 2 tokens \('the', 'cat'\), not one"):
        parse_target("the cat", None, tok)
    # Class names win for a classifier that also has a tokenizer.
    assert parse_target("square", CATS, tok) == 1


def test_masked_lm_logits_are_not_called_next_token():
    class MaskedLMOutput(dict):  # named like transformers' output class
        pass

    out = MaskedLMOutput(_lm_output())
    t = resolve_target(out, None)
    assert (t.index, t.description) == (3, "top-1 logit at the last position (token 3)")


@pytest.mark.parametrize(
    "row",
    [
        [0.5, 3.0, -1.0, 3.0],  # a tie: the first
        [0.5, float("nan"), 9.0, float("nan")],  # a NaN wins, the first one
        [-2.0, -1.0],
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_the_numbers_only_target_of_a_classifier_row_is_resolve_targets(row, dtype):
    out = torch.tensor([row], dtype=dtype)
    resolved = resolve_target(out, None)
    value, index, description = top1_target(out)
    assert index == resolved.index == int(torch.argmax(out))
    assert description == resolved.description
    assert struct.pack("d", value) == struct.pack("d", float(resolved.value))


def test_the_numbers_only_target_leaves_other_outputs_to_resolve_target():
    assert top1_target(torch.randn(2, 5)) is None  # several rows
    assert top1_target(torch.randn(1, 1)) is None  # one value
    assert top1_target(torch.randn(1, 3, 4, 4)) is None  # maps
    assert top1_target(torch.arange(5)[None]) is None  # not float
    assert top1_target(torch.randn(1, 5, requires_grad=True)) is None  # in a graph
    assert top1_target(torch.randn(1, 5, dtype=torch.bfloat16)) is None  # no numpy dtype
    assert top1_target((torch.randn(1, 5),)) is None  # a structure


def test_a_capture_without_gradients_reads_its_target_from_its_output_when_asked():
    import pickle

    import actviz

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 5))
    x = torch.randn(1, 3, 2, 2)
    with_grads = actviz.capture(net, x)
    without = actviz.capture(net, x, [], gradients=False)
    assert "target_value" not in vars(without)  # not read yet
    copied = pickle.loads(pickle.dumps(without))
    for cap in (without, copied):
        assert cap.target_index == with_grads.target_index == int(net(x).argmax())
        assert cap.target_value == with_grads.target_value
        assert cap.target_description == with_grads.target_description
    assert "_target_numbers" not in vars(without)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        without.nothing  # noqa: B018
    # A target given is resolved at once (a callable runs while the caller expects it to).
    calls = []
    explicit = actviz.capture(
        net, x, [], gradients=False, target=lambda o: calls.append(1) or o[0, 2]
    )
    assert calls == [1] and explicit.target_index is None
    assert explicit.target_value == float(net(x)[0, 2].detach())


def test_fixed_default_is_the_int_that_picks_the_default_scalar():
    from actviz.core.targets import fixed_default, resolve_target

    logits = torch.tensor([[0.1, 2.0, -1.0]])
    k = fixed_default(logits)
    assert k == 1
    assert resolve_target(logits, k).value == resolve_target(logits, None).value
    seq = {"logits": torch.randn(1, 4, 7, generator=torch.Generator().manual_seed(0))}
    k = fixed_default(seq)
    assert k == int(seq["logits"][0, -1].argmax())
    assert resolve_target(seq, k).value == resolve_target(seq, None).value
    # No int picks the same scalar: each row its own top-1, a segmenter, a detector, a value.
    assert fixed_default(torch.randn(2, 3)) is None
    assert fixed_default({"out": torch.randn(1, 3, 4, 4)}) is None
    det = [{"boxes": torch.zeros(1, 4), "scores": torch.ones(1), "labels": torch.ones(1)}]
    assert fixed_default(det) is None
    assert fixed_default(torch.tensor([[0.5]])) is None
