"""Capture on other model families: detection, segmentation, nested inputs, input_grads=False."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn
from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn
from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

import actviz
from actviz.core.input_copies import forward_takes_list
from tests.conftest import assert_no_hooks


def detector(score_thresh: float) -> nn.Module:
    """Random-init Faster R-CNN on 128 px images; thresh 0 keeps its (uniform) detections."""
    torch.manual_seed(0)
    return fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None,
        weights_backbone=None,
        box_score_thresh=score_thresh,
        min_size=128,
        max_size=128,
    ).eval()


@pytest.fixture(scope="module")
def image():
    torch.manual_seed(3)
    return torch.rand(3, 96, 128)


def test_faster_rcnn_with_detections_as_a_list_argument(image):
    model = detector(0.0)
    with torch.no_grad():
        reference = model([image.clone()])
    scores = reference[0]["scores"]
    assert forward_takes_list(model) and scores.numel() == 100
    top = int(scores.argmax())
    kept = image.clone()
    cap = actviz.capture(model, ([image],), ["backbone.body.1", "roi_heads.box_head"])
    assert torch.equal(image, kept) and not image.requires_grad
    assert (
        cap.target_description
        == f"score of detection {top}: label {int(reference[0]['labels'][top])}"
    )
    assert cap.target_index == int(reference[0]["labels"][top])
    assert cap.target_value == pytest.approx(float(scores[top]), abs=0)
    for key in ("boxes", "scores", "labels"):
        assert torch.equal(cap.output[0][key], reference[0][key]), key
    # The input gradient mirrors the input: a tuple holding a list holding one image.
    assert isinstance(cap.input_grads, tuple) and isinstance(cap.input_grads[0], list)
    (saliency,) = cap.input_grads[0]
    assert saliency.shape == image.shape and float(saliency.abs().sum()) > 0
    assert cap["roi_heads.box_head"].grad_output.abs().sum() > 0
    # ``[img]`` alone is the same single list argument, since forward takes a list.
    same = actviz.capture(model, [image], ["backbone.body.1"], target=3)
    assert isinstance(same.input_grads, list) and len(same.input_grads) == 1
    assert (
        same.target_description == f"score of detection 3: label {int(reference[0]['labels'][3])}"
    )
    by_hand = image.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad(model([by_hand])[0]["scores"][3], by_hand)
    assert torch.allclose(same.input_grads[0], expected, rtol=1e-4, atol=1e-12)
    assert_no_hooks(model)


def test_faster_rcnn_without_detections_raises_a_clear_error(image):
    model = detector(0.5)  # random init scores ~1/91 each: nothing passes
    with pytest.raises(ValueError, match=r"detected nothing \(boxes \(0, 4\) for 1 image\)"):
        actviz.capture(model, ([image],), ["backbone.body.1"])
    assert_no_hooks(model)
    cap = actviz.capture(model, [image], ["backbone.body.1"], gradients=False)
    assert cap.output[0]["boxes"].shape == (0, 4)
    assert cap.target_description.startswith("no target (the model detected nothing")
    assert cap["backbone.body.1"].output.shape[0] == 1


def test_deeplabv3_targets_the_top_class_over_its_pixels():
    torch.manual_seed(0)
    model = deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=4, aux_loss=True
    ).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        out = model(x)["out"]
    predicted = out.argmax(1)
    top = int(torch.bincount(predicted.flatten(), minlength=4).argmax())
    pixels = int((predicted == top).sum())
    cap = actviz.capture(model, x, ["classifier.4", ""])
    assert cap.target_index == top
    assert cap.target_description == f"class {top} logit summed over its {pixels} pixels"
    assert cap.target_value == pytest.approx(float(out[:, top][predicted == top].sum()), rel=1e-6)
    assert any("the target uses output['out']" in w for w in cap.warnings)
    # d target / d out is exactly the mask of the top class's pixels, zero elsewhere
    grad = cap[""].grad_output
    mask = torch.zeros_like(out)
    mask[:, top] = (predicted == top).float()
    assert torch.equal(grad["out"], mask)
    assert grad["aux"] is None or float(grad["aux"].abs().sum()) == 0
    assert float(cap["classifier.4"].grad_output.abs().sum()) > 0
    assert cap.input_grads.shape == x.shape


class WritesIntoItsInputs(nn.Module):
    """Takes ``(xs: list[Tensor], extra: dict)`` and writes into ``xs[0]`` in place."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, xs: list[torch.Tensor], extra: dict[str, tuple[torch.Tensor, int]]):
        xs[0].mul_(2)
        xs.append(torch.ones(1))  # also changes the list it was given
        scale, _ = extra["scale"]
        return self.lin(xs[0] * scale + xs[1])


