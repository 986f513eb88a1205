"""Feature visualisation against Lucent's method (``vis_time_ratio``, ``vis_batch8_ratio``).

torch-lucent cannot be a dependency (its last release pins kornia and predates torch 2), so
its ``render.render_vis`` is implemented inline below, as the Grad-CAM figure does with its bare
reference, step for step as in torch-lucent 0.1.8: a Fourier image (``param.image``: 1/f
spectrum, ``/ 4``, decorrelated colour, sigmoid), ``standard_transforms`` (pad 12 with grey,
jitter 8, random scale 0.9-1.1 by bilinear upsampling, random rotation +-10 degrees, jitter 4;
kornia's ``translate`` / ``warp_affine`` are an ``affine_grid`` + ``grid_sample`` with
``align_corners=True`` each, as here), ImageNet normalisation image by image, the upsampling of
images smaller than 224 to 224, a forward hook on every module, Adam (lr 0.05) with the model's
weights left trainable, ``loss = -activation[:, channel].mean()``. The reference therefore
skips kornia's own Python work per call, which only makes it faster than Lucent.

Figures, each side by side in one run on the same model, layer, channel, image size, step count
and transforms (random-init ResNet-18 at ``layer3``; the size is 224, where Lucent does not
upsample, so neither side gains from another resolution):

* ``vis_time_ratio``: actviz / reference wall time for one channel (median of pairs);
* ``vis_batch8_ratio``: actviz with 8 channels batched / actviz with one, on the CPU with the
  bench's thread count. The 8 channels are one batch of 8 images through one forward and one
  backward per step (one resampling for all transforms, one gather for all objectives); a
  profile puts ~75 % of a step in the convolutions and their input gradients, whose work grows
  with the number of images, so on a CPU the ratio sits near the number of images over the
  cores the single image leaves idle: about 7.4 on one thread, 5.4 on 4 and 4.0 on 16 (an
  H100 machine's CPU, measured side by side);
* ``vis_batch8_ratio_cuda``: the same on a GPU where one is present (0.98-1.22 on an H100
  over two runs at 16 and 64 steps), where a batch of 8 fills what one image leaves idle;
* ``vis_objective_ratio``: median over 8 channels of actviz's final objective / the
  reference's, each final image fed untransformed (no padding, no upsampling);
* ``vis_objective_ratio_demo``: the same on a trained model, the demo CNN's
  ``features.block3`` at its own 64 px (many of its channels are silent on the starting grey,
  where the reference stays stuck);
* ``vis_page_ratio``: in the window, a "What channels want" page of 16 channels / the 16
  pictures made one after the other by the channel view's "What it wants", same steps and
  size, each block with an empty visualisation cache, alternated (:func:`page_ratio`). The
  page batches its channels a few at a time, so it should read below 1.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["final_objective", "lucent_reference", "measure", "page_ratio", "run"]

_IMAGENET = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
_COLOR_SQRT = np.asarray(
    [[0.26, 0.09, 0.02], [0.27, 0.00, -0.05], [0.27, -0.09, 0.03]], dtype=np.float32
)
_COLOR = _COLOR_SQRT / np.max(np.linalg.norm(_COLOR_SQRT, axis=0))


def _fft_image(size: int, sd: float = 0.01) -> tuple[torch.Tensor, Any]:
    h = w = size
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.fftfreq(w)[: w // 2 + (2 if w % 2 else 1)]
    freqs = np.sqrt(fx * fx + fy * fy)
    spectrum = (torch.randn(1, 3, *freqs.shape, 2) * sd).requires_grad_(True)
    scale = torch.tensor(1.0 / np.maximum(freqs, 1.0 / max(w, h))).float()[None, None, ..., None]
    color = torch.tensor(_COLOR.T)

    def image() -> torch.Tensor:
        scaled = torch.view_as_complex(scale * spectrum)
        img = torch.fft.irfftn(scaled, s=(h, w), norm="ortho")[:1, :3, :h, :w] / 4.0
        img = torch.matmul(img.permute(0, 2, 3, 1), color).permute(0, 3, 1, 2)
        return torch.sigmoid(img)

    return spectrum, image


def _warp(x: torch.Tensor, m: np.ndarray) -> torch.Tensor:
    """kornia's ``warp_affine(x, M, dsize=(h, w))`` (bilinear, zeros, align_corners=True):
    ``m`` maps source pixels to destination pixels."""
    _, _, h, w = x.shape
    # Pixel -> [-1, 1] with align_corners=True, and back: theta = N M^-1 N^-1.
    n = np.array([[2.0 / (w - 1), 0, -1], [0, 2.0 / (h - 1), -1], [0, 0, 1]])
    full = np.vstack([m, [0, 0, 1]])
    theta = n @ np.linalg.inv(full) @ np.linalg.inv(n)
    t = torch.tensor(theta[:2], dtype=x.dtype)[None].expand(x.shape[0], -1, -1)
    grid = F.affine_grid(t, list(x.shape), align_corners=True)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)


def _standard_transforms(rng: np.random.RandomState) -> list[Any]:
    def pad(x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, [12] * 4, mode="constant", value=0.5)

    def jitter(d: int) -> Any:
        def inner(x: torch.Tensor) -> torch.Tensor:
            dx, dy = rng.choice(d), rng.choice(d)
            return _warp(x, np.array([[1.0, 0, dx], [0, 1.0, dy]]))

        return inner

    scales = [1 + (i - 5) / 50.0 for i in range(11)]

    def random_scale(x: torch.Tensor) -> torch.Tensor:
        scale = rng.choice(scales)
        shp = x.shape[2:]
        new = [int(math.ceil(scale * d)) for d in shp]
        pad_x = max(0, int(math.ceil((shp[1] - new[1]) / 2)))
        pad_y = max(0, int(math.ceil((shp[0] - new[0]) / 2)))
        up = F.interpolate(x, size=new, mode="bilinear", align_corners=True)
        return F.pad(up, [pad_y, pad_x] * 2)

    angles = list(range(-10, 11)) + 5 * [0]

    def random_rotate(x: torch.Tensor) -> torch.Tensor:
        _, _, h, w = x.shape
        a = math.radians(rng.choice(angles))
        cx, cy = (w - 1) / 2, (h - 1) / 2
        c, s = math.cos(a), math.sin(a)
        # kornia's get_rotation_matrix2d: positive angles turn counter-clockwise.
        m = np.array([[c, s, (1 - c) * cx - s * cy], [-s, c, s * cx + (1 - c) * cy]])
        return _warp(x, m)

    return [pad, jitter(8), random_scale, random_rotate, jitter(4)]


def lucent_reference(
    model: nn.Module,
    layer: str,
    channel: int,
    size: int,
    steps: int,
    seed: int = 0,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] = _IMAGENET,
    upsample: bool = True,
) -> torch.Tensor:
    """Lucent's ``render_vis(model, f"{layer}:{channel}", param.image(size))``, inline.

    The model's weights collect gradients, as in Lucent: pass a copy. ``upsample``: Lucent's
    resizing of images smaller than 224 to 224 before the model. Returns the final image
    ``(1, 3, size, size)`` in [0, 1].
    """
    torch.manual_seed(seed)
    rng = np.random.RandomState(seed)
    spectrum, image_f = _fft_image(size)
    optimizer = torch.optim.Adam([spectrum], lr=5e-2)
    transforms = _standard_transforms(rng)
    mean = torch.tensor(mean_std[0]).view(3, 1, 1)
    std = torch.tensor(mean_std[1]).view(3, 1, 1)
    transforms.append(lambda x: torch.stack([(t - mean) / std for t in x]))
    if upsample and size < 224:
        transforms.append(lambda x: F.interpolate(x, size=224, mode="bilinear", align_corners=True))
    features: dict[str, Any] = {}
    handles = []
    for name, mod in model.named_modules():
        if name:

            def hook(m: nn.Module, i: Any, o: Any, name: str = name) -> None:
                features[name] = o

            handles.append(mod.register_forward_hook(hook))
    try:
        for _ in range(steps):

            def closure() -> torch.Tensor:
                optimizer.zero_grad()
                x = image_f()
                for t in transforms:
                    x = t(x)
                model(x)
                loss = -features[layer][:, channel].mean()
                loss.backward()
                return loss

            optimizer.step(closure)
        return image_f().detach()
    finally:
        for h in handles:
            h.remove()


def final_objective(
    model: nn.Module,
    layer: str,
    channels: list[int],
    images: torch.Tensor,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] = _IMAGENET,
) -> np.ndarray:
    """Each image's channel mean, the image fed as it is (normalised, no transforms)."""
    mean = torch.tensor(mean_std[0]).view(1, 3, 1, 1)
    std = torch.tensor(mean_std[1]).view(1, 3, 1, 1)
    taken: dict[str, torch.Tensor] = {}
    module = dict(model.named_modules())[layer]
    handle = module.register_forward_hook(lambda m, i, o: taken.__setitem__("a", o.detach()))
    try:
        with torch.no_grad():
            model((images - mean) / std)
    finally:
        handle.remove()
    act = taken["a"]
    return np.array([float(act[k, c].mean()) for k, c in enumerate(channels)])


