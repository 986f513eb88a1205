"""actviz.scan: equal to a brute-force loop, resumable, incremental, cached per weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import actviz
from actviz.data import ScanCancelled, scan
from actviz.io.errors import InputError
from actviz.io.input_files import open_input
from tests.data.conftest import LAYERS, assert_same_scan, tiny_net, write_images


def brute_force(net, inputs, layers, k):
    """Per image through actviz.capture, then sort by (-value, index): the definition."""
    per_layer = {layer: ([], [], []) for layer in layers}
    for x in inputs:
        cap = actviz.capture(net, x, layers, gradients=False, keep_inputs=False)
        for layer in layers:
            maxima, means, locs = per_layer[layer]
            out = cap[layer].output[0].double().numpy()
            flat = out.reshape(out.shape[0], -1)
            arg = flat.argmax(axis=1)
            maxima.append(flat.max(axis=1))
            means.append(flat.mean(axis=1))
            width = out.shape[-1]
            locs.append(np.stack([arg // width, arg % width], axis=1) if out.ndim == 3 else None)
    result = {}
    for layer, (maxima, means, locs) in per_layer.items():
        maxima, means = np.array(maxima), np.array(means)  # (N, C)
        tops = []
        for c in range(maxima.shape[1]):
            order = np.lexsort((np.arange(len(maxima)), -maxima[:, c]))[:k]
            loc = [None if locs[i] is None else tuple(int(v) for v in locs[i][c]) for i in order]
            tops.append((order.tolist(), maxima[order, c].tolist(), loc))
        result[layer] = (tops, means, maxima)
    return result


def test_scan_equals_brute_force_on_60_images(image_folder):
    net = tiny_net()
    seen = []
    result = scan(
        net,
        image_folder,
        LAYERS,
        k=5,
        batch_size=16,
        num_workers=0,
        cache=False,
        progress=lambda done, total, rate: seen.append((done, total)),
    )
    assert seen == [(16, 60), (32, 60), (48, 60), (60, 60)]
    assert result.count == 60 and result.skipped == () and result.cache_path is None
    assert result.class_names == ("a", "b")
    paths = [
        str(p)
        for p in sorted(
            image_folder.rglob("*.png"), key=lambda p: p.relative_to(image_folder).as_posix()
        )
    ]
    assert list(result.sources) == [str(Path(p).resolve()) for p in paths]
    inputs = [open_input(p, model=net).value for p in paths]  # a single run's preprocessing
    ties = 0
    expected = brute_force(net, inputs, LAYERS, 5)
    for layer in LAYERS:
        tops, means, maxima = expected[layer]
        assert result.channels(layer) == len(tops)
        for c, (order, values, locs) in enumerate(tops):
            entries = result.top(layer, c)
            assert [e.index for e in entries] == order
            assert [e.source for e in entries] == [result.sources[i] for i in order]
            assert [e.location for e in entries] == locs
            np.testing.assert_allclose([e.value for e in entries], values, rtol=1e-5, atol=1e-6)
            ties += len(values) - len(set(values))
        stats = result.stats(layer)
        np.testing.assert_allclose(stats.mean, means.mean(axis=0), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(stats.std, means.std(axis=0), rtol=1e-5, atol=1e-7)
        np.testing.assert_array_equal(stats.frac_positive, (maxima > 0).mean(axis=0))
    assert ties > 0  # the data has ties (duplicate images, exact zeros): order was checked
    assert result.dead("1").tolist() == [0]
    assert result.stats("1").frac_positive[0] == 0.0
    assert result.spatial("1") == (16, 16) and result.spatial("7") is None
    assert result.top("7", 0)[0].location is None


def test_integer_tensor_scan_is_bitwise_exact():
    # Integer inputs and weights: every sum is exact, so batches cannot change any value.
    net = tiny_net()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randint(-2, 3, p.shape, generator=torch.Generator().manual_seed(1)))
    data = torch.randint(0, 4, (60, 3, 8, 8), generator=torch.Generator().manual_seed(2)).float()
    data[30:40] = data[0:10]  # duplicates tie exactly
    # k=4 in batches of 7; k=20 in batches of 30 (120 new entries at once: located in slices)
    for k, batch_size in ((4, 7), (20, 30)):
        result = scan(net, data, ["4"], k=k, batch_size=batch_size, cache=False)
        tops, _, _ = brute_force(net, [x[None] for x in data], ["4"], k)["4"]
        for c, (order, values, locs) in enumerate(tops):
            entries = result.top("4", c)
            assert [(e.source, e.index, e.value, e.location) for e in entries] == list(
                zip(order, order, values, locs, strict=True)
            )


def test_interrupted_scan_resumes_and_equals_one_scan(image_folder):
    net = tiny_net()
    polls = []

    def stop_after_three() -> bool:
        polls.append(1)
        return len(polls) > 3

    with pytest.raises(ScanCancelled) as info:
        scan(
            net,
            image_folder,
            LAYERS,
            k=5,
            batch_size=8,
            num_workers=0,
            should_stop=stop_after_three,
        )
    assert info.value.partial is not None and info.value.partial.count == 24
    seen = []
    resumed = scan(
        net,
        image_folder,
        LAYERS,
        k=5,
        batch_size=8,
        num_workers=0,
        progress=lambda done, total, rate: seen.append(done),
    )
    assert seen[0] == 32 and seen[-1] == 60  # only the 36 images left were run
    assert not resumed.from_cache and resumed.cache_path is not None
    whole = scan(net, image_folder, LAYERS, k=5, batch_size=16, num_workers=0, cache=False)
    assert_same_scan(resumed, whole)
    again = scan(net, image_folder, LAYERS, k=5, num_workers=0)
    assert again.from_cache and again.cache_path == resumed.cache_path
    assert_same_scan(again, resumed, exact=True)


def _cancel_after(net, folder, layers, batches: int) -> None:
    """Scan in batches of 10 and cancel after ``batches`` of them (each saved)."""
    with pytest.raises(ScanCancelled):
        scan(
            net,
            folder,
            layers,
            k=3,
            batch_size=10,
            num_workers=0,
            should_stop=iter([False] * batches + [True]).__next__,
        )


def _resume_and_compare(net, folder, layers) -> int:
    """Scan again (resuming) and compare with one uncached scan; the first progress count."""
    seen = []
    resumed = scan(
        net,
        folder,
        layers,
        k=3,
        batch_size=10,
        num_workers=0,
        progress=lambda done, total, rate: seen.append(done),
    )
    assert_same_scan(resumed, scan(net, folder, layers, k=3, num_workers=0, cache=False))
    return seen[0]


def test_killed_scan_loses_at_most_the_last_batch(image_folder):
    net = tiny_net()
    _cancel_after(net, image_folder, ["4"], 2)
    # A kill between the log append and the state write leaves log lines the state does not
    # cover: they must be ignored.
    log = next(Path(p) for p in (Path.home() / ".cache").rglob("4.log"))
    with open(log, "a", encoding="utf-8") as fh:
        fh.write("D\t/not/scanned.png\t1:2\t\n")
    assert _resume_and_compare(net, image_folder, ["4"]) == 30


def test_added_images_are_scanned_alone(tmp_path):
    folder = tmp_path / "grow"
    write_images(folder, 40)
    net = tiny_net()
    first = scan(net, folder, LAYERS, k=5, batch_size=16, num_workers=0)
    assert first.count == 40
    write_images(folder, 20, seed=5, start=40)  # new names interleave with the old ones
    seen = []
    grown = scan(
        net,
        folder,
        LAYERS,
        k=5,
        batch_size=16,
        num_workers=0,
        progress=lambda done, total, rate: seen.append((done, total)),
    )
    assert seen == [(56, 60), (60, 60)]  # 40 from the cache, 16 + 4 new
    assert grown.count == 60 and not grown.from_cache
    assert_same_scan(grown, scan(net, folder, LAYERS, k=5, num_workers=0, cache=False))


def test_unreadable_files_are_skipped_and_counted(image_folder):
    (image_folder / "a" / "broken.png").write_bytes(b"not an image")
    good = image_folder / "b" / "img000.png"
    (image_folder / "b" / "truncated.png").write_bytes(good.read_bytes()[:60])
    net = tiny_net()
    result = scan(net, image_folder, LAYERS, k=3, batch_size=16, num_workers=0)
    assert result.count == 60 and len(result.sources) == 62
    names = [Path(s).name for s, _ in result.skipped]
    assert names == ["broken.png", "truncated.png"]
    assert "not a readable image" in result.skipped[0][1]
    assert "damaged image" in result.skipped[1][1]
    again = scan(net, image_folder, LAYERS, k=3, num_workers=0)
    assert again.from_cache and again.skipped == result.skipped


def test_cache_invalidated_when_weights_change(image_folder):
    net = tiny_net()
    before = scan(net, image_folder, ["4"], k=3, num_workers=0)
    with torch.no_grad():
        net[3].weight.mul_(-1.0)
    after = scan(net, image_folder, ["4"], k=3, num_workers=0)
    assert not after.from_cache and after.cache_path != before.cache_path
    assert_same_scan(after, scan(net, image_folder, ["4"], k=3, num_workers=0, cache=False))
    assert before.top("4", 2)[0].index != after.top("4", 2)[0].index


def test_bad_input_is_refused(tmp_path, image_folder):
    net = tiny_net()
    with pytest.raises(InputError, match="no such folder"):
        scan(net, tmp_path / "missing", LAYERS)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no images"):
        scan(net, tmp_path / "empty", LAYERS)
    with pytest.raises(ValueError, match="unknown layer"):
        scan(net, image_folder, ["nope"])
    with pytest.raises(InputError, match="input channels"):
        scan(net, torch.zeros(4, 2, 8, 8), LAYERS, cache=False)


def test_scan_leaves_the_model_as_found(image_folder, no_hooks_left):
    net = tiny_net().train()
    result = scan(net, image_folder, ["4"], k=2, num_workers=0, cache=False)
    assert net.training and all(m.training for m in net.modules())
    no_hooks_left(net)
    with pytest.raises(IndexError, match="out of range"):
        result.top("4", 6)
    with pytest.raises(KeyError, match="not scanned"):
        result.top("1", 0)
    assert result.stats("4").mean.flags.writeable is False


def test_nan_never_hides_a_maximum_and_1d_maps_locate_along_x():
    net = torch.nn.Sequential(torch.nn.Identity())
    data = torch.zeros(3, 2, 5)
    data[0, 0] = torch.tensor([1.0, float("nan"), 3.0, 0.5, 3.0])
    data[1, 0, 4] = 7.0
    data[2, 1] = float("nan")
    result = scan(net, data, ["0"], k=3, cache=False)
    top = result.top("0", 0)
    assert [(e.index, e.value, e.location) for e in top] == [
        (1, 7.0, (0, 4)),
        (0, 3.0, (0, 2)),  # the first of two equal maxima, NaN skipped
        (2, 0.0, (0, 0)),
    ]
    assert result.top("0", 1)[-1].value == -np.inf  # a map of NaN only ranks last


def test_a_layer_that_never_runs_is_reported_and_not_rescanned(image_folder):
    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = tiny_net()
            self.unused = torch.nn.Conv2d(3, 2, 1)

        def forward(self, x):
            return self.net(x)

    model = Branchy()
    first = scan(model, image_folder, ["net.4", "unused"], k=2, num_workers=0)
    assert first.count == 60 and first.channels("unused") == 0
    assert any("'unused'" in w and "never ran" in w for w in first.warnings)
    assert first.top("net.4", 0)
    again = scan(model, image_folder, ["net.4", "unused"], k=2, num_workers=0)
    assert again.from_cache and again.count == 60


def test_a_dataset_of_images_scans_like_the_files(image_folder):
    from PIL import Image

    paths = sorted(image_folder.rglob("*.png"), key=lambda p: p.relative_to(image_folder))

    class Pictures(torch.utils.data.Dataset):
        classes = ["a", "b"]

        def __len__(self):
            return 20

        def __getitem__(self, i):
            with Image.open(paths[i]) as img:
                return img.convert("RGB"), i % 2

    net = tiny_net()
    from_files = scan(net, [str(p) for p in paths[:20]], ["4"], k=3, cache=False, num_workers=0)
    from_dataset = scan(net, Pictures(), ["4"], k=3, num_workers=0)
    assert from_dataset.class_names == ("a", "b") and from_dataset.sources == tuple(range(20))
    assert from_dataset.cache_path is None  # a Dataset has no identity of its own
    for c in range(6):
        assert [(e.index, e.value, e.location) for e in from_dataset.top("4", c)] == [
            (e.index, e.value, e.location) for e in from_files.top("4", c)
        ]
    named = scan(net, Pictures(), ["4"], k=3, num_workers=0, cache="pictures")
    assert named.cache_path is not None
    assert scan(net, Pictures(), ["4"], k=3, num_workers=0, cache="pictures").from_cache


def test_a_torn_state_write_falls_back_to_the_batch_before(image_folder):
    # Three batches of 10 are saved (slots written in turn), then the newest slot is torn as
    # a kill in the middle of its write would leave it: the other slot, one batch older, is
    # used, and only the batch of the torn write is run again.
    net = tiny_net()
    _cancel_after(net, image_folder, LAYERS, 3)
    slots = sorted(Path.home().joinpath(".cache").rglob("state.*.bin"))
    assert [p.name for p in slots] == ["state.0.bin", "state.1.bin"]
    newest = slots[0]  # writes 1 and 3 went to slot 0
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data[: len(data) - 7]))
    # 20 from the cache, then the lost batch again.
    assert _resume_and_compare(net, image_folder, LAYERS) == 30


def test_inf_beats_nan_and_stays_inf():
    data = torch.zeros(2, 1, 4)
    data[0, 0] = torch.tensor([float("nan"), float("inf"), 1.0, float("nan")])
    data[1, 0] = torch.tensor([2.0, 5.0, float("nan"), 1.0])
    result = scan(torch.nn.Sequential(torch.nn.Identity()), data, ["0"], k=2, cache=False)
    assert [(e.index, e.value, e.location) for e in result.top("0", 0)] == [
        (0, np.inf, (0, 1)),
        (1, 5.0, (0, 1)),
    ]


def test_a_layer_that_stops_firing_leaves_the_others_exact(image_folder, monkeypatch):
    import sys

    module = sys.modules["actviz.data.scan"]
    splits = []
    dissolve = module._Group.dissolve
    monkeypatch.setattr(
        module._Group, "dissolve", lambda g: (splits.append(len(g.runs)), dissolve(g))
    )

    # Layers are merged together while they all fire; "extra" skips the last, short batch, so
    # the group is split there and each layer goes on alone.
    class Sometimes(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = tiny_net()
            self.extra = torch.nn.Conv2d(3, 2, 3)

        def forward(self, x):
            if x.shape[0] != 4:  # the scan's last batch (60 = 7 x 8 + 4)
                self.extra(x)
            return self.net(x)

    model = Sometimes().eval()
    layers = ["net.1", "extra", "net.7"]
    result = scan(model, image_folder, layers, k=4, batch_size=8, num_workers=0, cache=False)
    paths = sorted(image_folder.rglob("*.png"), key=lambda p: p.relative_to(image_folder))
    inputs = [open_input(p, model=model.net).value for p in paths]
    expected = brute_force(model, inputs, ["net.1", "extra", "net.7"], 4)
    first56 = brute_force(model, inputs[:56], ["extra"], 4)["extra"]
    for layer, (tops, means, _) in (
        *((n, expected[n]) for n in ("net.1", "net.7")),
        ("extra", first56),
    ):
        for c, (order, values, locs) in enumerate(tops):
            entries = result.top(layer, c)
            assert [(e.index, e.location) for e in entries] == list(zip(order, locs, strict=True))
            np.testing.assert_allclose([e.value for e in entries], values, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            result.stats(layer).mean, means.mean(axis=0), rtol=1e-6, atol=1e-7
        )
    assert result.stats("extra").count == 56 and result.stats("net.1").count == 60
    assert splits == [3]  # grouped at the first batch, split at the last
