"""Models larger than one device: a tiny model offloaded to disk with accelerate."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.bench.tiny_models import TINY_CPU_BYTES, TINY_LAYERS, offloaded_tiny
from actviz.bench.tiny_models import tiny_net as tiny
from actviz.io.errors import ModelLoadError

pytest.importorskip("accelerate")

LAYERS = list(TINY_LAYERS)


def offloaded(tmp_path: Path) -> nn.Module:
    # The first convolution stays in memory, the rest goes to disk.
    return offloaded_tiny(tmp_path / "off")


def hooks(model: nn.Module) -> dict[str, object]:
    return {n: m.__dict__.get("forward") for n, m in model.named_modules()}


def test_offloaded_capture_is_bit_identical_and_hooks_stay(tmp_path: Path):
    whole = tiny()
    big = offloaded(tmp_path)
    placed = dict(big.hf_device_map)
    assert "disk" in placed.values() and "cpu" in placed.values()
    assert big[4].weight.is_meta  # really on disk, not in memory
    before = hooks(big)
    x = torch.rand(2, 3, 16, 16)
    a = actviz.capture(whole, x, LAYERS, target=3)
    b = actviz.capture(big, x, LAYERS, target=3)
    for layer in LAYERS:
        ra, rb = a.records[layer][0], b.records[layer][0]
        assert rb.output.device.type == "cpu"
        assert torch.equal(ra.output, rb.output)
        assert torch.equal(ra.grad_output, rb.grad_output)
    assert torch.equal(a.output, b.output)
    # accelerate's hooks are where they were, and still work.
    assert hooks(big) == before
    assert big[4]._hf_hook.offload and big[4].weight.is_meta
    assert torch.equal(big(x), whole(x))


@pytest.mark.parametrize("mode", ["pin", "always", "never"])
def test_offloaded_forward_capture_keeps_exact_records_in_every_pool_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
):
    # Forward-only captures of large maps (512 KiB each): records kept warm under the heap
    # pin, copied into the pool, or plain references (core/pool.py) are all the whole model's
    # values bit for bit, and none is overwritten by later forwards of the placed model.
    from actviz.core import allocator, pool

    monkeypatch.setattr(allocator, "_tuned", False)
    monkeypatch.setattr(pool, "MODE", mode)
    monkeypatch.setattr(pool, "HEAP_PIN", pool.HeapPin())
    whole = tiny()
    big = offloaded(tmp_path)
    before = hooks(big)
    x, y = torch.rand(2, 3, 64, 64), torch.rand(2, 3, 64, 64)
    a = actviz.capture(whole, x, LAYERS, gradients=False)
    b = actviz.capture(big, x, LAYERS, gradients=False)
    kept = {n: (b[n].output, b[n].inputs[0]) for n in LAYERS}
    for n in LAYERS:
        assert torch.equal(a[n].output, kept[n][0]) and torch.equal(a[n].inputs[0], kept[n][1])
    del b
    for _ in range(3):
        actviz.capture(big, y, LAYERS, gradients=False)
        with torch.no_grad():
            big(y)
    for n in LAYERS:
        assert torch.equal(a[n].output, kept[n][0]) and torch.equal(a[n].inputs[0], kept[n][1])
    assert hooks(big) == before
    assert big[4]._hf_hook.offload and big[4].weight.is_meta
    assert torch.equal(big(x), whole(x))
    pool.release_memory()


def test_offloaded_edits_effects_and_scan(tmp_path: Path):
    whole = tiny()
    big = offloaded(tmp_path)
    x = torch.rand(1, 3, 16, 16)
    ea = actviz.effects(whole, x, ["2", "4"], target=3, method="exact", channels=4)
    eb = actviz.effects(big, x, ["2", "4"], target=3, method="exact", channels=4)
    for layer in ("2", "4"):
        np.testing.assert_array_equal(ea.results[layer].estimate, eb.results[layer].estimate)
        np.testing.assert_array_equal(ea.results[layer].exact, eb.results[layer].exact)
    cut = {"4": [actviz.edits.ablate([0, 1])]}
    ca = actviz.capture(whole, x, ["8"], edits=cut, gradients=False)
    cb = actviz.capture(big, x, ["8"], edits=cut, gradients=False)
    assert torch.equal(ca.records["8"][0].output, cb.records["8"][0].output)
    data = torch.rand(10, 3, 16, 16)
    sa = actviz.scan(whole, data, LAYERS[:3], k=3, batch_size=4, cache=False)
    sb = actviz.scan(big, data, LAYERS[:3], k=3, batch_size=4, cache="offloaded")
    for layer in LAYERS[:3]:
        np.testing.assert_array_equal(sa.results[layer].values, sb.results[layer].values)
        np.testing.assert_array_equal(sa.results[layer].indices, sb.results[layer].indices)
    assert big[4].weight.is_meta


def test_disk_needs_an_offload_folder():
    with pytest.raises(ModelLoadError, match="offload_folder"):
        actviz.load_model(tiny(), device_map="auto", max_memory={"cpu": TINY_CPU_BYTES})
    with pytest.raises(ModelLoadError, match="device_map"):
        actviz.load_model(tiny(), max_memory={"cpu": TINY_CPU_BYTES})


def test_whole_copy_is_not_touched(tmp_path: Path):
    net = tiny()
    ref = copy.deepcopy(net)
    actviz.load_model(
        net, device_map="auto", max_memory={"cpu": TINY_CPU_BYTES}, offload_folder=tmp_path
    )
    # The offload folder holds the weights that left memory, as accelerate writes them.
    assert (tmp_path / "index.json").exists()
    assert torch.equal(ref(torch.ones(1, 3, 8, 8)), net(torch.ones(1, 3, 8, 8)))