def objectives(
    model: nn.Module,
    layer: str,
    channels: list[int],
    size: int,
    steps: int,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] = _IMAGENET,
    upsample: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Each channel's final objective after ``steps``, actviz's and the reference's, every
    final image fed untransformed at ``size``."""
    import actviz

    vis = actviz.visualize(
        model, layer, channels, steps=steps, size=size, mean=mean_std[0], std=mean_std[1]
    )
    reference_model = copy.deepcopy(model)
    ref_images = torch.cat(
        [
            lucent_reference(
                reference_model, layer, c, size, steps, mean_std=mean_std, upsample=upsample
            )
            for c in channels
        ]
    )
    images = torch.from_numpy(np.array(vis.images))
    return (
        final_objective(model, layer, channels, images, mean_std),
        final_objective(model, layer, channels, ref_images, mean_std),
    )


def measure(
    model: nn.Module,
    layer: str,
    size: int,
    steps: int,
    objective_steps: int,
    pairs: int,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] = _IMAGENET,
    upsample: bool = True,
) -> dict[str, float]:
    """The section's figures on ``model`` (see the module docstring), plus the times in ms.

    ``upsample=False`` drops Lucent's resizing to 224 (tiny models in tests)."""
    import actviz

    reference_model = copy.deepcopy(model)  # Lucent's run fills its weights' .grad
    settings = {"size": size, "mean": mean_std[0], "std": mean_std[1]}

    def ours(channels: list[int], n: int) -> Any:
        return actviz.visualize(model, layer, channels, steps=n, **settings)

    def reference(channel: int, n: int) -> torch.Tensor:
        return lucent_reference(
            reference_model, layer, channel, size, n, mean_std=mean_std, upsample=upsample
        )

    ours([0], 1)
    reference(0, 1)
    t_ours, t_ref, t_batch = [], [], []
    for i in range(pairs):
        # Order flipped every pair, so a slow drift of the machine favours neither side.
        for which in ("ours", "ref") if i % 2 == 0 else ("ref", "ours"):
            t0 = time.perf_counter()
            ours([0], steps) if which == "ours" else reference(0, steps)
            (t_ours if which == "ours" else t_ref).append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ours(list(range(8)), steps)
        t_batch.append(time.perf_counter() - t0)
    ours_final, ref_final = objectives(
        model, layer, list(range(8)), size, objective_steps, mean_std, upsample
    )
    return {
        "vis_time_ratio": statistics.median(o / r for o, r in zip(t_ours, t_ref, strict=True)),
        "vis_batch8_ratio": statistics.median(b / o for b, o in zip(t_batch, t_ours, strict=True)),
        # The medians' ratio: a per-channel ratio of activations near zero says little.
        "vis_objective_ratio": statistics.median(ours_final) / statistics.median(ref_final),
        "reference_ms": statistics.median(t_ref) * 1e3,
        "actviz_ms": statistics.median(t_ours) * 1e3,
        "batch8_ms": statistics.median(t_batch) * 1e3,
        "reference_objective": statistics.median(ref_final),
        "actviz_objective": statistics.median(ours_final),
    }


