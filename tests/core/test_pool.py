"""Large CPU records live in pooled memory (core/pool.py): exact, immutable, reused, released."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from actviz.core import allocator, pool
from actviz.core.capture import capture


def _wide_conv_net() -> nn.Module:
    torch.manual_seed(0)
    # 16 x 64 x 64 float32 = 256 KiB per map: above the pool's threshold.
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(16, 16, 3, padding=1)
    ).eval()


def test_pooled_records_are_exact_copies_with_their_strides(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", "always")
    model = _wide_conv_net().to(memory_format=torch.channels_last)
    x = torch.randn(1, 3, 64, 64).to(memory_format=torch.channels_last)
    with torch.no_grad():
        a = model[0](x)
        b = model[2](torch.relu(a))
    made = pool.POOL.made + pool.POOL.reused
    cap = capture(model, x, ["0", "2"], gradients=False)
    assert pool.POOL.made + pool.POOL.reused >= made + 2  # both maps came from the pool
    assert torch.equal(cap["0"].output, a) and torch.equal(cap["2"].output, b)
    assert cap["0"].output.stride() == a.stride()  # channels-last kept
    # The input of layer 2 is the ReLU's output, not layer 0's: layer 0 stays as it was.
    assert float(cap["0"].output.min()) < 0


def test_a_buffer_is_reused_only_once_nothing_views_it(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", "always")
    model = _wide_conv_net()
    x1, x2 = torch.randn(1, 3, 64, 64), torch.randn(1, 3, 64, 64)
    first = capture(model, x1, ["2"], gradients=False)
    kept = first["2"].output[0, :4]  # a view: keeps the whole buffer alive
    expected = kept.clone()
    del first
    for _ in range(3):  # later captures of the same shapes must not write into it
        capture(model, x2, ["2"], gradients=False)
    assert torch.equal(kept, expected)
    reused = pool.POOL.reused
    del kept
    capture(model, x2, ["2"], gradients=False)
    assert pool.POOL.reused > reused  # now its buffer came back and was used again


def test_release_memory_gives_back_free_buffers(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", "always")
    capture(_wide_conv_net(), torch.randn(1, 3, 64, 64), None, gradients=False)
    assert pool.POOL.free_bytes >= 2 * 16 * 64 * 64 * 4
    assert pool.release_memory() > 0
    assert pool.POOL.free_bytes == 0
    assert pool.POOL.free_bytes <= pool.POOL.keep_bytes <= pool.MAX_KEEP


def test_a_tuned_process_keeps_references(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", True)
    monkeypatch.setattr(pool, "MODE", "always")
    before = (pool.POOL.made, pool.POOL.reused)
    cap = capture(_wide_conv_net(), torch.randn(1, 3, 64, 64), None, gradients=False)
    assert (pool.POOL.made, pool.POOL.reused) == before
    assert cap["2"].output.shape == (1, 16, 64, 64)


def test_small_and_gapped_tensors_are_not_pooled() -> None:
    assert pool.POOL.copy(torch.zeros(8)) is None  # under the threshold
    big = torch.zeros(4, 64, 64, 64)
    assert pool.POOL.copy(big[:, ::2]) is None  # a gapped view: the caller clones it
    copy = pool.POOL.copy(big.permute(0, 2, 3, 1))
    assert copy is not None and copy.stride() == big.permute(0, 2, 3, 1).stride()


def test_a_model_gets_the_pin_then_the_pool_after_captures_that_fault(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "HEAP_PIN", pool.HeapPin())
    faulty, quiet = _wide_conv_net(), _wide_conv_net()
    mib = 2**20
    # The first capture always touches new memory: not counted.
    pool.observe(faulty, faults=mib // 4096, nbytes=mib)
    pool.observe(quiet, faults=mib // 4096, nbytes=mib)
    assert not pool.wanted(faulty) and not pool.pinned(faulty)
    pool.observe(faulty, faults=mib // 4096, nbytes=mib)  # faulted in all it recorded
    pool.observe(quiet, faults=0, nbytes=mib)  # glibc reused the freed records
    assert not pool.wanted(faulty) and not pool.pinned(faulty)  # not a pattern yet
    pool.observe(faulty, faults=mib // 16384, nbytes=mib)  # a quarter: still costly
    pool.observe(quiet, faults=mib // 4096, nbytes=mib)
    heap = pool.HEAP_PIN.available()  # Linux with glibc: the pin first, no copies
    assert pool.pinned(faulty) == heap and pool.wanted(faulty) != heap
    assert not pool.pinned(quiet) and not pool.wanted(quiet)
    # Still faulting with the pin: the copies.
    pool.observe(faulty, faults=mib // 4096, nbytes=mib)
    pool.observe(faulty, faults=mib // 4096, nbytes=mib)
    assert pool.wanted(faulty) and not pool.pinned(faulty)
    monkeypatch.setattr(allocator, "_tuned", True)
    assert not pool.wanted(faulty)  # a tuned process keeps references


def test_auto_mode_pools_a_model_whose_captures_fault(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "HEAP_PIN", pool.HeapPin())
    model = _wide_conv_net()
    x = torch.randn(1, 3, 64, 64)
    counts = iter([0, 10**6] * 6)  # every forward faults a lot
    monkeypatch.setattr(pool, "minor_faults", lambda: next(counts))
    made = pool.POOL.made + pool.POOL.reused
    for _ in range(3):
        capture(model, x, ["2"], gradients=False)
    if pool.HEAP_PIN.available():  # first references under a heap pin, then the copies
        assert pool.pinned(model) and pool.HEAP_PIN.storage is not None
        for _ in range(2):
            capture(model, x, ["2"], gradients=False)
    assert pool.POOL.made + pool.POOL.reused == made and pool.wanted(model)
    with torch.no_grad():
        expected = model(x)
    cap = capture(model, x, ["2"], gradients=False)  # now pooled, values exact
    assert pool.POOL.made + pool.POOL.reused == made + 2  # the layer's input and output
    assert torch.equal(cap["2"].output, expected)


def _spans(tensors) -> list[tuple[int, int]]:
    return [
        (
            t.untyped_storage().data_ptr(),
            t.untyped_storage().data_ptr() + t.untyped_storage().nbytes(),
        )
        for t in tensors
    ]


def test_pinned_records_are_the_forwards_own_and_stay_intact(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", "pin")
    monkeypatch.setattr(pool, "HEAP_PIN", pool.HeapPin())
    model = _wide_conv_net()
    x1, x2 = torch.randn(2, 3, 64, 64), torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        a = model[0](x1)
        b = model[2](torch.relu(a))
    made = (pool.POOL.made, pool.POOL.reused)
    first = capture(model, x1, ["0", "2"], gradients=False)
    assert (pool.POOL.made, pool.POOL.reused) == made  # nothing copied into the pool
    assert torch.equal(first["0"].output, a) and torch.equal(first["2"].output, b)
    kept = [first["0"].output, first["2"].inputs[0], first["2"].output]
    expected = [t.clone() for t in kept]
    if pool.HEAP_PIN.available():  # the pin is one of this capture's large records
        assert pool.HEAP_PIN.address in {t.data_ptr() for t in kept}
        assert pool.HEAP_PIN.storage.data_ptr() in {lo for lo, _ in _spans(kept)}
    pinned = pool.HEAP_PIN.storage
    del first
    for _ in range(3):  # later forwards and captures never write where a record lives
        later = capture(model, x2, ["0", "2"], gradients=False)
        with torch.no_grad():
            model(x2)
        new = [later["0"].output, later["2"].inputs[0], later["2"].output]
        for lo, hi in _spans(new):
            assert all(hi <= klo or khi <= lo for klo, khi in _spans(kept))
    for t, e in zip(kept, expected, strict=True):
        assert torch.equal(t, e)
    assert float(kept[0].min()) < 0  # layer 0's output, not the in-place ReLU's
    if pinned is not None:
        pool.release_memory()
        assert pool.HEAP_PIN.storage is None and pool.HEAP_PIN.address == 0


def test_a_capture_larger_than_the_pool_keeps_lets_the_pin_go(monkeypatch) -> None:
    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", "pin")
    monkeypatch.setattr(pool, "HEAP_PIN", pool.HeapPin())
    if not pool.HEAP_PIN.available():
        pytest.skip("no glibc [heap] here: nothing is ever pinned")
    model, x = _wide_conv_net(), torch.randn(2, 3, 64, 64)
    cap = capture(model, x, ["0", "2"], gradients=False)
    assert pool.HEAP_PIN.storage is not None
    monkeypatch.setattr(pool, "MAX_KEEP", cap.nbytes - 1)
    capture(model, x, ["0", "2"], gradients=False)
    assert pool.HEAP_PIN.storage is None and pool.HEAP_PIN.address == 0
