"""A sparse dictionary of concepts (:class:`Concepts`) and its SAELens folder format.

Encodes with SAELens's definitions, so published dictionaries behave the same::

    pre = (x - b_dec * apply_b_dec_to_input) @ W_enc + b_enc
    standard: relu(pre); topk: the k largest relu'd; jumprelu: relu(pre) where pre > threshold
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from actviz.analysis.concepts.tensorfile import read_tensors, write_tensors

#: Architectures a dictionary may have (``"standard"`` is ReLU, as SAELens names it).
ARCHITECTURES = ("standard", "topk", "jumprelu")
CFG_FILE = "cfg.json"
WEIGHTS_FILE = "sae_weights.safetensors"
#: What besides the weights makes two dictionaries encode alike.
_ENCODING = ("architecture", "k", "apply_b_dec_to_input")
_CHUNK = 8192  # Rows encoded at once by fvu(): bounds the (rows, d_sae) temporaries.
# Whether oneDNN's dense linear may encode on the CPU (not public API: a failure turns it off).
_ONEDNN = {"ok": True}


def _onednn_linear(x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor) -> torch.Tensor | None:
    """``x @ w_t.T + bias`` through oneDNN (no-grad float32 CPU), or None where it cannot run."""
    if not _ONEDNN["ok"] or x.device.type != "cpu" or x.dtype != torch.float32:
        return None
    op = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
    if op is None or not torch.backends.mkldnn.is_available():
        _ONEDNN["ok"] = False
        return None
    try:
        return op(x.contiguous(), w_t, bias, "none", [], "")
    except (RuntimeError, TypeError, NotImplementedError):
        _ONEDNN["ok"] = False
        return None


def _weight(t: Any, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, not {type(t).__name__}")
    # Published dictionaries come in float16/bfloat16: the CPU encodes float32 faster and exactly.
    return t.detach().to(device="cpu", dtype=torch.float32).contiguous()


@dataclass(frozen=True, eq=False)
class Concepts:
    """A learned (or loaded) sparse dictionary on one layer; immutable (do not write the weights).

    ``W_dec`` row ``i`` is concept ``i``'s direction; ``architecture`` is ``"standard"``,
    ``"topk"`` (with ``k``) or ``"jumprelu"`` (with ``threshold``); ``hook_name`` is a module name
    or SAELens hook point; ``heldout_fvu``, ``l0`` and ``dead_fraction`` are training's figures.
    """

    W_enc: torch.Tensor
    W_dec: torch.Tensor
    b_enc: torch.Tensor
    b_dec: torch.Tensor
    architecture: str = "topk"
    hook_name: str = ""
    k: int | None = None
    threshold: torch.Tensor | None = None
    apply_b_dec_to_input: bool = True
    heldout_fvu: float | None = None
    l0: float | None = None
    dead_fraction: float | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    cfg: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
            object.__setattr__(self, name, _weight(getattr(self, name), name))
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"unknown architecture {self.architecture!r}; one of {', '.join(ARCHITECTURES)}"
            )
        d_in, d_sae = self.W_enc.shape if self.W_enc.ndim == 2 else (-1, -1)
        if (
            self.W_enc.ndim != 2
            or tuple(self.W_dec.shape) != (d_sae, d_in)
            or tuple(self.b_enc.shape) != (d_sae,)
            or tuple(self.b_dec.shape) != (d_in,)
        ):
            raise ValueError(
                "dictionary shapes do not agree: W_enc "
                f"{tuple(self.W_enc.shape)}, W_dec {tuple(self.W_dec.shape)}, b_enc "
                f"{tuple(self.b_enc.shape)}, b_dec {tuple(self.b_dec.shape)} (want [d_in, d_sae], "
                "[d_sae, d_in], [d_sae], [d_in])"
            )
        if self.architecture == "topk":
            if self.k is None or not 1 <= int(self.k) <= d_sae:
                raise ValueError(f"topk needs 1 <= k <= d_sae ({d_sae}), not {self.k!r}")
            object.__setattr__(self, "k", int(self.k))
        else:
            object.__setattr__(self, "k", None if self.k is None else int(self.k))
        if self.architecture == "jumprelu":
            if self.threshold is None:
                raise ValueError("a jumprelu dictionary needs its threshold")
            th = _weight(self.threshold, "threshold").reshape(-1)
            if th.numel() == 1:
                th = th.expand(d_sae).clone()
            if tuple(th.shape) != (d_sae,):
                raise ValueError(f"threshold has {th.numel()} values for {d_sae} concepts")
            object.__setattr__(self, "threshold", th)
        elif self.threshold is not None:
            object.__setattr__(self, "threshold", None)
        object.__setattr__(self, "info", dict(self.info))
        object.__setattr__(self, "cfg", dict(self.cfg))
        object.__setattr__(self, "_placed", {})

    # -- sizes
    @property
    def d_in(self) -> int:
        """Values per activation vector."""
        return int(self.W_enc.shape[0])

    @property
    def d_sae(self) -> int:
        """Concepts in the dictionary."""
        return int(self.W_enc.shape[1])

    n_concepts = d_sae

    def __len__(self) -> int:
        return self.d_sae

    def __repr__(self) -> str:
        k = f", k={self.k}" if self.k is not None else ""
        fvu = f", fvu={self.heldout_fvu:.3f}" if self.heldout_fvu is not None else ""
        return (
            f"Concepts({self.d_sae} x {self.d_in}, {self.architecture}{k}, "
            f"hook {self.hook_name!r}{fvu})"
        )

    def same_as(self, other: Any) -> bool:
        """Whether ``other`` is this dictionary or encodes and decodes exactly as it does."""
        if other is self:
            return True
        if not isinstance(other, Concepts):
            return False
        if any(getattr(self, n) != getattr(other, n) for n in _ENCODING):
            return False
        mine, theirs = self.weights(), other.weights()
        return mine.keys() == theirs.keys() and all(
            mine[n].shape == theirs[n].shape and torch.equal(mine[n], theirs[n]) for n in mine
        )

    # -- encoding
    def _on(self, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """The weights on ``device`` in ``dtype``, made once per pair."""
        key = (device, dtype)
        placed = self._placed  # type: ignore[attr-defined]
        got = placed.get(key)
        if got is None:
            th = self.threshold if self.threshold is not None else torch.zeros(0)
            got = tuple(
                t.to(device=device, dtype=dtype)
                for t in (self.W_enc, self.W_dec, self.b_enc, self.b_dec, th)
            )
            placed[key] = got
        return got

    def _encoder_rows(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """``W_enc.T`` contiguous (oneDNN's layout), made once per device and dtype."""
        placed = self._placed  # type: ignore[attr-defined]
        key = ("W_enc.T", device, dtype)
        got = placed.get(key)
        if got is None:
            got = self._on(device, dtype)[0].T.contiguous()
            placed[key] = got
        return got

    def _prepare(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        x = torch.as_tensor(x)
        if x.shape[-1] != self.d_in:
            raise ValueError(
                f"vectors of {x.shape[-1]} values given to a dictionary of {self.d_in}-value "
                f"vectors (shape {tuple(x.shape)})"
            )
        if not x.is_floating_point() or x.dtype in (torch.float16, torch.bfloat16):
            x = x.float()
        return x, self._on(x.device, x.dtype)

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., d_sae)``: ``(x - b_dec) @ W_enc + b_enc`` before the sparsity step."""
        x, (w_enc, _, b_enc, b_dec, _) = self._prepare(x)
        flat = x.reshape(-1, self.d_in)
        if self.apply_b_dec_to_input:
            flat = flat - b_dec
        return torch.addmm(b_enc, flat, w_enc).reshape(*x.shape[:-1], self.d_sae)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Concept activations ``(..., d_sae)`` of vectors ``x`` ``(..., d_in)``, differentiable."""
        pre = self.pre_activations(x)
        if self.architecture == "topk":
            vals, idx = pre.topk(int(self.k), dim=-1, sorted=False)  # type: ignore[arg-type]
            return torch.zeros_like(pre).scatter(-1, idx, vals.clamp_min(0))
        if self.architecture == "jumprelu":
            th = self._on(pre.device, pre.dtype)[4]
            return torch.where(pre > th, pre.clamp_min(0), torch.zeros((), dtype=pre.dtype))
        return pre.clamp_min(0)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Vectors ``(..., d_in)`` from concept activations ``z`` ``(..., d_sae)``."""
        z = torch.as_tensor(z)
        if z.shape[-1] != self.d_sae:
            raise ValueError(f"activations of {z.shape[-1]} concepts, not {self.d_sae}")
        if not z.is_floating_point() or z.dtype in (torch.float16, torch.bfloat16):
            z = z.float()
        _, w_dec, _, b_dec, _ = self._on(z.device, z.dtype)
        flat = torch.addmm(b_dec, z.reshape(-1, self.d_sae), w_dec)
        return flat.reshape(*z.shape[:-1], self.d_in)

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """``decode(encode(x))``."""
        return self.decode(self.encode(x))

    def contribution(self, x: torch.Tensor, concepts: Any) -> torch.Tensor:
        """``sum_i z_i d_i`` over ``concepts`` (indices) for vectors ``x`` ``(..., d_in)``."""
        idx = torch.as_tensor(concepts, dtype=torch.int64).reshape(-1)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.d_sae):
            raise ValueError(f"concept indices must lie in 0..{self.d_sae - 1}")
        z = self.encode(x)
        _, w_dec, _, _, _ = self._on(z.device, z.dtype)
        idx = idx.to(z.device)
        return z.index_select(-1, idx) @ w_dec.index_select(0, idx)

    @torch.no_grad()
    def fvu(self, vectors: torch.Tensor) -> float:
        """Fraction of variance unexplained on ``vectors`` ``(N, d_in)``:
        ``sum |x - x_hat|^2 / sum |x - mean(x)|^2`` (0: perfect; 1: no better than the mean)."""
        x = torch.as_tensor(vectors).reshape(-1, self.d_in)
        if x.shape[0] == 0:
            raise ValueError("fvu needs at least one vector")
        x64 = x.double()
        total = float((x64 - x64.mean(0)).square().sum())
        err = 0.0
        for lo in range(0, x.shape[0], _CHUNK):
            part = x[lo : lo + _CHUNK]
            part = part.float() if part.dtype != torch.float64 else part
            err += float((self.reconstruct(part).double() - part.double()).square().sum())
        return err / total if total > 0 else (0.0 if err == 0 else math.inf)

    @torch.no_grad()
    def measure_l0(self, vectors: torch.Tensor) -> float:
        """Mean number of active concepts per vector of ``vectors`` ``(N, d_in)``."""
        x = torch.as_tensor(vectors).reshape(-1, self.d_in)
        active = 0
        for lo in range(0, x.shape[0], _CHUNK):
            active += int((self.encode(x[lo : lo + _CHUNK]) > 0).sum())
        return active / max(1, x.shape[0])

    # -- one input's maps
    def maps(
        self,
        capture: Any,
        layer: str | None = None,
        *,
        index: int = 0,
        call: int = 0,
        model: Any = None,
    ) -> torch.Tensor:
        """Where each concept fires for sample ``index`` of ``capture`` (``layer`` default: the
        hook): ``(d_sae, H, W)``, ``(d_sae, T)`` or ``(d_sae,)``, float32 on the record's device."""
        return self.maps_and_peaks(capture, layer, index=index, call=call, model=model)[0]

    def maps_and_peaks(
        self,
        capture: Any,
        layer: str | None = None,
        *,
        index: int = 0,
        call: int = 0,
        model: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`maps` and each concept's peak over them, ``(d_sae,)`` (0 where it does not
        fire), which order a panel's concept tiles; TopK takes them from its ``k`` values."""
        from actviz.analysis.concepts.vectors import layer_tensor, to_vectors

        t = layer_tensor(capture, self, layer, call=call, model=model)
        vectors, spatial = to_vectors(t[index : index + 1], self.d_in)
        with torch.no_grad():
            x, (_, _, b_enc, b_dec, th) = self._prepare(vectors)
            if self.apply_b_dec_to_input:
                # Into rows at once: oneDNN's product takes rows (one pass, not two).
                x = torch.sub(x, b_dec, out=torch.empty(x.shape, dtype=x.dtype, device=x.device))
            pre = _onednn_linear(x, self._encoder_rows(x.device, x.dtype), b_enc)
            if pre is None:
                pre = torch.addmm(b_enc, x, self._on(x.device, x.dtype)[0])
            if self.architecture == "topk":
                # Scattered straight into (d_sae, positions): no transposed copy of the maps.
                vals, idx = pre.topk(int(self.k), dim=1, sorted=False)  # type: ignore[arg-type]
                vals = vals.clamp_min_(0)
                z = torch.zeros(self.d_sae, pre.shape[0], dtype=pre.dtype, device=pre.device)
                z.scatter_(0, idx.T, vals.T)
                peaks = torch.zeros(self.d_sae, dtype=pre.dtype, device=pre.device)
                peaks.scatter_reduce_(0, idx.reshape(-1), vals.reshape(-1), "amax")
            else:
                if self.architecture == "jumprelu":
                    z = torch.where(pre > th, pre.clamp_min(0), torch.zeros((), dtype=pre.dtype)).T
                else:
                    z = pre.clamp_min_(0).T
                peaks = z.amax(1) if z.shape[1] else z.new_zeros(self.d_sae)
        return z.reshape(self.d_sae, *spatial), peaks

    # -- files
    def to_cfg(self) -> dict[str, Any]:
        """The ``cfg.json`` of this dictionary (SAELens keys, then ours under ``"actviz"``)."""
        cfg = dict(self.cfg)
        cfg.update(
            {
                "d_in": self.d_in,
                "d_sae": self.d_sae,
                "architecture": self.architecture,
                "hook_name": self.hook_name,
                "apply_b_dec_to_input": bool(self.apply_b_dec_to_input),
                "normalize_activations": "none",
                "dtype": "float32",
                "device": "cpu",
            }
        )
        metadata = dict(cfg.get("metadata") or {})
        metadata["hook_name"] = self.hook_name
        cfg["metadata"] = metadata
        if self.k is not None:
            cfg["k"] = self.k
        if self.architecture == "topk":
            cfg["activation_fn_str"] = "topk"
            cfg["activation_fn_kwargs"] = {"k": self.k}
        elif self.architecture == "standard":
            cfg["activation_fn_str"] = "relu"
        ours = dict(cfg.get("actviz") or {})
        ours.update(
            {
                "heldout_fvu": self.heldout_fvu,
                "l0": self.l0,
                "dead_fraction": self.dead_fraction,
                "info": dict(self.info),
            }
        )
        cfg["actviz"] = ours
        return cfg

    def weights(self) -> dict[str, torch.Tensor]:
        """The tensors of ``sae_weights.safetensors`` (the dictionary's own: do not write them)."""
        tensors = {
            "W_enc": self.W_enc,
            "W_dec": self.W_dec,
            "b_enc": self.b_enc,
            "b_dec": self.b_dec,
        }
        if self.threshold is not None:
            tensors["threshold"] = self.threshold
        return tensors

    def save(self, folder: str | os.PathLike) -> Path:
        """Write ``cfg.json`` and ``sae_weights.safetensors`` into ``folder`` (made if needed),
        which :func:`load` reads back exactly; returns the folder."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        write_tensors(out / WEIGHTS_FILE, self.weights(), {"format": "pt"})
        (out / CFG_FILE).write_text(json.dumps(self.to_cfg(), indent=1), encoding="utf-8")
        return out


def _architecture(cfg: Mapping[str, Any]) -> str:
    arch = cfg.get("architecture")
    fn = str(cfg.get("activation_fn_str") or cfg.get("activation_fn") or "").lower()
    if arch is None:
        arch = "topk" if fn == "topk" else "standard"
    arch = str(arch).lower()
    if arch in ("relu", "standard"):
        return "standard" if fn != "topk" else "topk"
    if arch in ("topk", "jumprelu"):
        return arch
    raise ValueError(
        f"architecture {arch!r} is not supported (standard, topk and jumprelu dictionaries load)"
    )


def load(folder: str | os.PathLike) -> Concepts:
    """Read a standard, topk or jumprelu dictionary from a SAELens folder (``cfg.json`` +
    ``sae_weights.safetensors``, older and newer layouts); ``FileNotFoundError`` for a missing
    file, ``ValueError`` for what it does not handle."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    for name in (CFG_FILE, WEIGHTS_FILE):
        if not (root / name).is_file():
            raise FileNotFoundError(
                f"{folder}: no {name} (a SAELens folder holds {CFG_FILE} and {WEIGHTS_FILE})"
            )
    try:
        cfg = json.loads((root / CFG_FILE).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{root / CFG_FILE}: not JSON ({exc})") from None
    tensors, _ = read_tensors(root / WEIGHTS_FILE)
    return from_parts(cfg, tensors, where=str(folder))


def from_parts(
    cfg: Mapping[str, Any], tensors: Mapping[str, torch.Tensor], *, where: str = "dictionary"
) -> Concepts:
    """A dictionary from a ``cfg.json``'s contents and its weights (``ValueError`` when they do not
    fit; ``where`` names the source)."""
    arch = _architecture(cfg)
    norm = cfg.get("normalize_activations")
    if norm not in (None, "none", "None", False):
        raise ValueError(f"{where}: normalize_activations={norm!r} is not supported (only 'none')")
    missing = [n for n in ("W_enc", "W_dec", "b_enc", "b_dec") if n not in tensors]
    if missing:
        raise ValueError(f"{where}: no {', '.join(missing)}")
    threshold = tensors.get("threshold")
    if threshold is None and "log_threshold" in tensors:
        threshold = tensors["log_threshold"].float().exp()
    k = cfg.get("k")
    if k is None:
        k = (cfg.get("activation_fn_kwargs") or {}).get("k")
    meta = cfg.get("metadata") or {}
    hook = cfg.get("hook_name") or meta.get("hook_name") or ""
    for key, want in (("d_in", tensors["W_enc"].shape[0]), ("d_sae", tensors["W_enc"].shape[1])):
        if key in cfg and int(cfg[key]) != int(want):
            raise ValueError(f"{where}: cfg.json says {key}={cfg[key]}, the weights {want}")
    ours = cfg.get("actviz") or {}
    rest = {
        key: value
        for key, value in cfg.items()
        if key not in ("d_in", "d_sae", "architecture", "hook_name", "k", "actviz")
    }
    return Concepts(
        W_enc=tensors["W_enc"],
        W_dec=tensors["W_dec"],
        b_enc=tensors["b_enc"],
        b_dec=tensors["b_dec"],
        architecture=arch,
        hook_name=str(hook),
        k=None if k is None else int(k),
        threshold=threshold,
        apply_b_dec_to_input=bool(cfg.get("apply_b_dec_to_input", True)),
        heldout_fvu=ours.get("heldout_fvu"),
        l0=ours.get("l0"),
        dead_fraction=ours.get("dead_fraction"),
        info=ours.get("info") or {},
        cfg=rest,
    )
