"""The bundled demo model: a small CNN trained offline on shapes it draws itself, one coloured
shape on a textured background, so only the object tells classes apart (Grad-CAM lands on it)."""

from __future__ import annotations

import cmath
import math
import pathlib
from collections import OrderedDict
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import numpy as np
import torch
from PIL import Image, ImageDraw
from torch import Tensor, nn

#: Class names by logit index (samples: ``<class>.png``); "background" keeps Grad-CAM on shapes.
DEMO_CLASSES: list[str] = "background circle square triangle star cross ring arrow".split()
#: (height, width) of the model input; images are RGB, values in [0, 1], no normalisation.
DEMO_INPUT_SIZE: tuple[int, int] = (64, 64)
#: The last conv block, where Grad-CAM is meaningful (8x8 maps, one cell = 8x8 input pixels).
DEMO_GRADCAM_LAYER = "features.block4"
# Shapes drawn this much larger and box-filtered down, so first-layer filters learn edges.
_SUPERSAMPLE = 4


class ConvBlock(nn.Module):
    """``conv -> bn -> relu``: one stage of :class:`DemoNet`; the last uses an in-place ReLU on
    purpose (it overwrites the batch-norm output a naive hook would keep)."""

    def __init__(self, in_channels: int, out_channels: int, *, inplace: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=inplace)

    def forward(self, x: Tensor) -> Tensor:
        return self.relu(self.bn(self.conv(x)))


class DemoNet(nn.Module):
    """Small CNN for the demo: four ``ConvBlock``s (3 -> 16 -> 32 -> 64 -> 64, max-pooled between;
    maps of 64, 32, 16 and 8 pixels; the last with an in-place ReLU), average pool and ``fc``."""

    def __init__(
        self, num_classes: int = len(DEMO_CLASSES), widths: tuple[int, ...] = (16, 32, 64, 64)
    ) -> None:
        super().__init__()
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for i, (cin, cout) in enumerate(zip((3, *widths[:-1]), widths, strict=True), 1):
            if i > 1:
                layers[f"pool{i - 1}"] = nn.MaxPool2d(2)
            layers[f"block{i}"] = ConvBlock(cin, cout, inplace=i == len(widths))
        self.features = nn.Sequential(layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(widths[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc(self.flatten(self.pool(self.features(x))))


def build_demo_model() -> DemoNet:
    """A freshly initialised :class:`DemoNet` (random weights, train mode)."""
    return DemoNet(num_classes=len(DEMO_CLASSES))


def _resource_dir() -> Traversable:
    return resources.files("actviz.resources") / "demo"


def demo_weights_path() -> Traversable:
    """The bundled float32 ``state_dict`` file (``actviz.resources/demo/demo_cnn.pt``)."""
    return _resource_dir() / "demo_cnn.pt"


def load_demo_model() -> DemoNet:
    """The trained :class:`DemoNet` in eval mode on the CPU (``FileNotFoundError`` without it)."""
    weights = demo_weights_path()
    if not weights.is_file():
        raise FileNotFoundError(
            f"demo weights not found at {weights}; run `python tools/train_demo.py` to create them"
        )
    # Traversable.open works for zipped installs as well as plain directories.
    with weights.open("rb") as fh:
        state = torch.load(fh, map_location="cpu", weights_only=True)
    model = build_demo_model()
    model.load_state_dict(state)
    return model.eval()


def demo_transform(image: Image.Image) -> Tensor:
    """A PIL image as the demo's ``(3, H, W)`` float32 RGB input in [0, 1] (not normalised)."""
    h, w = DEMO_INPUT_SIZE
    image = image.convert("RGB")
    if image.size != (w, h):
        image = image.resize((w, h), Image.BILINEAR)
    array = np.asarray(image, dtype=np.float32) / 255.0
    return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))


def demo_samples() -> list[pathlib.Path]:
    """The bundled sample PNGs, named after their class, sorted (empty without resources)."""
    samples = _resource_dir() / "samples"
    if not samples.is_dir():
        return []
    return sorted(
        (pathlib.Path(str(entry)) for entry in samples.iterdir() if entry.name.endswith(".png")),
        key=lambda p: p.name,
    )


def demo_sample_tensor(name: str | None = None) -> tuple[Tensor, np.ndarray]:
    """One bundled sample (file name, stem or class; None: the first) as ``(x, rgb)``, a
    ``(1, 3, H, W)`` float32 tensor in [0, 1] and its uint8 pixels (``FileNotFoundError``)."""
    if not (samples := demo_samples()):
        raise FileNotFoundError("no demo samples in actviz.resources/demo/samples")
    if not (matches := [p for p in samples if name in (None, p.name, p.stem)]):
        known = ", ".join(p.stem for p in samples)
        raise FileNotFoundError(f"no demo sample named {name!r}; known: {known}")
    with Image.open(matches[0]) as image:
        x = demo_transform(image)
    rgb = np.ascontiguousarray((x.permute(1, 2, 0).numpy() * 255.0).round().astype(np.uint8))
    return x.unsqueeze(0), rgb


@dataclass
class GeneratedImage:
    """One generated example: the RGB ``image``, its ``label`` index, the object's ``mask`` (pixels
    at least half covered), its ``box`` (exclusive ends; None for background) and ``center``."""

    image: Image.Image
    label: int
    mask: np.ndarray
    box: tuple[int, int, int, int] | None
    center: tuple[float, float]


def _draw_shape(
    draw: ImageDraw.ImageDraw, cls: str, cx: float, cy: float, r: float, angle: float
) -> None:
    """Draw class ``cls`` filled with 255 on an ``L`` canvas; ``r`` is the outer radius."""

    def ellipse(radius: float, fill: int) -> None:
        draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=fill)

    def polygon(unit: list[tuple[float, float]]) -> None:  # scaled by r, rotated by angle
        c, s = math.cos(angle), math.sin(angle)
        draw.polygon([(cx + r * (x * c - y * s), cy + r * (x * s + y * c)) for x, y in unit], 255)

    if cls == "circle":  # (the background class draws nothing: texture only)
        ellipse(r * 0.85, 255)
    elif cls in ("square", "triangle", "star"):  # corners on the unit circle (a star's dented)
        n, dent = {"square": (4, 1.0), "triangle": (3, 1.0), "star": (10, 0.42)}[cls]
        corners = [cmath.rect(dent if k % 2 else 1.0, 2 * math.pi * k / n) for k in range(n)]
        polygon([(z.real, z.imag) for z in corners])
    elif cls == "cross":
        t = 0.3  # half-width of the arms, as a fraction of r
        polygon([(t, -1), (t, -t), (1, -t), (1, t), (t, t), (t, 1), (-t, 1), (-t, t), (-1, t),
                 (-1, -t), (-t, -t), (-t, -1)])  # fmt: skip
    elif cls == "ring":
        ellipse(r * 0.9, 255)
        ellipse(r * 0.5, 0)
    elif cls == "arrow":
        polygon([(-1, -0.22), (0.15, -0.22), (0.15, -0.6), (1, 0), (0.15, 0.6), (0.15, 0.22),
                 (-1, 0.22)])  # fmt: skip


