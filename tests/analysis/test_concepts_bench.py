"""The concepts bench's pieces at tiny sizes: the reference loop trains, the live figure runs."""

from __future__ import annotations

import torch

import actviz
from actviz.bench import concepts_bench


def test_reference_loop_learns_and_ours_beats_it_on_the_same_vectors():
    g = torch.Generator().manual_seed(0)
    dirs = torch.nn.functional.normalize(torch.randn(24, 16, generator=g), dim=1)
    codes = torch.rand(3000, 24, generator=g) * (torch.rand(3000, 24, generator=g) < 0.1)
    x = codes @ dirs + 0.5
    train_x, held = x[:2700], x[2700:]
    ref, seconds = concepts_bench.reference_topk(train_x, 48, 4, 3, 128, 1e-3)
    assert seconds > 0
    ref_fvu = concepts_bench._fvu(lambda p: ref(p)[2], held)
    ours = actviz.concepts.train(
        train_x, n_concepts=48, k=4, epochs=3, batch_size=128, lr=1e-3, holdout=0.0
    )
    assert ours.info["held_out"] == 0 and ours.info["kept"] == 2700
    assert ours.fvu(held) < ref_fvu


def test_layer_vectors_and_live_ratio_run_small():
    v = concepts_bench.layer_vectors(300, size=64)
    assert v.shape == (300, 256) and bool((v >= 0).all())  # layer3 ends in a ReLU
    live, ms = concepts_bench.live_ratio(pairs=3, size=64, n_concepts=300, k=4)
    parts = {"capture", "channels", "concepts"}
    assert set(ms) == parts | {f"{p}_cpu" for p in parts} | {"cpu_ratio"}
    assert min(ms.values()) > 0
    assert live.pairs == 3 and live.ratio > 0
    # The frames are the shared capture plus each preparation (medians over the same pairs).
    assert live.base_ms > ms["capture"] and live.test_ms > ms["capture"]
