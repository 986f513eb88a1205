"""What a channel is set to when its effect is measured (zero, a dataset mean, another run):
one object serves the estimate and the exact pass, so both measure the same replacement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from actviz.core.edit_kinds import source_output
from actviz.core.records import Capture
from actviz.data.scan_result import Scan


class Baseline:
    """A resolved baseline: ``"zero"``, ``"mean"`` (a per-channel value) or ``"patch"`` (another
    run's output at the same layer and call), with a one-line ``description``."""

    def __init__(
        self,
        kind: str,
        description: str,
        means: Mapping[str, np.ndarray] | None = None,
        source: Capture | None = None,
        scan: Scan | None = None,
    ) -> None:
        self.kind, self.description, self.source = kind, description, source
        self._means, self._scan = means, scan
        # Per (layer, call, rows, device, dtype): the source repeated for a batch, made once.
        self._repeated: dict[tuple, torch.Tensor] = {}

    def _mean(self, layer: str, channels: int) -> np.ndarray:
        if self._scan is not None:
            if layer not in self._scan.layers:
                raise ValueError(
                    f"baseline: layer {layer!r} was not in the scan (scanned: "
                    f"{', '.join(self._scan.layers)}); scan it too, or pick another baseline"
                )
            vec = np.array(self._scan.stats(layer).mean, dtype=np.float64)
        else:
            assert self._means is not None
            if layer not in self._means:
                raise ValueError(
                    f"baseline: no channel means for layer {layer!r} (given for "
                    f"{', '.join(self._means) or 'no layer'})"
                )
            vec = np.array(self._means[layer], dtype=np.float64).reshape(-1)
        if vec.shape[0] != channels:
            raise ValueError(
                f"baseline: {vec.shape[0]} channel means for layer {layer!r}, but its output has "
                f"{channels} channels along its channel dimension (a scan averages dimension 1; "
                f"for (N, T, D) sequences pass {{layer: array of D means}})"
            )
        return vec

    def _source(self, layer: str, call: int, t: torch.Tensor, rows: int) -> torch.Tensor:
        assert self.source is not None
        try:
            return source_output(self.source, layer, call, (rows, *t.shape[1:]))
        except ValueError as exc:
            raise ValueError(f"baseline: layer {layer!r}: {exc}") from None

    def _mean_view(self, layer: str, t: torch.Tensor, dim: int, dtype: Any) -> torch.Tensor:
        """The channel means shaped to broadcast over ``t`` along ``dim``."""
        shape = [1] * t.ndim
        shape[dim] = -1
        return torch.from_numpy(self._mean(layer, t.shape[dim])).to(t.device, dtype).view(shape)

    def release(self) -> None:
        """Drop the repeated copies made for batches (they may sit on the model's device)."""
        self._repeated.clear()

    def single(self, layer: str, call: int, a: torch.Tensor, dim: int) -> torch.Tensor | None:
        """The baseline of one recorded call ``a`` (float64, broadcastable); None for zero."""
        if self.kind == "zero":
            return None
        if self.kind == "mean":
            return self._mean_view(layer, a, dim, torch.float64)
        return self._source(layer, call, a, a.shape[0]).to(a.device, torch.float64)

    def batched(self, layer: str, call: int, t: torch.Tensor, dim: int, b: int) -> torch.Tensor:
        """The baseline of a batch ``t`` of ``b`` repeated samples, in ``t``'s dtype and device."""
        if self.kind == "zero":
            return torch.zeros((), dtype=t.dtype, device=t.device)
        if self.kind == "mean":
            key = ("mean", layer, t.ndim, dim, t.device, t.dtype)
            if key not in self._repeated:
                self._repeated[key] = self._mean_view(layer, t, dim, t.dtype)
            return self._repeated[key]
        key = ("patch", layer, call, b, t.device, t.dtype)
        if (rep := self._repeated.get(key)) is None:
            src = self._source(layer, call, t, t.shape[0] // b).to(t.device, t.dtype)
            rep = src.repeat(b, *([1] * (src.ndim - 1)))
            self._repeated[key] = rep
        return rep


def resolve_baseline(baseline: Any) -> Baseline:
    """``effects``'s ``baseline`` as a :class:`Baseline`: ``"zero"``, a Scan (channel means), a
    ``{layer: (C,) array}`` mapping or another run's Capture (patching); else ``TypeError``."""
    if isinstance(baseline, Baseline):
        return baseline
    if isinstance(baseline, str):
        if baseline.strip().lower() in ("zero", "zeros", "0"):
            return Baseline("zero", "zero")
        raise ValueError(
            f"unknown baseline {baseline!r}: use 'zero', a scan (actviz.scan), a dict "
            "{layer: channel means} or a capture of another run"
        )
    if isinstance(baseline, Scan):
        return Baseline("mean", f"channel mean over {baseline.count} scanned images", scan=baseline)
    if isinstance(baseline, Capture):
        return Baseline("patch", "patched from another run", source=baseline)
    if isinstance(baseline, Mapping):
        return Baseline("mean", "given channel means", means=dict(baseline))
    raise TypeError(
        "baseline must be 'zero', a Scan (actviz.scan), a dict {layer: channel means} or a "
        f"Capture of another run, not {type(baseline).__name__}"
    )
