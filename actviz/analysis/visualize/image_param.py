"""The image side of feature visualisation: :class:`ImageParam` (``K`` seeded images as 1/f
Fourier spectra with decorrelated colour, Lucid's constants) and :class:`RobustTransforms`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

# Square root of ImageNet's colour covariance (Lucid), columns normalised to at most 1.
_COLOR_SQRT = np.asarray(
    [[0.26, 0.09, 0.02], [0.27, 0.00, -0.05], [0.27, -0.09, 0.03]], dtype=np.float32
)
_COLOR = _COLOR_SQRT / np.max(np.linalg.norm(_COLOR_SQRT, axis=0))
_FOURIER_DIVISOR = 4.0  # Lucid's: a larger divisor gives less saturated pictures.
_INIT_SD = 0.01
#: Transform sets: pad (px, 0.5 grey), jitter (px), scales, angles (degrees, as Lucid), jitter.
TRANSFORM_SETS: dict[str, dict[str, object]] = {
    "standard": {
        "pad": 12,
        "jitter": 8,
        "scales": tuple(1 + (i - 5) / 50.0 for i in range(11)),
        "angles": tuple(range(-10, 11)) + (0,) * 5,
        "jitter2": 4,
    },
    "none": {"pad": 0, "jitter": 0, "scales": (1.0,), "angles": (0,), "jitter2": 0},
}


def sample_seed(seed: int, key: int) -> int:
    """One sample's seed from the run's and its key: a channel's picture, alone or batched."""
    return (int(seed) * 1_000_003 + int(key) * 7_919 + 12_345) % (2**63 - 1)


