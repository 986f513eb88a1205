"""A scan tries fewer torch threads beside its loader workers: exact, and the count restored."""

from __future__ import annotations

import os

import pytest
import torch

from actviz.core import threads as threads_module
from actviz.core.threads import ThreadTuner
from actviz.data import ScanCancelled, scan
from tests.data.conftest import LAYERS, assert_same_scan, tiny_net, write_images


@pytest.fixture
def two_cores(monkeypatch):
    """The scan sees two cores whatever the machine: with 2 workers, 1 thread is tried."""
    monkeypatch.setattr(threads_module, "available_cores", lambda: 2)


def test_a_scan_with_workers_restores_the_count_and_stays_exact(tmp_path, four_threads, two_cores):
    folder = tmp_path / "images"
    write_images(folder, 60)
    net = tiny_net()
    common = dict(k=3, batch_size=4, cache=False)
    seen = []  # the count after each batch (progress runs on the scan's thread)
    tuned = scan(
        net,
        folder,
        LAYERS,
        num_workers=2,
        progress=lambda *_: seen.append(torch.get_num_threads()),
        **common,
    )  # 15 batches: tried
    assert torch.get_num_threads() == 4
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    assert seen[: w + t - 1] == [4] * (w + t - 1) and seen[w + t - 1] == 1  # the trial ran
    assert tuned.threads in (1, 4) and seen[-1] == tuned.threads
    plain = scan(net, folder, LAYERS, num_workers=0, **common)
    assert plain.threads == 4  # no workers: nothing tried
    assert_same_scan(tuned, plain)


def test_a_cancelled_scan_restores_the_count(tmp_path, four_threads, two_cores):
    folder = tmp_path / "images"
    write_images(folder, 60)
    calls = []

    def stop() -> bool:
        calls.append(torch.get_num_threads())
        return len(calls) > ThreadTuner.WARMUP + ThreadTuner.TRIAL + 1  # mid-trial

    with pytest.raises(ScanCancelled):
        scan(tiny_net(), folder, LAYERS, k=3, batch_size=4, num_workers=2, should_stop=stop)
    w, t = ThreadTuner.WARMUP, ThreadTuner.TRIAL
    assert calls[: w + t] == [4] * (w + t) and calls[w + t] == 1  # the trial was on
    assert torch.get_num_threads() == 4


class _NiceOfTheLoader(torch.utils.data.Dataset):
    """Each item: a 1x4x4 map filled with the CPU priority (nice) of the process loading it."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((1, 4, 4), float(os.getpriority(os.PRIO_PROCESS, 0)))


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no os.nice")
def test_a_background_scan_loads_at_a_lower_priority():
    from actviz.core.threads import BACKGROUND_NICE

    net = torch.nn.Conv2d(1, 1, 1)
    with torch.no_grad():
        net.weight.fill_(1.0)
        net.bias.zero_()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    common = dict(k=1, batch_size=2, num_workers=2, cache=False)
    low = scan(net, _NiceOfTheLoader(), [""], background=True, **common)
    normal = scan(net, _NiceOfTheLoader(), [""], **common)
    # The layer's output is its input: the top value is the loader's priority.
    assert low.top("", 0)[0].value == min(19, ours + BACKGROUND_NICE)
    assert normal.top("", 0)[0].value == ours
    assert os.getpriority(os.PRIO_PROCESS, 0) == ours  # this process is left alone


@pytest.mark.parametrize(
    ("cores", "background", "expected"),
    [(1, False, 1), (2, False, 2), (8, False, 2), (1, True, 1), (2, True, 1), (8, True, 2)],
)
def test_a_background_scan_leaves_a_core_to_the_foreground(
    tmp_path, monkeypatch, cores, background, expected
):
    import sys

    from actviz.data.scan import default_workers
    from actviz.data.sources import open_data, resolve_model

    scan_module = sys.modules["actviz.data.scan_sizing"]  # default_workers' module
    monkeypatch.setattr(scan_module, "available_cores", lambda: cores)
    folder = tmp_path / "images"
    write_images(folder, 12)
    items = open_data(folder, resolve_model(tiny_net()))
    assert default_workers(items, 12, 4, background) == expected
    assert default_workers(items, 8, 4, background) == 0  # two batches: not worth a process


@pytest.mark.parametrize(("cores", "expected"), [(1, 1), (2, 1), (16, 15), (64, 16)])
def test_a_gpu_scan_gives_the_loaders_every_core_but_one(tmp_path, monkeypatch, cores, expected):
    import sys

    from actviz.data.scan import default_workers
    from actviz.data.sources import open_data, resolve_model

    monkeypatch.setattr(sys.modules["actviz.data.scan_sizing"], "available_cores", lambda: cores)
    folder = tmp_path / "images"
    write_images(folder, 12)
    items = open_data(folder, resolve_model(tiny_net()))
    gpu = torch.device("cuda")
    assert default_workers(items, 12, 4, device=gpu) == expected
    assert default_workers(items, 12, 4, True, gpu) == expected  # the GPU does the forward
    assert default_workers(items, 8, 4, device=gpu) == 0  # two batches: not worth a process


def test_the_automatic_batch_on_a_gpu_fits_a_quarter_of_its_free_memory(monkeypatch):
    from actviz.data import scan_sizing

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 << 30, 16 << 30))
    per_image = 36 << 20  # every output of a ResNet-18 at 224 px, about
    assert scan_sizing._batch_for(per_image) == 7  # host memory: 256 MiB
    assert scan_sizing._batch_for(per_image, torch.device("cuda")) == 56  # 2 GiB free / 4
    assert scan_sizing._batch_for(1 << 20, torch.device("cuda")) == scan_sizing.MAX_BATCH
