"""Scans that record each image's pooled vector: equal to per-image captures, resumable, budgeted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.data import ScanCancelled, scan
from actviz.data.scan import estimate_memory
from actviz.data.scan_result import ScanTooLarge
from actviz.io.input_files import open_input
from tests.data.conftest import LAYERS, assert_same_scan, tiny_net, write_images

# float16 storage: a stored value is the float32 mean rounded to 11 significant bits, so it
# is within half a float16 step (2**-11 relative) of the capture's mean, plus 1e-5.
F16 = {"rtol": 2.0**-11, "atol": 1e-5}


def _paths(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.png"), key=lambda p: p.relative_to(folder).as_posix())


def _capture_means(net: nn.Module, inputs, layer: str, axis: int = 1) -> np.ndarray:
    """Per input through actviz.capture: the mean over every dimension but batch and channels."""
    rows = []
    for x in inputs:
        out = actviz.capture(net, x, [layer], gradients=False, keep_inputs=False)[layer].tensor
        out = out.double().movedim(axis, 1)
        rows.append(out.reshape(out.shape[0], out.shape[1], -1).mean(-1)[0].numpy())
    return np.array(rows)


def test_embeddings_equal_per_image_capture_means(image_folder):
    net = tiny_net()
    result = scan(
        net, image_folder, LAYERS, k=3, batch_size=16, num_workers=0, cache=False, embeddings=True
    )
    inputs = [open_input(p, model=net).value for p in _paths(image_folder)]
    assert result.embedding_layers == tuple(LAYERS)
    for layer in LAYERS:
        emb = result.embeddings(layer)
        expected = _capture_means(net, inputs, layer)
        assert emb.vectors.dtype == np.float16 and emb.vectors.shape == expected.shape
        assert not emb.vectors.flags.writeable
        np.testing.assert_allclose(emb.vectors.astype(np.float64), expected, **F16)
        assert list(emb.indices) == list(range(60))
        assert emb.sources == result.sources
        # ImageFolder classes: odd images are in "a", even ones in "b" (see write_images).
        names = [Path(s).parent.name for s in emb.sources]
        assert emb.class_names == ("a", "b")
        assert [emb.class_names[i] for i in emb.labels] == names
    # The Linear layer's output is (N, 3): its vector is the output itself.
    np.testing.assert_allclose(
        result.embeddings("7").vectors.astype(np.float64),
        np.array([net(x).detach()[0].double().numpy() for x in inputs]),
        **F16,
    )


class _Tokens(nn.Module):
    """(N, C, H, W) -> (N, H*W, C): a sequence of tokens."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2).transpose(1, 2)


def test_sequence_outputs_pool_over_tokens():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), _Tokens(), nn.Linear(4, 5), nn.GELU()).eval()
    data = torch.randn(12, 3, 6, 6)
    result = scan(net, data, ["2", "3"], k=2, batch_size=5, cache=False, embeddings=["2"])
    assert result.embedding_layers == ("2",)
    emb = result.embeddings("2")
    assert emb.axis == 2 and emb.vectors.shape == (12, 5) and emb.labels is None
    expected = _capture_means(net, [x[None] for x in data], "2", axis=2)
    np.testing.assert_allclose(emb.vectors.astype(np.float64), expected, **F16)
    with pytest.raises(KeyError, match="without embeddings"):
        result.embeddings("3")
    # A capture of one input lands on its own scanned image, similarity 1.
    cap = actviz.capture(net, data[4:5], ["2"], gradients=False)
    best = result.neighbours("2", cap, k=2)[0]
    assert best.index == 4 and best.source == 4 and best.similarity == pytest.approx(1, abs=1e-3)


