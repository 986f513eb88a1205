"""Records to the host in one transfer per device and dtype (actviz.core.capture.to_host)."""

from __future__ import annotations

import pytest
import torch
import torchvision

from actviz.core import capture as transfer
from actviz.core.capture import capture, to_host

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_cpu_tensors_are_left_out():
    assert to_host([torch.ones(2), torch.zeros(3, 1)]) == {}


@cuda
def test_each_distinct_tensor_is_copied_once_with_its_values():
    a = torch.randn(2, 3, device="cuda")
    b = torch.randn(4, 5, 6, 7, device="cuda").to(memory_format=torch.channels_last)
    c = torch.arange(5, device="cuda")  # another dtype: its own transfer
    host = to_host([a, b, a, c, torch.ones(1)])
    assert set(host) == {id(a), id(b), id(c)}
    for t in (a, b, c):
        got = host[id(t)]
        assert got.device.type == "cpu" and got.shape == t.shape and got.dtype == t.dtype
        assert torch.equal(got, t.cpu())


@cuda
def test_a_transfer_larger_than_the_staging_buffer_arrives_whole(monkeypatch):
    monkeypatch.setattr(transfer, "STAGING_BYTES", 4096)
    monkeypatch.setattr(transfer, "DIRECT_BYTES", 0)
    a = torch.randn(3, 1000, device="cuda")  # 12,000 bytes: three chunks
    b = torch.randn(7, device="cuda")
    host = to_host([a, b])
    assert torch.equal(host[id(a)], a.cpu()) and torch.equal(host[id(b)], b.cpu())


@cuda
def test_a_cuda_capture_shares_one_host_tensor_between_an_output_and_the_next_input():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval().cuda()
    x = torch.randn(1, 3, 64, 64, device="cuda")
    cap = capture(model, x, ["conv1", "bn1"])
    conv, bn = cap["conv1"], cap["bn1"]
    assert conv.output.device.type == "cpu"
    assert bn.inputs[0] is conv.output  # one copy of one value
    with torch.no_grad():
        ref = model.conv1(x).cpu()
    assert torch.equal(conv.output, ref)
