"""Two captures of one model at once (two windows on the same model, a script beside its
window) take turns: each gets its own records, none the other's or none at all."""

from __future__ import annotations

import threading
import time

import torch
from torch import nn

import actviz


class _Slow(nn.Module):
    """Sleeps in its forward, so a second capture starts while the first runs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        return x * 2


def test_two_threads_capturing_one_model_each_get_their_records():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _Slow(), nn.ReLU(), nn.Linear(4, 2)).eval()
    inputs = [torch.randn(1, 4), torch.randn(1, 4) + 3]
    caps: list = [None, None]

    def run(i: int) -> None:
        caps[i] = actviz.capture(model, inputs[i], ["0", "1", "3"], target=0)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for cap, x in zip(caps, inputs, strict=True):
        assert cap.names == ["0", "1", "3"]
        with torch.no_grad():
            expected = model[0](x)
        torch.testing.assert_close(cap["0"].output, expected, rtol=0, atol=0)
        torch.testing.assert_close(cap["1"].output, expected * 2, rtol=0, atol=0)
        assert cap["3"].grad_output is not None
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    assert all("forward" not in vars(m) for m in model.modules())
