"""A model's state before and after something ran on it (weights, train/eval flags, in-place
flags, grads), for the tests that check a capture or an edit leaves the model as it was."""

from __future__ import annotations

import torch
from torch import nn

from actviz.testing import assert_no_hooks

INPLACE_NAMES: dict[int, set[str]] = {}


def snapshot(model: nn.Module):
    """What :func:`assert_same` compares: state dict, module flags, parameter grads."""
    INPLACE_NAMES[id(model)] = {
        n for n, m in model.named_modules() if getattr(m, "inplace", False) is True
    }
    return (
        {k: v.clone() for k, v in model.state_dict().items()},
        [(n, m.training) for n, m in model.named_modules()],
        [
            (n, p.requires_grad, None if p.grad is None else p.grad.clone())
            for n, p in model.named_parameters()
        ],
    )


def assert_same(model: nn.Module, before) -> None:
    """Assert ``model`` is as :func:`snapshot` saw it (in-place ReLUs in place again)."""
    state, flags, params = before
    after = model.state_dict()
    assert state.keys() == after.keys()
    for k, v in state.items():
        assert torch.equal(v, after[k]), f"state_dict entry {k} changed"
    assert flags == [(n, m.training) for n, m in model.named_modules()]
    # in-place modules run out of place during a capture; their flag is back afterwards
    for name, m in model.named_modules():
        if isinstance(m, nn.ReLU) and name in INPLACE_NAMES.get(id(model), ()):
            assert m.inplace, f"{name}.inplace not restored"
    for (n, rg, g), (n2, p) in zip(params, model.named_parameters(), strict=True):
        assert n == n2 and p.requires_grad == rg, n
        assert (g is None and p.grad is None) or torch.equal(g, p.grad), f"{n}.grad changed"
    assert_no_hooks(model)
