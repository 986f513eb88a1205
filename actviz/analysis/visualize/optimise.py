"""The optimisation loop: per chunk of keys, Adam on the image parameters through the robustness
transforms, the objective read at the layer; the model's parameters frozen for the run.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from actviz.analysis.visualize.image_param import ImageParam, RobustTransforms, sample_seed
from actviz.analysis.visualize.layer_runner import LayerRunner, next_stuck, probe_input
from actviz.analysis.visualize.objectives import Objective, check_keys
from actviz.analysis.visualize.visualization import VisualizeSettings
from actviz.core.guards import ModelState
from actviz.core.records import CaptureCancelled


def optimise_images(
    net: nn.Module,
    module: nn.Module | None,
    layer: str,
    keys: list[int],
    obj: Objective,
    settings: VisualizeSettings,
    norm: tuple[tuple[float, ...], tuple[float, ...]] | None,
    known_size: tuple[int, int] | None,
    chunk: int,
    device: torch.device,
    dtype: torch.dtype,
    progress: Callable[[int, int], None] | None,
    should_stop: Callable[[], bool] | None,
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray, float]], tuple[int, int] | None]:
    """Run the optimisation of ``keys`` in chunks; per key ``(image, curve, activation)``."""
    steps, hw, seed, redirect = settings.steps, settings.size, settings.seed, settings.redirect_relu
    if norm is not None:
        mean_t = torch.tensor(norm[0], device=device).view(1, 3, 1, 1)
        inv_std = 1.0 / torch.tensor(norm[1], device=device).view(1, 3, 1, 1)
    n_chunks = -(-len(keys) // chunk)
    total = steps * n_chunks
    done = 0

    def feed(x: torch.Tensor) -> torch.Tensor:
        if norm is not None:
            x = (x - mean_t) * inv_std
        return x.to(dtype)

    results: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    # In-place modules run out of place: a redirected ReLU reads its input, which an in-place
    # ReLU would have overwritten.
    state = ModelState(net, out_of_place=redirect)
    flags = [(p, p.requires_grad) for p in net.parameters()]
    runner: LayerRunner | None = None
    try:
        state.apply(train=False)
        for p, _ in flags:
            p.requires_grad_(False)
        runner = LayerRunner(net, module, layer, redirect)
        with torch.enable_grad():  # also when the caller is inside no_grad
            fed, out = probe_input(runner, feed, settings, known_size, device)
            check_keys(out, keys, obj, module, layer)
            for start in range(0, len(keys), chunk):
                part = keys[start : start + chunk]
                seeds = [sample_seed(seed, k) for k in part]
                key_t = torch.tensor(part, device=device)
                image = ImageParam(seeds, hw, settings.param, settings.decorrelate, device)
                robust = RobustTransforms(seeds, steps, hw, fed, settings.transforms, device=device)
                optimizer = torch.optim.Adam([image.tensor], lr=settings.lr)
                runner.stuck = None
                left = torch.zeros(len(part), dtype=torch.int64, device=device)
                curve = torch.empty(steps, len(part), dtype=torch.float64, device=device)
                for i in range(steps):
                    if should_stop is not None and should_stop():
                        raise CaptureCancelled("feature visualisation cancelled")
                    optimizer.zero_grad(set_to_none=True)
                    values = obj.fn(runner(feed(robust(image.images(), i))), key_t)
                    (-values.sum()).backward()
                    if redirect:
                        runner.stuck, left = next_stuck(image.tensor.grad, left)
                    optimizer.step()
                    curve[i] = values.detach()
                    done += 1
                    if progress is not None:
                        progress(done, total)
                with torch.no_grad():
                    final = image.images()
                    x = final
                    if fed is not None and tuple(fed) != hw:
                        x = torch.nn.functional.interpolate(
                            x, size=tuple(fed), mode="bilinear", align_corners=False
                        )
                    act = obj.fn(runner(feed(x)), key_t)
                images = final.detach().float().cpu().numpy()
                curves = curve.cpu().numpy()
                acts = act.double().cpu().numpy()
                for j, k in enumerate(part):
                    results[k] = (images[j], curves[:, j].copy(), float(acts[j]))
    finally:
        if runner is not None:
            runner.close()
        for p, flag in flags:
            if p.requires_grad != flag:
                p.requires_grad_(flag)
        state.restore()
    return results, fed
