"""Float images to uint8 colour-table indices: what the image panels draw.

NumPy only (no torch), so the panels can import it and the worker can run it off the GUI thread.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PAD_INDEX", "to_indices"]

#: Index of the transparent entry of a colour table for :func:`to_indices` images: padding and
#: non-finite pixels.
PAD_INDEX = 255


def to_indices(image: np.ndarray, levels: tuple[float, float]) -> np.ndarray:
    """Map a 2-D float image to uint8 indices of :func:`actviz.ui.panels.colormaps.indexed_lut`.

    ``levels[0]`` maps to 0 and ``levels[1]`` to 254 (values beyond are clipped); NaN and
    infinite pixels (mosaic padding, non-finite data) map to :data:`PAD_INDEX`.
    Drawing a uint8 image through a 256-entry colour table is several times faster than
    pyqtgraph's float path with NaN masking; live mode computes these on the worker thread.

    Parameters
    ----------
    image
        2-D float array.
    levels
        (low, high) values of the first and last colour.

    Returns
    -------
    np.ndarray
        C-contiguous uint8 array of the same shape.
    """
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