def test_nested_inputs_are_copied_and_get_gradients_in_their_structure():
    torch.manual_seed(0)
    model = WritesIntoItsInputs()
    a, b, s = torch.randn(1, 3), torch.randn(1, 3), torch.tensor(3.0)
    xs, extra = [a, b], {"scale": (s, 7)}
    originals = [a.clone(), b.clone(), s.clone()]
    cap = actviz.capture(model, (xs, extra), ["lin"], target=1)
    # Nothing the caller holds was written: not the tensors, not the list.
    assert len(xs) == 2 and xs[0] is a and extra["scale"][1] == 7
    for t, before in zip((a, b, s), originals, strict=True):
        assert torch.equal(t, before) and not t.requires_grad
    assert torch.equal(cap.inputs[0][0], originals[0])  # the recorded input is as given
    # d out[:, 1] / d a = 2 * scale * w1 ; / d b = w1 ; / d scale = (2 a) . w1
    w1 = model.lin.weight.detach()[1]
    grads_xs, grads_extra = cap.input_grads
    assert torch.allclose(grads_xs[0], (6 * w1)[None])
    assert torch.allclose(grads_xs[1], w1[None])
    assert torch.allclose(grads_extra["scale"][0], (2 * a[0] * w1).sum())
    assert grads_extra["scale"][1] is None  # not a tensor
    assert isinstance(grads_xs, list) and isinstance(grads_extra["scale"], tuple)
    assert_no_hooks(model)


class Counted(torch.autograd.Function):
    """Identity that counts how often autograd runs its backward."""

    calls = 0

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        Counted.calls += 1
        return grad


class Stem(nn.Module):
    def forward(self, x):
        return Counted.apply(x)


def test_input_grads_false_stops_the_backward_at_the_first_recorded_output():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), Stem(), nn.Conv2d(4, 5, 3), nn.Flatten(), nn.LazyLinear(2)
    )
    x = torch.randn(1, 3, 8, 8)
    model(x)  # materialise the lazy layer
    full = actviz.capture(model, x, ["2", "4"], target=1)
    calls = Counted.calls
    assert calls > 0 and full.input_grads is not None
    short = actviz.capture(model, x, ["2", "4"], target=1, input_grads=False)
    assert Counted.calls == calls  # nothing upstream of layer "2" was differentiated
    assert short.input_grads is None
    assert short["2"].grad_inputs is None and short["4"].grad_inputs is None
    for name in ("2", "4"):
        assert torch.equal(short[name].output, full[name].output)
        assert torch.allclose(short[name].grad_output, full[name].grad_output, atol=1e-7)
    assert short.target_value == full.target_value


def test_input_grads_false_gives_the_same_grad_cam_on_resnet18():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    full = actviz.capture(model, x, ["layer4"], target=5)
    short = actviz.capture(model, x, ["layer4"], target=5, input_grads=False)
    assert short.input_grads is None and short["layer4"].grad_inputs is None
    assert torch.equal(short["layer4"].output, full["layer4"].output)
    assert torch.allclose(short["layer4"].grad_output, full["layer4"].grad_output, atol=1e-7)
    # and it is TorchCAM's gradient: autograd.grad with respect to layer4's output only
    held = []
    handle = model.layer4.register_forward_hook(lambda _m, _a, out: held.append(out))
    try:
        out = model(x)
    finally:
        handle.remove()
    (expected,) = torch.autograd.grad(out[:, 5].sum(), held[0])
    assert torch.equal(short["layer4"].grad_output, expected)
    assert_no_hooks(model)


def test_detector_transform_record_keeps_its_image_list(image):
    """A record whose output holds an ImageList (not a container of tensors) keeps it."""
    from torchvision.models.detection.image_list import ImageList

    model = detector(0.5)
    with torch.no_grad():
        expected, _targets = model.transform([image.clone()])
    cap = actviz.capture(model, [image], ["transform", "backbone.body.1"], gradients=False)
    images, targets = cap["transform"].output
    assert isinstance(images, ImageList) and targets is None
    assert images.image_sizes == expected.image_sizes == [(96, 128)]
    assert torch.equal(images.tensors, expected.tensors)
    # What the backbone received is the ImageList's batch tensor.
    body = model.backbone.body
    with torch.no_grad():
        reference = body["1"](body["0"](expected.tensors))
    assert torch.equal(cap["backbone.body.1"].output, reference)
    assert_no_hooks(model)