class ImageParam:
    """``K`` RGB images of ``size`` ``(h, w)`` as one trainable tensor, one per seed (see
    :func:`sample_seed`); ``param`` ``"fourier"`` (1/f-scaled spectrum) or ``"pixel"``;
    ``decorrelate`` mixes the channels with ImageNet's colour correlation before the sigmoid."""

    def __init__(
        self,
        seeds: Sequence[int],
        size: tuple[int, int],
        param: str = "fourier",
        decorrelate: bool = True,
        device: torch.device | str = "cpu",
    ) -> None:
        if param not in ("fourier", "pixel"):
            raise ValueError(f"param must be 'fourier' or 'pixel', not {param!r}")
        self.size = (int(size[0]), int(size[1]))
        h, w = self.size
        self.scale: torch.Tensor | None = None
        if param == "fourier":
            fy, fx = np.fft.fftfreq(h)[:, None], np.fft.fftfreq(w)[: w // 2 + (2 if w % 2 else 1)]
            freqs = np.sqrt(fx * fx + fy * fy)
            shape: tuple[int, ...] = (3, *freqs.shape, 2)
            # 1/f scaling and Lucid's divisor folded into one constant (the inverse FFT is linear).
            scale = 1.0 / np.maximum(freqs, 1.0 / max(w, h)) / _FOURIER_DIVISOR
            self.scale = torch.tensor(scale, dtype=torch.float32, device=device)[:, :, None]
        else:
            shape = (3, h, w)
        # Each image from its own generator: the same seed gives the same start in any batch.
        init = [
            torch.randn(shape, generator=torch.Generator().manual_seed(s)) * _INIT_SD for s in seeds
        ]
        self.tensor = torch.stack(init).to(device).requires_grad_(True)
        # (in, out) for a matmul over the channel axis
        self.color = torch.tensor(_COLOR.T, device=device) if decorrelate else None

    def images(self) -> torch.Tensor:
        """The images, ``(K, 3, h, w)`` in (0, 1), differentiable in :attr:`tensor`."""
        x = self.tensor
        if self.scale is not None:
            x = torch.fft.irfftn(torch.view_as_complex(x * self.scale), s=self.size, norm="ortho")
        if self.color is not None:
            x = torch.einsum("kchw,cd->kdhw", x, self.color)
        return torch.sigmoid(x)


class RobustTransforms:
    """Per-sample pad, jitter, scale, rotation and jitter as one affine resampling per step,
    drawn up front from each sample's own generator (independent of the batch); ``image_size``
    is fed at ``out_size`` (None: the image with its padding)."""

    def __init__(
        self,
        seeds: Sequence[int],
        steps: int,
        image_size: tuple[int, int],
        out_size: tuple[int, int] | None,
        transforms: str = "standard",
        device: torch.device | str = "cpu",
    ) -> None:
        if transforms not in TRANSFORM_SETS:
            raise ValueError(
                f"transforms must be one of {', '.join(map(repr, TRANSFORM_SETS))}, "
                f"not {transforms!r}"
            )
        spec = TRANSFORM_SETS[transforms]
        pad = int(spec["pad"])  # type: ignore[call-overload]
        h, w = image_size
        self.canvas = (h + 2 * pad, w + 2 * pad)
        self.out_size = tuple(out_size) if out_size is not None else self.canvas
        self.identity = transforms == "none" and self.out_size == (h, w)
        scales = torch.tensor(spec["scales"], dtype=torch.float64)
        angles = torch.tensor(spec["angles"], dtype=torch.float64) * (math.pi / 180.0)
        j1, j2 = int(spec["jitter"]), int(spec["jitter2"])  # type: ignore[call-overload]
        thetas = []
        for s in seeds:
            # One row of draws per step: a run of n steps sees the first n rows of a longer one.
            u = torch.rand((steps, 6), generator=torch.Generator().manual_seed(int(s) + 1))
            u = u.to(torch.float64)
            t1 = _jitter(u[:, 0:2], j1)
            sc = scales[_pick(u[:, 2], len(scales))]
            an = angles[_pick(u[:, 3], len(angles))]
            t2 = _jitter(u[:, 4:6], j2)
            thetas.append(self._theta(t1, sc, an, t2, (h, w)))
        # (steps, K, 2, 3): one row per step, so a step indexes without copying.
        self.thetas = torch.stack(thetas, dim=1).to(device=device, dtype=torch.float32)

    def _theta(
        self,
        t1: torch.Tensor,
        scale: torch.Tensor,
        angle: torch.Tensor,
        t2: torch.Tensor,
        image_size: tuple[int, int],
    ) -> torch.Tensor:
        """Affine maps from output to image coordinates (``affine_grid``'s convention): padded,
        shifted by ``t1``, scaled and rotated about the centre, shifted by ``t2``, so an output
        point ``u`` comes from ``R^-1 (C u - t2) / scale - t1`` (``C``: the canvas half-size),
        divided by the image half-size."""
        h, w = image_size
        ch, cw = self.canvas
        cos, sin = torch.cos(angle), torch.sin(angle)
        # R^-1 = R(-angle): [[cos, sin], [-sin, cos]] on (x, y).
        inv = (
            torch.stack([torch.stack([cos, sin], -1), torch.stack([-sin, cos], -1)], -2)
            / scale[:, None, None]
        )
        half_canvas = torch.tensor([cw / 2.0, ch / 2.0], dtype=torch.float64)
        half_image = torch.tensor([w / 2.0, h / 2.0], dtype=torch.float64)
        a = inv * half_canvas[None, None, :] / half_image[None, :, None]
        b = -(torch.einsum("sij,sj->si", inv, t2) + t1) / half_image[None, :]
        return torch.cat([a, b[:, :, None]], dim=2)

    def __call__(self, images: torch.Tensor, step: int, fill: float = 0.5) -> torch.Tensor:
        """The images as the model sees them at ``step``: ``(K, 3, H, W)``, ``fill`` outside."""
        if self.identity:
            return images
        theta = self.thetas[step]
        grid = F.affine_grid(theta, [theta.shape[0], 3, *self.out_size], align_corners=False)
        out = F.grid_sample(
            images - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False
        )
        return out + fill


def _pick(u: torch.Tensor, n: int) -> torch.Tensor:
    """Indices in ``0..n-1`` from uniforms in [0, 1)."""
    return (u * n).long().clamp_(max=n - 1)


def _jitter(u: torch.Tensor, d: int) -> torch.Tensor:
    """``(steps, 2)`` centred pixel shifts, ``d`` values per axis, from ``(steps, 2)`` uniforms."""
    return torch.zeros_like(u) if d <= 1 else _pick(u, d).to(torch.float64) - (d - 1) / 2.0
