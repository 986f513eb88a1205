"""The CUDA checks' comparison logic, run CPU against CPU (and the section's skip without CUDA)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from actviz.bench import cuda_bench


def _conv_flatten_linear() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)
    ).eval()


def test_same_device_capture_compares_every_tensor_as_equal():
    got = cuda_bench.compare_devices(
        "tiny", _conv_flatten_linear(), torch.randn(1, 3, 8, 8), None, "cpu"
    )
    # 4 leaves x (output, grad_output) + the input gradient
    assert (got["layers"], got["tensors"], got["ok"]) == (4, 9, True)
    assert got["out_rel"] == got["grad_rel"] == got["vs_bare_rel"] == got["bare_grad_rel"] == 0.0


def test_relative_difference_is_scaled_by_the_reference():
    b = torch.tensor([[2.0, -4.0]])
    assert cuda_bench._rel(b + torch.tensor([[0.0, 0.5]]), b) == 0.125
    assert cuda_bench._rel(torch.zeros(3), torch.zeros(2)) == float("inf")


def test_exact_fp32_restores_the_tf32_settings():
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    with cuda_bench.exact_fp32():
        assert not torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32
    assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only answer")
def test_section_says_it_skipped_without_cuda(capsys):
    summary: dict = {}
    cuda_bench.run(True, summary)
    assert summary == {}
    assert "no CUDA device" in capsys.readouterr().out
