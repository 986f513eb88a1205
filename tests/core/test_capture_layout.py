"""Same layout, same numbers: capturing every leaf leaves each module's input strides and the
model's output bit-identical to an uncaptured forward (channels-last and permuted tensors)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
import torchvision
from torch import nn

import actviz
from actviz.core.capture import leaf_names
from actviz.core.structures import clone_keep_layout
from tests.conftest import assert_no_hooks


def input_strides(model: nn.Module, run) -> dict[str, list[tuple]]:
    """Strides of every leaf's tensor inputs, per call, seen by a plain pre-hook during run()."""
    seen: dict[str, list[tuple]] = {}
    modules = dict(model.named_modules())

    def pre(name: str):
        def hook(_module, args):
            seen.setdefault(name, []).append(
                tuple(a.stride() for a in args if isinstance(a, torch.Tensor))
            )

        return hook

    handles = [modules[n].register_forward_pre_hook(pre(n)) for n in leaf_names(model)]
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    return seen


def assert_capture_is_bit_identical(model: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        reference = model(x)
    plain = input_strides(model, lambda: model(x))
    for gradients in (False, True):
        cap = actviz.capture(model, x, None, gradients=gradients)
        assert torch.equal(cap.output, reference), f"gradients={gradients}"
        captured = input_strides(
            model, lambda g=gradients: actviz.capture(model, x, None, gradients=g)
        )
        changed = [n for n in plain if plain[n] != captured.get(n)]
        assert not changed, f"{len(changed)} modules saw other strides, first {changed[:3]}"
    assert_no_hooks(model)


def test_convnext_tiny_every_leaf_bit_identical():
    torch.manual_seed(0)
    model = torchvision.models.convnext_tiny(weights=None).eval()
    x = torch.randn(1, 3, 64, 64)
    # The trap: ConvNeXt's depthwise convolutions give channels-last outputs, and a
    # (1, C, H, W) view_as() of one resets the batch stride, which turns the next
    # convolution back to NCHW and its rounding with it.
    assert_capture_is_bit_identical(model, x)


def test_channels_last_resnet18_every_leaf_bit_identical():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval().to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 64, 64).to(memory_format=torch.channels_last)
    assert_capture_is_bit_identical(model, x)


@pytest.mark.skipif(importlib.util.find_spec("timm") is None, reason="timm is not installed")
def test_timm_convnext_atto_every_leaf_bit_identical():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False).eval()
    assert_capture_is_bit_identical(model, torch.randn(1, 3, 64, 64))


def test_copies_keep_strides_and_inputs_keep_theirs():
    base = torch.randn(2, 8, 5, 6)
    for view in (
        base[:, :3],  # a gapped channel slice
        base[..., ::2],
        base.permute(0, 2, 3, 1),
        base.to(memory_format=torch.channels_last),
        base[:1].to(memory_format=torch.channels_last),  # size-1 batch: its stride kept too
    ):
        copy = clone_keep_layout(view)
        assert copy.stride() == view.stride() and torch.equal(copy, view)
        assert copy.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()
    expanded = base[:1].expand(3, 8, 5, 6)  # overlapping: copied densely
    assert torch.equal(clone_keep_layout(expanded), expanded)

    class Strides(nn.Module):
        def forward(self, x):
            return torch.tensor(x.stride(), dtype=torch.float32)

    gapped = base[:, :, :, ::2]
    cap = actviz.capture(Strides(), gapped, gradients=False)
    assert tuple(int(s) for s in cap.output) == gapped.stride()
    assert cap.inputs.stride() == gapped.stride()
