"""Gradients in every grad mode: a caller's ``torch.no_grad()`` or ``torch.inference_mode()``
changes nothing that capture, effects, visualize, scans or edits return.

Each case runs once in plain mode and once inside the mode, on a tiny conv net and on a
random-init ResNet-18 (small input), and compares the two exactly. The input is made inside
the mode too (an inference tensor under ``inference_mode``), as a caller's code would.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
import torchvision
from torch import nn

import actviz

MODES = {
    "plain": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def _conv_stack() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(6, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 5),
    ).eval()


def _resnet() -> nn.Module:
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None, num_classes=10).eval()


#: name -> (model factory, layers recorded, input shape)
NETS = {
    "tiny": (_conv_stack, ["0", "2"], (1, 3, 12, 12)),
    "resnet18": (_resnet, ["layer1.0", "layer3"], (1, 3, 32, 32)),
}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Exact comparisons on one thread: on two, ResNet-18's backward differs from one call to
    the next in the last bits (the suite's two workers run one thread each; ``-n 0`` two)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module", params=list(NETS))
def net(request):
    make, layers, shape = NETS[request.param]
    return make(), layers, shape


def _input_made_in(shape: tuple[int, ...], mode: str) -> torch.Tensor:
    # Made inside the mode, as a caller's code makes it (an inference tensor there).
    with MODES[mode]():
        return torch.randn(*shape, generator=torch.Generator().manual_seed(1))


def _in_mode(mode: str, fn, *args, **kwargs):
    with MODES[mode]():
        return fn(*args, **kwargs)


def _assert_same_capture(got, want, layers):
    assert want.input_grads is not None
    assert got.input_grads is not None, got.warnings
    assert torch.equal(got.input_grads, want.input_grads)
    assert torch.equal(got.output, want.output)
    assert got.target_value == want.target_value
    for name in layers:
        g, w = got[name], want[name]
        assert torch.equal(g.output, w.output)
        assert w.grad_output is not None and torch.equal(g.grad_output, w.grad_output)
        assert torch.equal(g.grad_inputs[0], w.grad_inputs[0])
    assert got.warnings == want.warnings


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_capture_input_and_layer_gradients_in_every_grad_mode(net, mode):
    model, layers, shape = net
    want = actviz.capture(model, _input_made_in(shape, "plain"), layers)
    got = _in_mode(mode, actviz.capture, model, _input_made_in(shape, mode), layers)
    _assert_same_capture(got, want, layers)
    # The mode is the caller's again afterwards.
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_capture_with_edits_in_every_grad_mode(net, mode):
    model, layers, shape = net
    edits = {layers[0]: actviz.edits.ablate([0, 1])}
    want = actviz.capture(model, _input_made_in(shape, "plain"), layers, edits=edits)
    got = _in_mode(mode, actviz.capture, model, _input_made_in(shape, mode), layers, edits=edits)
    _assert_same_capture(got, want, layers)
    assert set(got.edits) == {layers[0]}


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_exact_effects_in_every_grad_mode(net, mode):
    model, layers, shape = net
    want = actviz.effects(model, _input_made_in(shape, "plain"), layers, method="exact", channels=4)
    got = _in_mode(
        mode, actviz.effects, model, _input_made_in(shape, mode), layers, method="exact", channels=4
    )
    for name in layers:
        np.testing.assert_array_equal(got[name].estimate, want[name].estimate)
        np.testing.assert_array_equal(got[name].exact, want[name].exact)
        np.testing.assert_array_equal(got[name].verified, want[name].verified)
        assert want[name].verified.sum() == 4
    assert np.abs(want[layers[0]].estimate).max() > 0
    assert got.warnings == want.warnings


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_visualize_in_every_grad_mode(net, mode):
    model, layers, _shape = net
    kwargs = dict(channels=[0, 1], steps=3, size=16, transforms="none")
    want = actviz.visualize(model, layers[0], **kwargs)
    got = _in_mode(mode, actviz.visualize, model, layers[0], **kwargs)
    np.testing.assert_array_equal(got.images, want.images)
    np.testing.assert_array_equal(got.objective, want.objective)
    np.testing.assert_array_equal(got.activations, want.activations)
    # The images moved from their start: there were gradients to follow.
    assert not np.array_equal(want.objective[0], want.objective[-1])


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_scan_in_every_grad_mode(net, mode):
    model, layers, shape = net
    data = torch.randn(6, *shape[1:], generator=torch.Generator().manual_seed(2))
    kwargs = dict(k=3, cache=False, num_workers=0, batch_size=4)
    want = actviz.scan(model, data, layers, **kwargs)
    got = _in_mode(mode, actviz.scan, model, data, layers, **kwargs)
    assert got.count == want.count == 6
    for name in layers:
        np.testing.assert_array_equal(got.results[name].values, want.results[name].values)
        np.testing.assert_array_equal(got.results[name].indices, want.results[name].indices)


def test_weights_made_in_inference_mode_warn_why_there_are_no_gradients():
    # Such weights can never join autograd: the capture says so instead of raising from
    # inside the model, and effects and visualize refuse with the reason.
    with torch.inference_mode():
        model = _conv_stack()
    x = torch.randn(1, 3, 12, 12)
    cap = actviz.capture(model, x, ["0"])
    assert cap.input_grads is None and cap["0"].grad_output is None
    assert any("inference_mode" in w and "autograd" in w for w in cap.warnings)
    with torch.no_grad():
        reference = _conv_stack()(x)
    assert torch.equal(cap.output, reference)
    with pytest.raises(ValueError, match="inference_mode"):
        actviz.effects(model, x, ["0"])
    with pytest.raises(ValueError, match="inference_mode"):
        actviz.visualize(model, "0", steps=2, size=8)