class _ChannelsLast(nn.Module):
    """(N, C, H, W) -> (N, H, W, C), as timm's NHWC stages give."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1)


def test_channels_last_outputs_pool_over_positions():
    torch.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), _ChannelsLast(), nn.LayerNorm(4)).eval()
    data = torch.randn(10, 3, 7, 5)  # H=5 and W=3 after the conv, neither equal to C=4
    result = scan(net, data, ["2"], k=2, batch_size=4, cache=False, embeddings=True)
    emb = result.embeddings("2")
    assert emb.axis == 3 and emb.vectors.shape == (10, 4)
    expected = _capture_means(net, [x[None] for x in data], "2", axis=3)
    np.testing.assert_allclose(emb.vectors.astype(np.float64), expected, **F16)
    assert estimate_memory(net, data, ["2"]).widths == {"2": 4}


def test_embeddings_survive_a_cancelled_and_resumed_scan(image_folder):
    net = tiny_net()
    with pytest.raises(ScanCancelled) as info:
        scan(
            net,
            image_folder,
            LAYERS,
            k=3,
            batch_size=8,
            num_workers=0,
            embeddings=True,
            should_stop=iter([False] * 3 + [True]).__next__,
        )
    partial = info.value.partial
    assert partial is not None and partial.count == 24
    assert len(partial.embeddings("4")) == 24
    whole = scan(
        net, image_folder, LAYERS, k=3, batch_size=16, num_workers=0, cache=False, embeddings=True
    )
    # A killed run may have appended rows the state does not cover: they are cut off.
    rows = next(Path(p) for p in (Path.home() / ".cache").rglob("4.f16"))
    with open(rows, "ab") as fh:
        fh.write(b"\x00" * 12 * 5)
    seen = []
    resumed = scan(
        net,
        image_folder,
        LAYERS,
        k=3,
        batch_size=8,
        num_workers=0,
        embeddings=True,
        progress=lambda done, total, rate: seen.append(done),
    )
    assert seen[0] == 32  # only the images left were run
    assert_same_scan(resumed, whole)
    for layer in LAYERS:
        np.testing.assert_array_equal(
            resumed.embeddings(layer).vectors, whole.embeddings(layer).vectors
        )
    again = scan(net, image_folder, LAYERS, k=3, num_workers=0, embeddings=True)
    assert again.from_cache
    np.testing.assert_array_equal(again.embeddings("1").vectors, whole.embeddings("1").vectors)


def test_a_cache_without_embeddings_is_rescanned_for_them(image_folder):
    net = tiny_net()
    plain = scan(net, image_folder, ["4"], k=3, num_workers=0)
    assert plain.embedding_layers == ()
    with pytest.raises(KeyError):
        plain.embeddings("4")
    seen = []
    result = scan(
        net,
        image_folder,
        ["4"],
        k=3,
        batch_size=30,
        num_workers=0,
        embeddings=True,
        progress=lambda done, total, rate: seen.append(done),
    )
    assert seen == [30, 60] and not result.from_cache
    assert len(result.embeddings("4")) == 60
    # Reopened without asking for them, the saved vectors stay for a later scan.
    assert scan(net, image_folder, ["4"], k=3, num_workers=0).from_cache
    assert scan(net, image_folder, ["4"], k=3, num_workers=0, embeddings=True).from_cache


def test_unreadable_images_have_no_vector(image_folder):
    bad = image_folder / "a" / "broken.png"
    bad.write_bytes(b"not an image")
    result = scan(net := tiny_net(), image_folder, ["4"], k=3, num_workers=0, embeddings=True)
    emb = result.embeddings("4")
    broken = result.sources.index(str(bad.resolve()))
    assert len(emb) == 60 and broken not in emb.indices
    # and the same from the cache
    again = scan(net, image_folder, ["4"], k=3, num_workers=0, embeddings=True)
    assert again.from_cache
    np.testing.assert_array_equal(again.embeddings("4").indices, emb.indices)


def test_memory_is_estimated_and_a_scan_over_the_budget_is_refused(image_folder, no_hooks_left):
    net = tiny_net().train()
    need = estimate_memory(net, image_folder, LAYERS)
    # channels of the layers: 4, 6 and the Linear's 3; 60 images, 2 bytes a value
    assert dict(need.widths) == {"1": 4, "4": 6, "7": 3}
    assert need.images == 60 and need.embedding_bytes == 60 * 13 * 2
    assert "60 images x 13 values" in need.describe()
    assert net.training and all(m.training for m in net.modules())  # the probe ran in eval
    with pytest.raises(ScanTooLarge, match="memory budget") as info:
        scan(
            net,
            image_folder,
            LAYERS,
            num_workers=0,
            embeddings=True,
            memory_budget=need.embedding_bytes - 1,
        )
    assert str(info.value).startswith("embeddings: 60 images x 13 values in 3 layers = 1.5 KiB")
    assert not any((Path.home() / ".cache").rglob("*.log"))  # refused before anything ran
    ok = scan(
        net,
        image_folder,
        LAYERS,
        num_workers=0,
        embeddings=True,
        memory_budget=need.embedding_bytes,
    )
    assert ok.count == 60
    # A list naming a layer that is not scanned is a mistake.
    with pytest.raises(ValueError, match="not scanned"):
        scan(net, image_folder, ["4"], embeddings=["1"])


def test_embeddings_do_not_change_the_scan(image_folder):
    net = tiny_net()
    a = scan(net, image_folder, LAYERS, k=4, batch_size=16, num_workers=0, cache=False)
    b = scan(
        net, image_folder, LAYERS, k=4, batch_size=16, num_workers=0, cache=False, embeddings=True
    )
    assert_same_scan(a, b, exact=True)


def test_scan_writes_more_images_in_the_same_vectors_when_the_folder_grows(tmp_path):
    folder = tmp_path / "grow"
    write_images(folder, 20)
    net = tiny_net()
    scan(net, folder, ["4"], k=3, num_workers=0, embeddings=True)
    write_images(folder, 10, seed=3, start=20)
    grown = scan(net, folder, ["4"], k=3, num_workers=0, embeddings=True)
    whole = scan(net, folder, ["4"], k=3, num_workers=0, embeddings=True, cache=False)
    np.testing.assert_array_equal(grown.embeddings("4").vectors, whole.embeddings("4").vectors)


def test_one_probe_sizes_the_batches_and_the_embeddings(image_folder, monkeypatch):
    import importlib

    scan_module = importlib.import_module("actviz.data.scan_sizing")  # where the probe is
    calls = []
    real = scan_module._probe_forward
    monkeypatch.setattr(scan_module, "_probe_forward", lambda *a: calls.append(a[2]) or real(*a))
    net = tiny_net()
    plain, embed = [], []
    scan(
        net,
        image_folder,
        ["4"],
        num_workers=0,
        cache=False,
        progress=lambda d, t, r: plain.append(d),
    )
    assert len(calls) == 1  # the batch-size probe
    scan(
        net,
        image_folder,
        ["4"],
        num_workers=0,
        cache=False,
        embeddings=True,
        progress=lambda d, t, r: embed.append(d),
    )
    assert len(calls) == 2 and list(calls[1]) == ["4"]  # one pass did both
    assert embed == plain  # the same batches