def batch8_ratio(
    model: nn.Module,
    layer: str,
    size: int,
    steps: int,
    pairs: int,
    device: str,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] = _IMAGENET,
) -> tuple[float, float, float]:
    """8 channels batched / 1 channel on ``device`` (median of ``pairs``), with the two times
    in ms; the model is copied there."""
    import actviz

    on = copy.deepcopy(model).to(device)
    settings = {"steps": steps, "size": size, "mean": mean_std[0], "std": mean_std[1]}

    def timed(channels: list[int]) -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        actviz.visualize(on, layer, channels, **settings)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    timed([0]), timed(list(range(8)))  # warm-up (kernels, allocator)
    ones, eights = [], []
    for _ in range(pairs):
        ones.append(timed([0]))
        eights.append(timed(list(range(8))))
    ratio = statistics.median(e / o for e, o in zip(eights, ones, strict=True))
    return ratio, statistics.median(ones) * 1e3, statistics.median(eights) * 1e3


def page_ratio(
    steps: int = 8, size: int = 64, channels: int = 16, pairs: int = 1, layer: str = "layer3"
) -> dict[str, float]:
    """A window's "What channels want" page of ``channels`` against as many single pictures
    from the channel view (ResNet-18 random init), median over ``pairs`` of alternated blocks.

    Returns
    -------
    dict
        ``vis_page_ratio`` (page / singles), ``page_s`` and ``singles_s`` (medians).
    """
    import os
    import tempfile

    import torchvision

    from actviz.bench.ui_bench import (
        delete_widgets,
        ensure_qt_app,
        scratch_dir,
        scratch_settings,
        wait_until,
    )
    from actviz.core.threads import parallel_in_workers_only
    from actviz.ui.window.main_window import MainWindow

    app = ensure_qt_app()
    undo = parallel_in_workers_only()  # as the app's own process does
    cache_before = os.environ.get("XDG_CACHE_HOME")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    window = MainWindow(settings=scratch_settings(), auto_run=False)
    window.resize(1400, 900)
    window.show()

    def fresh_cache() -> None:
        # An empty visualisation cache per block: every picture is synthesised.
        os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="cache-", dir=scratch_dir())

    try:
        window.script.set_model(model, layers=[layer])
        window.script.set_input(torch.rand(1, 3, size, size))
        window.runs.run()
        window.script.wait_idle(120_000)
        feature = window.features["visualize"]
        feature.section.steps_spin.setValue(steps)
        feature.section.size_spin.setValue(size)

        def singles() -> float:
            fresh_cache()
            t0 = time.perf_counter()
            for c in range(channels):
                window.display.open_channel(layer, c)
                app.processEvents()
                if not feature.synthesise():
                    raise RuntimeError(f"What it wants did not start for channel {c}")
                if not wait_until(lambda: not feature.is_synthesising(), 600.0):
                    raise TimeoutError("What it wants did not finish")
            return time.perf_counter() - t0

        def page() -> float:
            fresh_cache()
            t0 = time.perf_counter()
            if not feature.page.visualise(layer, 0, size=channels):
                raise RuntimeError("the page did not start")
            if not wait_until(lambda: not feature.page.is_busy(), 600.0):
                raise TimeoutError("the page did not finish")
            if len(feature.page.dock.mosaic.filled()) != channels:
                raise RuntimeError("the page did not fill")
            return time.perf_counter() - t0

        t_page, t_single = [], []
        for i in range(pairs):
            for which in ("page", "singles") if i % 2 == 0 else ("singles", "page"):
                (t_page if which == "page" else t_single).append(
                    page() if which == "page" else singles()
                )
    finally:
        delete_widgets(window)
        undo()
        if cache_before is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = cache_before
    return {
        "vis_page_ratio": statistics.median(p / s for p, s in zip(t_page, t_single, strict=True)),
        "page_s": statistics.median(t_page),
        "singles_s": statistics.median(t_single),
    }


