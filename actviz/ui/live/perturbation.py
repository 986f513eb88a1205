"""A live frame's perturbation (occlusion, noise, brightness, contrast), applied to the input
*and* its picture alike."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from actviz.core.structures import iter_tensors, map_tensors


@dataclass(frozen=True)
class Perturbation:
    """Changes to the current frame, relative so they mean the same on any input scale."""

    #: Centre ``(x, y)`` of a square patch, as fractions of the width and height; None: off.
    occlusion: tuple[float, float] | None = None
    occlusion_size: float = 0.25  # patch side, a fraction of the shorter image side
    noise: float = 0.0  # Gaussian noise, std as a fraction of the frame's own std
    brightness: float = 0.0  # shift, a fraction of the frame's value range (-1 .. 1)
    contrast: float = 1.0  # factor around each channel's mean (1 = unchanged, 0 = flat)
    #: Seed of the noise pattern: fixed, so the noise slider scales one pattern (no flicker).
    seed: int = 0

    def is_identity(self) -> bool:
        return not (self.noise or self.brightness) and self.occlusion is None and self.contrast == 1

    def describe(self) -> str:
        """e.g. ``"occlusion 25% at (0.40, 0.60), noise 10%"``; "none" when nothing applies."""
        parts = []
        if self.occlusion is not None:
            x, y = self.occlusion
            parts.append(f"occlusion {self.occlusion_size:.0%} at ({x:.2f}, {y:.2f})")
        if self.noise:
            parts.append(f"noise {self.noise:.0%}")
        if self.brightness:
            parts.append(f"brightness {self.brightness:+.0%}")
        if self.contrast != 1.0:
            parts.append(f"contrast {self.contrast:.0%}")
        return ", ".join(parts) or "none"

    def patch_box(self, height: int, width: int) -> tuple[int, int, int, int] | None:
        """``(y0, y1, x0, x1)`` of the occlusion patch in an image of that size (clipped)."""
        if self.occlusion is None:
            return None
        side = max(1, round(self.occlusion_size * min(height, width)))
        cx, cy = self.occlusion[0] * width, self.occlusion[1] * height
        # floor(... + 0.5): plain rounding, not Python's round-half-to-even.
        x0 = math.floor(cx - side / 2 + 0.5)
        y0 = math.floor(cy - side / 2 + 0.5)
        x0c, y0c = max(0, x0), max(0, y0)
        x1c, y1c = min(width, x0 + side), min(height, y0 + side)
        return None if x1c <= x0c or y1c <= y0c else (y0c, y1c, x0c, x1c)

    def apply(self, value: Any, image: np.ndarray | None = None) -> tuple[Any, np.ndarray | None]:
        """Perturb a model input and its uint8 picture (or None) alike; returns new
        ``(value, image)``. Only ``value``'s first image-like float tensor changes."""
        if self.is_identity():
            return value, image
        noise_field: torch.Tensor | None = None
        new_value, new_image = value, None
        if (target := image_tensor(value)) is not None:
            perturbed, noise_field = self._apply_tensor(target)
            new_value = map_tensors(value, lambda t: perturbed if t is target else t)  # types kept
            if image is not None:
                # The picture of exactly the tensor the model gets, in the picture's colours.
                new_image = picture_of(perturbed, target, image)
        if new_image is None and image is not None:
            new_image = self._apply_image(image, noise_field)
        return new_value, new_image

    def as_dict(self) -> dict[str, Any]:
        """Every perturbation that applies, with its value (``{"noise": 0.2, "seed": 0, ...}``)."""
        out: dict[str, Any] = {}
        if self.occlusion is not None:
            x, y = self.occlusion
            out["occlusion"] = {"x": float(x), "y": float(y), "size": float(self.occlusion_size)}
        if self.noise:
            out["noise"] = float(self.noise)
            out["seed"] = int(self.seed)  # the noise pattern, so the frame can be rebuilt
        if self.brightness:
            out["brightness"] = float(self.brightness)
        if self.contrast != 1.0:
            out["contrast"] = float(self.contrast)
        return out

    def _apply_tensor(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        squeeze = x.dim() == 3
        t = (x[None] if squeeze else x).detach()
        dtype = t.dtype
        t = t.float().clone()
        dims = (2, 3)
        if self.contrast != 1.0:
            mean = t.mean(dim=dims, keepdim=True)
            t = mean + self.contrast * (t - mean)
        if self.brightness:
            span = t.amax(dim=(1, 2, 3), keepdim=True) - t.amin(dim=(1, 2, 3), keepdim=True)
            t = t + self.brightness * span
        field = None
        if self.noise:
            gen = torch.Generator(device="cpu").manual_seed(self.seed)
            field = torch.randn(t.shape, generator=gen).to(t.device)
            t = t + self.noise * t.std(dim=(1, 2, 3), keepdim=True) * field
        if (box := self.patch_box(t.shape[2], t.shape[3])) is not None:
            y0, y1, x0, x1 = box
            # Each channel's mean: the "grey" of this input's own scale.
            t[:, :, y0:y1, x0:x1] = t.mean(dim=dims, keepdim=True).expand(-1, -1, y1 - y0, x1 - x0)
        t = t.to(dtype)
        return (t[0] if squeeze else t), field

    def _apply_image(self, image: np.ndarray, field: torch.Tensor | None) -> np.ndarray:
        img = np.asarray(image)[..., :3].astype(np.float32)
        h, w = img.shape[:2]
        if self.contrast != 1.0:
            mean = img.mean(axis=(0, 1), keepdims=True)
            img = mean + self.contrast * (img - mean)
        if self.brightness:
            img = img + self.brightness * 255.0
        if self.noise:
            if field is not None and tuple(field.shape[2:]) == (h, w):
                # The same pattern the model got, so the picture shows what it saw.
                z = field[0].permute(1, 2, 0).cpu().numpy()
                if z.shape[2] != 3:
                    z = np.repeat(z[..., :1], 3, axis=2)
            else:
                z = np.random.default_rng(self.seed).standard_normal((h, w, 3)).astype(np.float32)
            img = img + self.noise * float(img.std()) * z
        if (box := self.patch_box(h, w)) is not None:
            y0, y1, x0, x1 = box
            img[y0:y1, x0:x1] = img.mean(axis=(0, 1))
        return np.ascontiguousarray(np.clip(img + 0.5, 0, 255).astype(np.uint8))


def picture_of(tensor: torch.Tensor, clean: torch.Tensor, image: np.ndarray) -> np.ndarray | None:
    """``tensor`` (a perturbed ``clean``) drawn as ``image`` draws ``clean``, through the fitted
    per-channel affine map; None when there is none (the caller perturbs the picture)."""
    if tensor.dim() == 4:
        tensor, clean = tensor[0], clean[0]
    if tensor.dim() != 3 or clean.shape != tensor.shape or tensor.shape[0] not in (1, 3):
        return None
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[:2] != tuple(tensor.shape[1:]) or img.shape[2] < 3:
        return None
    x = clean.detach().to("cpu", torch.float64).numpy()
    t = tensor.detach().to("cpu", torch.float64).numpy()
    out = np.empty(img.shape[:2] + (3,), np.uint8)
    for c in range(3):
        k = min(c, x.shape[0] - 1)
        xc, yc = x[k].ravel(), img[..., c].ravel().astype(np.float64)
        inside = (yc > 0) & (yc < 255)  # clipped pixels say nothing about the map
        if inside.sum() < 2 or np.ptp(xc[inside]) == 0:
            return None
        a, b = np.polyfit(xc[inside], yc[inside], 1)
        fit = a * xc + b
        if np.abs(fit[inside] - yc[inside]).max() > 1.0:
            return None  # not a view of this tensor
        if np.any(fit[yc == 0] > 1.0) or np.any(fit[yc == 255] < 254.0):
            return None
        out[..., c] = np.clip(np.round(a * t[k] + b), 0, 255).astype(np.uint8)
    return out


def image_tensor(value: Any) -> torch.Tensor | None:
    """The input's first image-like tensor (float, 3 or 4 dimensions), else None."""
    found = (t for t in iter_tensors(value) if t.is_floating_point() and t.dim() in (3, 4))
    return next(found, None)
