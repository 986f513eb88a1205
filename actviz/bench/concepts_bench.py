"""Concepts: training a dictionary against the TopK SAE method as Overcomplete publishes it,
and the cost of concept maps in a live frame.

* ``concepts_train_s``: :func:`actviz.concepts.train` on ResNet-18 (random init) ``layer3``
  vectors, 100,000 x 256 (every position of 511 random 224 px images), 2,048 concepts,
  k = 16, 5 epochs, batch 1,024 (``--quick``: 20,000 vectors, 1,024 concepts, 2 epochs; the
  printed case and ``concepts_train_case`` say which).
* ``concepts_time_ratio``: those seconds against a reference training loop written here as
  Overcomplete's ``TopKSAE`` + ``train_sae`` do it (a ``Linear`` + ``BatchNorm1d`` + ``ReLU``
  encoder, top-k of the codes, an l2-normalised dictionary, MSE, Adam, gradient clipping at
  1, a shuffling ``DataLoader``; its per-step monitoring off, which only makes it faster) on
  the same training vectors, batch, learning rate and epochs (target <= 0.9).
* ``concepts_fvu_ratio``: the two dictionaries' fraction of variance unexplained on the same
  held-out vectors (5 %), ours over the reference's (target <= 1.0).
* ``concepts_live_ratio``: a live frame's work with the layer shown as concepts against as
  channels (target <= 1.05): a capture of ResNet-18 at 224 px with gradients (what live mode
  runs), then the layer's preparation for a panel on screen, as channels (statistics and the
  mosaics of its 256 channels) or as concepts (statistics, the previous frame's channel
  mosaics standing in, and the window's concept page: 2,048 concept maps, the 256 most active
  tiled). One capture per pair, the two preparations interleaved (see :func:`live_ratio`);
  ``concepts_live_capture_ms``, ``concepts_live_channels_ms`` and
  ``concepts_live_concepts_ms`` are the parts' medians; ``concepts_live_cpu_ratio`` the same
  ratio in the process's CPU time (steadier on a busy machine).
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn

__all__ = ["layer_vectors", "live_ratio", "reference_topk", "run"]


def layer_vectors(n: int, layer: str = "layer3", size: int = 224, seed: int = 0) -> torch.Tensor:
    """``(n, C)``: every position of ``layer`` of a random-init ResNet-18 on random images."""
    import torchvision

    torch.manual_seed(seed)
    net = torchvision.models.resnet18(weights=None).eval()
    got: list[torch.Tensor] = []
    module = dict(net.named_modules())[layer]
    handle = module.register_forward_hook(
        lambda _m, _a, out: got.append(out.detach().permute(0, 2, 3, 1).reshape(-1, out.shape[1]))
    )
    g = torch.Generator().manual_seed(seed)
    total = 0
    try:
        with torch.no_grad():
            while total < n:
                net(torch.randn(32, 3, size, size, generator=g))
                total += got[-1].shape[0]
    finally:
        handle.remove()
    return torch.cat(got)[:n].contiguous()


class _OvercompleteTopK(nn.Module):
    """Overcomplete's ``TopKSAE`` with its default encoder and an l2-normalised dictionary."""

    def __init__(self, d: int, n: int, k: int) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, n), nn.BatchNorm1d(n), nn.ReLU())
        self.dictionary = nn.Parameter(torch.randn(n, d))
        self.k = k

    def get_dictionary(self) -> torch.Tensor:
        return nn.functional.normalize(self.dictionary, dim=-1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        codes = self.encoder(x)
        top = torch.topk(codes, self.k, dim=-1)
        z = torch.zeros_like(codes).scatter(-1, top.indices, top.values)
        return codes, z, z @ self.get_dictionary()


def reference_topk(
    x: torch.Tensor, n: int, k: int, epochs: int, batch_size: int, lr: float, seed: int = 0
) -> tuple[nn.Module, float]:
    """Train Overcomplete's TopK SAE as its ``train_sae`` does; the model and the seconds."""
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    t0 = time.perf_counter()
    model = _OvercompleteTopK(x.shape[1], n, k)
    loader = DataLoader(TensorDataset(x), batch_size=batch_size, shuffle=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        model.train()
        for (batch,) in loader:
            optimizer.zero_grad()
            _, _, x_hat = model(batch)
            loss = (batch - x_hat).square().mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    return model.eval(), time.perf_counter() - t0


@torch.no_grad()
def _fvu(reconstruct: Any, x: torch.Tensor) -> float:
    err = sum(float((reconstruct(p) - p).square().sum()) for p in x.split(8192))
    return err / float((x - x.mean(0)).square().sum())


def live_ratio(
    pairs: int, size: int = 224, n_concepts: int = 2048, k: int = 16
) -> tuple[Any, dict[str, float]]:
    """A live frame's work with ``layer3`` shown as concepts against as channels, and the
    median ms of each part (``capture``, ``channels``, ``concepts``; ``*_cpu`` in CPU time)
    with ``cpu_ratio``, the frame ratio in CPU time.

    Each pair captures once (the capture is the same work whichever way the panel shows the
    layer) and times, in an order flipped every pair, the two preparations of that capture as
    live mode makes them for a panel on screen: as channels, ``prepare(fast=True)`` building
    the layer's mosaics; as concepts, ``prepare`` with the previous frame's mosaics standing
    in (what live mode does for a panel under concept tiles) and
    :func:`~actviz.analysis.concepts.tiles.concept_tiles` (the window's concept page: the
    maps of every concept, the most active first, their mosaic). A pair's ratio is
    ``(capture + concepts) / (capture + channels)``; the figure is the median of the pairs'.
    The capture's own noise (most of a frame, and most of the noise on a busy machine) then
    moves both frames of a pair alike instead of deciding the ratio.
    """
    import statistics

    import torchvision

    import actviz
    from actviz.analysis.concepts.tiles import concept_tiles
    from actviz.bench.timing import Paired
    from actviz.display.mosaic import MAX_MOSAIC_CHANNELS
    from actviz.display.prepare import prepare
    from actviz.display.prepared import DisplaySpec
    from actviz.display.repage import reusable_mosaics

    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, size, size)
    layer = "layer3"
    w = nn.functional.normalize(torch.randn(n_concepts, 256), dim=1)
    concepts = actviz.concepts.Concepts(
        w.T.clone(), w, torch.zeros(n_concepts), torch.zeros(256), architecture="topk", k=k
    )
    spec = DisplaySpec(layers=(layer,))
    # The frame before: its mosaics are what a panel under concept tiles keeps.
    reuse = reusable_mosaics(prepare(actviz.capture(net, x, [layer]), spec, fast=True))

    def channels(cap: Any) -> None:
        prepare(cap, spec, fast=True, mosaic_layers={layer}, reuse=reuse)

    def concept_page(cap: Any) -> None:
        prepare(cap, spec, fast=True, mosaic_layers=set(), reuse=reuse)
        concept_tiles(concepts, cap, layer, page=MAX_MOSAIC_CHANNELS)

    # Each part timed on two clocks: wall time (the figure) and the process's CPU time (every
    # thread's), which other tenants of a busy machine move far less.
    parts: dict[str, list[float]] = {}
    for i in range(2 + pairs):  # two warm-up pairs
        t0, c0 = time.perf_counter(), time.process_time()
        cap = actviz.capture(net, x, [layer])
        took = {"capture": time.perf_counter() - t0, "capture_cpu": time.process_time() - c0}
        for name, fn in (("channels", channels), ("concepts", concept_page))[:: 1 - 2 * (i % 2)]:
            t0, c0 = time.perf_counter(), time.process_time()
            fn(cap)
            took[name] = time.perf_counter() - t0
            took[f"{name}_cpu"] = time.process_time() - c0
        if i >= 2:
            for name, t in took.items():
                parts.setdefault(name, []).append(t)

    def frames(part: str, suffix: str = "") -> list[float]:
        return [a + b for a, b in zip(parts["capture" + suffix], parts[part + suffix], strict=True)]

    def ratio(suffix: str = "") -> float:
        pairs_ = zip(frames("concepts", suffix), frames("channels", suffix), strict=True)
        return statistics.median([t / b for t, b in pairs_])

    base, test = frames("channels"), frames("concepts")
    result = Paired(
        "layer3 as concepts vs channels, frame ms",
        statistics.median(base) * 1e3,
        statistics.median(test) * 1e3,
        ratio(),
        pairs,
        statistics.median([t - b for t, b in zip(test, base, strict=True)]) * 1e3,
    )
    ms = {name: statistics.median(v) * 1e3 for name, v in parts.items()}
    ms["cpu_ratio"] = ratio("_cpu")
    return result, ms


def run(quick: bool, summary: dict) -> None:
    """The concepts section of ``python -m actviz.bench``: prints a table, fills ``summary``."""
    import actviz

    n, n_concepts, epochs = (20_000, 1024, 2) if quick else (100_000, 2048, 5)
    k, batch, lr = 16, 1024, 1e-3
    case = f"{n:,} x 256 vectors, {n_concepts:,} concepts, k={k}, {epochs} epochs, batch {batch}"
    if quick:
        case += " (quick)"
    t0 = time.perf_counter()
    x = layer_vectors(n)
    made_s = time.perf_counter() - t0
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    held = x[perm[: n // 20]]
    train_x = x[perm[n // 20 :]].contiguous()
    t0 = time.perf_counter()
    ours = actviz.concepts.train(
        train_x, "layer3", n_concepts=n_concepts, k=k, epochs=epochs, batch_size=batch, lr=lr,
        holdout=0.0,
    )  # fmt: skip
    ours_s = time.perf_counter() - t0
    ref, ref_s = reference_topk(train_x, n_concepts, k, epochs, batch, lr)
    ours_fvu = ours.fvu(held)
    ref_fvu = _fvu(lambda p: ref(p)[2], held)
    print(f"\n== concepts: ResNet-18 random init layer3, {case}")
    print(f"  ({made_s:.1f} s to run the model for the vectors, not counted)")
    print(f"{'':<48} {'reference':>9} {'actviz':>9} {'ratio':>8}")
    print(f"{'training, s':<48} {ref_s:9.1f} {ours_s:9.1f} {ours_s / ref_s:7.3f}x")
    print(f"{'held-out FVU':<48} {ref_fvu:9.4f} {ours_fvu:9.4f} {ours_fvu / ref_fvu:7.3f}x")
    print(
        f"  actviz: L0 {ours.l0:.1f}, dead {100 * (ours.dead_fraction or 0):.1f}%, "
        f"{ours.info.get('resampled', 0)} concepts resampled"
    )
    live, ms = live_ratio(pairs=7 if quick else 15)
    print(live.row())
    print(
        f"  medians of {live.pairs} pairs: capture {ms['capture']:.1f} ms; the layer prepared "
        f"as channels {ms['channels']:.1f} ms, as concepts (encode 2,048, tile the 256 most "
        f"active) {ms['concepts']:.1f} ms; frame difference {live.diff_ms:+.1f} ms"
    )
    print(
        f"  in CPU time (every thread): capture {ms['capture_cpu']:.1f} ms, channels "
        f"{ms['channels_cpu']:.1f} ms, concepts {ms['concepts_cpu']:.1f} ms; frame ratio "
        f"{ms['cpu_ratio']:.3f}x"
    )
    summary["concepts_train_s"] = ours_s
    summary["concepts_train_case"] = case
    summary["concepts_time_ratio"] = ours_s / ref_s
    summary["concepts_fvu_ratio"] = ours_fvu / ref_fvu
    summary["concepts_live_ratio"] = live.ratio
    summary["concepts_live_capture_ms"] = ms["capture"]
    summary["concepts_live_channels_ms"] = ms["channels"]
    summary["concepts_live_concepts_ms"] = ms["concepts"]
    summary["concepts_live_cpu_ratio"] = ms["cpu_ratio"]
