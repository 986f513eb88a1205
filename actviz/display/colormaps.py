"""The one colour-map registry, shared by the window and the exporter (no Qt; tables made by
``tools/make_colormaps.py``). Images are painted float -> :func:`to_indices` ->
:func:`indexed_table` everywhere, so an export has exactly the pixels the panel shows."""

from __future__ import annotations

from functools import cache
from importlib import resources

import numpy as np

#: Index of the transparent entry of an indexed table: mosaic padding and non-finite values.
PAD_INDEX = 255
#: Default map for activations and for gradient magnitudes.
DEFAULT_ACTIVATION_CMAP = "viridis"
DEFAULT_GRADIENT_CMAP = "inferno"
#: The colour-map choice that picks a map per layer (see :func:`resolve`).
AUTO = "auto"
#: Map of signed activations under :data:`AUTO`, shown on a range symmetric about 0.
DIVERGING_CMAP = "CET-D1"
#: Map of heat overlays (saliency, Grad-CAM): a smooth jet.
OVERLAY_CMAP = "turbo"


@cache
def _tables() -> dict[str, np.ndarray]:
    with resources.files("actviz.resources").joinpath("colormaps.npz").open("rb") as fh:
        data = np.load(fh)
        out = {key: np.array(data[key]) for key in data.files}
    for value in out.values():
        value.setflags(write=False)
    return out


#: Every map's name, in the order offered to the user.
COLORMAPS: list[str] = [str(n) for n in _tables()["names"]]


def resolve(choice: str, *, signed: bool = False, gradient: bool = False) -> str:
    """The colour map that paints a layer under the user's ``choice``: a named map as it is;
    :data:`AUTO` a diverging map for signed activations, else a sequential one."""
    if choice != AUTO:
        return choice
    if gradient:
        return DEFAULT_GRADIENT_CMAP
    return DIVERGING_CMAP if signed else DEFAULT_ACTIVATION_CMAP


def painting(choice: str, *, signed: bool = False, gradient: bool = False) -> tuple[str, bool]:
    """``(map, symmetric)``: how one side of a layer is painted under the user's ``choice``
    (symmetric about 0 only for a signed activation under :data:`AUTO`), everywhere."""
    symmetric = choice == AUTO and signed and not gradient
    return resolve(choice, signed=symmetric, gradient=gradient), symmetric


def _get(name: str, n: int) -> np.ndarray:
    key = f"{name}/{n}"
    if key not in (tables := _tables()):
        raise ValueError(f"unknown colour map {name!r}; choose from {', '.join(COLORMAPS)}")
    return tables[key]


def table(name: str) -> np.ndarray:
    """The ``(256, 3)`` uint8 table of map ``name`` (shared, read-only; ``ValueError`` if unknown)."""
    return _get(name, 256)


@cache
def indexed_table(name: str) -> np.ndarray:
    """The shared ``(256, 4)`` RGBA table of map ``name`` (:data:`PAD_INDEX` transparent)."""
    out = np.zeros((256, 4), dtype=np.uint8)
    out[:PAD_INDEX, :3] = _get(name, PAD_INDEX)
    out[:PAD_INDEX, 3] = 255
    out.setflags(write=False)
    return out


def to_indices(image: np.ndarray, levels: tuple[float, float] = (0.0, 1.0)) -> np.ndarray:
    """A 2-D float image as C-contiguous uint8 indices of :func:`indexed_table` (they paint
    faster than pyqtgraph's floats): ``levels`` map to 0 and 254, non-finite to :data:`PAD_INDEX`."""
    low, high = float(levels[0]), float(levels[1])
    scale = PAD_INDEX / (high - low) if high > low else 0.0
    work = np.multiply(image, np.float32(scale), dtype=np.float32)
    work -= np.float32(low * scale)
    # Infinite values would survive the clip as the end colours; they are not data.
    nonfinite = ~np.isfinite(image)
    np.clip(work, 0.0, PAD_INDEX - 1, out=work)
    with np.errstate(invalid="ignore"):  # NaN casts to garbage, overwritten next line
        out = work.astype(np.uint8)
    out[nonfinite] = PAD_INDEX
    return out


def heat_levels(heat: np.ndarray, *, symmetric: bool = False) -> tuple[float, float]:
    """Display levels of a picture's values (window and export alike): ``[-M, M]`` of the
    largest finite magnitude when ``symmetric`` (a diverging map), else the finite min..max.
    A constant ``c`` other than 0 sits mid-scale on ``[0, 2c]`` (``[2c, 0]``), as the mosaics
    paint it: the bottom colour reads as "no signal"."""
    if (finite := heat[np.isfinite(heat)]).size == 0:
        return (0.0, 1.0)
    if symmetric:
        m = float(np.abs(finite).max()) or 1.0
        return (-m, m)
    low, high = float(finite.min()), float(finite.max())
    if high > low:
        return (low, high)
    return (min(0.0, 2 * low), max(0.0, 2 * low)) if low else (0.0, 1.0)


def paint(
    indices: np.ndarray, cmap: str, background: tuple[int, int, int] = (255, 255, 255)
) -> np.ndarray:
    """Colour an index image as the panels do: ``(H, W, 3)`` uint8, padding in ``background``."""
    rgb = np.ascontiguousarray(indexed_table(cmap)[indices][..., :3])
    rgb[indices == PAD_INDEX] = background
    return rgb


def colorize(
    image01: np.ndarray,
    cmap: str = DEFAULT_ACTIVATION_CMAP,
    background: tuple[int, int, int] = (255, 255, 255),
) -> np.ndarray:
    """Map a ``(H, W)`` image in [0, 1] to ``(H, W, 3)`` uint8 (NaN in ``background``)."""
    return paint(to_indices(np.asarray(image01, dtype=np.float32)), cmap, background)


def overlay(
    rgb: np.ndarray, heat01: np.ndarray, alpha: float = 0.5, cmap: str = OVERLAY_CMAP
) -> np.ndarray:
    """Blend a ``(h, w)`` heat map in [0, 1] over an ``(H, W, 3)`` uint8 image (bilinear)."""
    if (base := np.asarray(rgb)).ndim == 2:
        base = np.repeat(base[..., None], 3, axis=2)
    if (heat := np.asarray(heat01, dtype=np.float32)).ndim != 2:
        raise ValueError(f"overlay needs a 2-D heat map, got shape {heat.shape}")
    if heat.shape != base.shape[:2]:
        import torch

        from actviz.display.attribution import _resize

        heat = _resize(torch.from_numpy(np.ascontiguousarray(heat)), base.shape[:2]).numpy()
    colored = colorize(np.clip(heat, 0, 1), cmap).astype(np.float32)
    out = (1 - alpha) * base[..., :3].astype(np.float32) + alpha * colored
    return np.ascontiguousarray(np.clip(out + 0.5, 0, 255).astype(np.uint8))