def _background(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """Return an ``(h, w, 3)`` float background in [0, 1]: two colours mixed by a pattern."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    # No textures with corners or blobs: they look like the classes and pull evidence off them.
    kind = rng.integers(3)
    theta = rng.uniform(0, 2 * math.pi)
    u = (xx * math.cos(theta) + yy * math.sin(theta)) / max(h, w)
    if kind == 0:  # linear gradient
        t = u - u.min()
        t /= max(float(t.max()), 1e-6)
    elif kind == 1:  # soft stripes
        period = rng.uniform(6.0, 16.0) / max(h, w)
        t = 0.5 + 0.5 * np.sin(2 * math.pi * u / period + rng.uniform(0, 2 * math.pi))
    else:  # smooth blotchy noise: coarse random grid upsampled bicubically
        cells = int(rng.integers(3, 9))
        coarse = rng.uniform(0, 255, size=(cells, cells)).astype(np.uint8)
        t = np.asarray(Image.fromarray(coarse).resize((w, h), Image.BICUBIC), np.float32) / 255
    c1 = rng.uniform(0.0, 1.0, size=3)
    # The second colour stays near the first: the texture is visible but weaker than the object.
    c2 = np.clip(c1 + rng.uniform(-0.3, 0.3, size=3), 0, 1)
    return c1 * (1 - t[..., None]) + c2 * t[..., None]


def generate_example(
    cls: str | int, rng: np.random.Generator, *, min_offset: float = 0.0
) -> GeneratedImage:
    """Draw one example of class ``cls`` (name or index; else ``ValueError``) with its mask and
    box; ``min_offset`` keeps the object's centre that far from the image centre."""
    if isinstance(cls, str):
        if cls not in DEMO_CLASSES:
            raise ValueError(f"unknown demo class {cls!r}; expected one of {DEMO_CLASSES}")
        label = DEMO_CLASSES.index(cls)
    else:
        label = int(cls)
        if not 0 <= label < len(DEMO_CLASSES):
            raise ValueError(
                f"unknown demo class index {label}; expected 0..{len(DEMO_CLASSES) - 1}"
            )
    name = DEMO_CLASSES[label]
    h, w = DEMO_INPUT_SIZE
    r = float(rng.uniform(0.16, 0.30) * min(h, w))  # outer radius: objects 20..38 px across
    for _ in range(100):
        cx, cy = float(rng.uniform(r, w - r)), float(rng.uniform(r, h - r))
        if math.hypot(cx - w / 2, cy - h / 2) >= min_offset:
            break
    angle = float(rng.uniform(0, 2 * math.pi))

    s = _SUPERSAMPLE
    canvas = Image.new("L", (w * s, h * s), 0)
    _draw_shape(ImageDraw.Draw(canvas), name, cx * s, cy * s, r * s, angle)
    alpha = np.asarray(canvas.resize((w, h), Image.BOX), np.float32) / 255.0

    background = _background(rng, h, w)
    # The object colour must stand out from the background under it, else the label is noise.
    under = background[alpha > 0.5].mean(axis=0) if (alpha > 0.5).any() else background.mean((0, 1))
    colour = rng.uniform(0, 1, size=3)
    for _ in range(50):
        if np.abs(colour - under).sum() > 0.6:
            break
        colour = rng.uniform(0, 1, size=3)
    # A slight shading across the object so its inside is not perfectly flat.
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    shade = 1.0 + 0.15 * ((xx - cx) * math.cos(angle) + (yy - cy) * math.sin(angle)) / r
    fg = np.clip(colour[None, None, :] * shade[..., None], 0, 1)

    image = background * (1 - alpha[..., None]) + fg * alpha[..., None]
    image += rng.normal(0.0, rng.uniform(0.01, 0.05), size=image.shape)
    rgb = (np.clip(image, 0, 1) * 255.0 + 0.5).astype(np.uint8)

    mask = alpha >= 0.5
    box = None
    if mask.any():
        ys, xs = np.nonzero(mask)
        box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
    return GeneratedImage(Image.fromarray(rgb, "RGB"), label, mask, box, (cx, cy))


def generate_image(cls: str | int, rng: np.random.Generator) -> Image.Image:
    """One RGB image of class ``cls`` (see :func:`generate_example`)."""
    return generate_example(cls, rng).image