#: (size, steps, objective steps, demo steps, page steps, page size, pairs) of a quick and a
#: full run. Quick: 128 px with Lucent's upsampling to 224 left out, so both sides still run
#: the same pixels in a third of the time.
SETTINGS = {True: (128, 2, 2, 8, 8, 64, 1), False: (224, 16, 64, 64, 32, 128, 3)}


def run(quick: bool, summary: dict) -> None:
    """Print the table and put ``vis_time_ratio``, ``vis_batch8_ratio`` and
    ``vis_objective_ratio`` into ``summary``."""
    import torchvision

    size, steps, objective_steps, demo_steps, page_steps, page_size, pairs = SETTINGS[quick]
    layer = "layer3"
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    r = measure(model, layer, size, steps, objective_steps, pairs, upsample=not quick)
    print(f"\n== feature visualisation (ResNet-18 random init, {layer}, {size} px)")
    print(f"{'':<48} {'reference':>9} {'actviz':>9} {'ratio':>8}")
    print(
        f"{f'one channel, {steps} steps, ms':<48} {r['reference_ms']:9.1f} "
        f"{r['actviz_ms']:9.1f} {r['vis_time_ratio']:7.3f}x"
    )
    print(
        f"{'8 channels batched vs 1 (actviz), ms':<48} {r['actviz_ms']:9.1f} "
        f"{r['batch8_ms']:9.1f} {r['vis_batch8_ratio']:7.3f}x"
    )
    if torch.cuda.is_available():
        cuda_ratio, one_ms, eight_ms = batch8_ratio(model, layer, size, steps, pairs, "cuda")
        print(
            f"{'8 channels batched vs 1 (actviz, CUDA), ms':<48} {one_ms:9.1f} "
            f"{eight_ms:9.1f} {cuda_ratio:7.3f}x"
        )
        summary["vis_batch8_ratio_cuda"] = cuda_ratio
    print(
        f"{f'final objective, median of 8 ({objective_steps} steps)':<48} "
        f"{r['reference_objective']:9.3f} {r['actviz_objective']:9.3f} "
        f"{r['vis_objective_ratio']:7.3f}x"
    )
    # The same comparison on a trained model, the demo CNN at its own 64 px (Lucent resizes
    # to 224 before the model, as its render_vis does; no normalisation, as the demo has none).
    from actviz.io.models.demo_model import load_demo_model

    ours_demo, ref_demo = objectives(
        load_demo_model(),
        "features.block3",
        list(range(8)),
        64,
        demo_steps,
        ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
    )
    demo_ratio = statistics.median(ours_demo) / max(statistics.median(ref_demo), 1e-9)
    print(
        f"{f'demo features.block3, median of 8 ({demo_steps} steps)':<48} "
        f"{statistics.median(ref_demo):9.3f} {statistics.median(ours_demo):9.3f} "
        f"{demo_ratio:7.3f}x"
    )
    for key in ("vis_time_ratio", "vis_batch8_ratio", "vis_objective_ratio"):
        summary[key] = r[key]
    summary["vis_objective_ratio_demo"] = demo_ratio
    pr = page_ratio(page_steps, page_size, 16, pairs=pairs)
    print(
        f"{f'page of 16 vs 16 single pictures ({page_steps} steps, {page_size} px), s':<48} "
        f"{pr['singles_s']:9.2f} {pr['page_s']:9.2f} {pr['vis_page_ratio']:7.3f}x"
    )
    summary["vis_page_ratio"] = pr["vis_page_ratio"]
