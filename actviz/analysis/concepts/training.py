"""Training a sparse dictionary on a layer's activation vectors: :func:`train`.

TopK by default (BatchTopK and ReLU + L1 as options): Adam on vectors scaled to unit spread,
unit-norm decoder rows, dead concepts resampled; a fixed seed gives the same dictionary.
Figures: :mod:`actviz.bench.concepts_bench`.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from actviz.analysis.concepts.dictionary import Concepts
from actviz.analysis.concepts.vectors import (
    Reservoir,
    StreamCancelled,
    StreamStats,
    collect,
    stream_batches,
)

#: Bytes the kept vectors may take by default (training and held-out together).
DEFAULT_BUDGET = 512 << 20
_TRAINED = ("topk", "batchtopk", "relu")


class TrainCancelled(Exception):
    """``should_stop()`` returned True."""


@dataclass(frozen=True)
class TrainProgress:
    """Where training is: ``stage`` ``"collect"`` or ``"train"``, ``done``/``total`` items or steps,
    ``vectors`` seen, recent ``fvu``, ``eta_s`` and ``epoch`` (None or 0 where unknown).
    """

    stage: str
    done: int
    total: int
    vectors: int
    fvu: float | None = None
    eta_s: float | None = None
    epoch: int = 0


def _fused_adam(params: list[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError, ValueError):  # a torch or device without fused Adam
        return torch.optim.Adam(params, lr=lr)


def _gather_source(
    source: Any,
    layer: str | None,
    model: Any,
    budget: int,
    holdout_every: int,
    seed: int,
    progress: Callable[[TrainProgress], None] | None,
    should_stop: Callable[[], bool] | None,
    stream_kw: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """Training and held-out vectors ``(N, d)`` float32, and what collecting them did."""
    gen = torch.Generator().manual_seed(seed + 1)
    held_bytes = budget // holdout_every
    train_res = Reservoir(budget - held_bytes, gen)
    held_res = Reservoir(held_bytes, gen)
    stats = StreamStats()
    t0 = time.perf_counter()
    if isinstance(source, np.ndarray):
        source = torch.from_numpy(np.ascontiguousarray(source))
    if model is None and isinstance(source, torch.Tensor):
        x = source.detach().reshape(-1, source.shape[-1]) if source.ndim != 2 else source.detach()
        n = int(x.shape[0])
        perm = torch.randperm(n, generator=gen)
        n_held = min(n // holdout_every, max(1, held_bytes // (4 * max(1, x.shape[1]))))
        n_held = n_held if n > 1 else 0
        n_train = min(n - n_held, max(1, (budget - held_bytes) // (4 * max(1, x.shape[1]))))
        held = x[perm[:n_held]].float()
        train_x = x[perm[n_held : n_held + n_train]]
        train_x = train_x.float() if train_x.dtype != torch.float32 else train_x
        info = {"source": "vectors", "vectors_seen": n, "kept": n_train, "held_out": n_held}
        return train_x.contiguous(), held.contiguous(), info
    if model is None:
        if not isinstance(source, Iterable) or isinstance(source, (str, bytes, os.PathLike)):
            raise TypeError(
                "source must be a tensor of vectors (N, d), an iterable of such tensors, or "
                "data (a folder, paths, samples, a Dataset, a Scan) with model= given"
            )
        batches = ((None, torch.as_tensor(t), None) for t in source)
        kind = "stream"
    else:
        if layer is None:
            raise ValueError("training from data needs the layer whose vectors to learn")
        data = source
        sources = getattr(source, "sources", None)
        if sources is not None and hasattr(source, "layers"):  # a Scan: its data again
            data = [s for s in sources if isinstance(s, str)]
            if not data:
                raise ValueError("this scan's data were not files; pass the data itself")

        def said(done: int, total: int) -> None:
            if progress is not None:
                rate = done / max(time.perf_counter() - t0, 1e-9)
                eta = (total - done) / rate if rate > 0 else None
                progress(TrainProgress("collect", done, total, stats.vectors, None, eta))

        batches = stream_batches(
            model, data, layer, progress=said, should_stop=should_stop, **stream_kw
        )
        kind = "data"
    try:
        collect(batches, train_res, held_res, holdout_every=holdout_every, stats=stats)
    except StreamCancelled as exc:
        raise TrainCancelled(f"training cancelled while collecting vectors: {exc}") from None
    if should_stop is not None and should_stop():
        raise TrainCancelled("training cancelled while collecting vectors")
    if len(train_res) == 0:
        raise ValueError("the source gave no vectors")
    held = held_res.vectors()
    if held.shape[0] == 0 or held.shape[1] != train_res.vectors().shape[1]:
        held = torch.zeros(0, train_res.vectors().shape[1])
    info = {
        "source": kind,
        "vectors_seen": stats.vectors,
        "images": stats.images,
        "kept": len(train_res),
        "held_out": int(held.shape[0]),
        "buffer_bytes": train_res.nbytes + held_res.nbytes,
        "collect_s": round(time.perf_counter() - t0, 3),
    }
    return train_res.vectors(), held, info


def train(
    source: Any,
    layer: str | None = None,
    *,
    model: Any = None,
    n_concepts: int | None = None,
    k: int = 16,
    architecture: str = "topk",
    l1: float = 1.0,
    epochs: int = 5,
    batch_size: int = 1024,
    lr: float = 1e-3,
    seed: int = 0,
    memory_budget: int | None = None,
    holdout: float = 0.05,
    resample: bool = True,
    progress: Callable[[TrainProgress], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    data_batch_size: int | None = None,
    num_workers: int | None = 0,
    transform: Callable[..., Any] | None = None,
    device: str | torch.device | None = None,
) -> Concepts:
    """Learn a sparse dictionary of ``n_concepts`` concepts on a layer's activation vectors.

    Parameters
    ----------
    source
        A tensor of vectors ``(..., d)``, an iterable of them, or with ``model`` data as
        :func:`actviz.scan` takes it (each position or token is a vector).
    layer
        The module whose output is learned (``blocks.N.hook_resid_pre|post`` reads a block's
        input or output); the dictionary's ``hook_name``.
    n_concepts
        None: 8 x the vectors' width.
    k
        Active concepts per vector (``topk``), or on average per batch (``batchtopk``).
    architecture
        ``"topk"``, ``"batchtopk"`` (saved as ``jumprelu``) or ``"relu"`` (with ``l1``).
    seed
        Fixes initialisation, sample, order and resampling.
    memory_budget
        Bytes the kept vectors may take; a larger stream is sampled uniformly.
    holdout
        Share kept out of training for :attr:`Concepts.heldout_fvu`.
    resample
        Resample dead concepts during the first four fifths of training.
    should_stop
        Polled per batch; True raises :class:`TrainCancelled`.
    data_batch_size, num_workers, transform
        For streaming data through ``model``.
    """
    if architecture not in _TRAINED:
        raise ValueError(f"architecture must be one of {', '.join(_TRAINED)}, not {architecture!r}")
    if epochs < 1 or batch_size < 1:
        raise ValueError("epochs and batch_size must be at least 1")
    if not 0.0 <= holdout < 0.5:
        raise ValueError(f"holdout must lie in [0, 0.5), not {holdout}")
    budget = DEFAULT_BUDGET if memory_budget is None else int(memory_budget)
    holdout_every = max(2, round(1 / holdout)) if holdout > 0 else 1 << 62
    t_start = time.perf_counter()
    x, held, info = _gather_source(
        source,
        layer,
        model,
        budget,
        holdout_every,
        seed,
        progress,
        should_stop,
        {"batch_size": data_batch_size, "num_workers": num_workers, "transform": transform},
    )
    d = int(x.shape[1])
    n = int(n_concepts) if n_concepts is not None else 8 * d
    if n < 1:
        raise ValueError(f"n_concepts must be at least 1, not {n}")
    if architecture != "relu" and not 1 <= k <= n:
        raise ValueError(f"k must lie in 1..n_concepts ({n}), not {k}")
    dev = torch.device(device) if device is not None else torch.device("cpu")
    trainer = _Trainer(x, n, k, architecture, l1, batch_size, lr, seed, dev, resample)
    trainer.run(epochs, progress, should_stop)
    concepts = trainer.result(layer or "", info)
    held_fvu = None
    l0 = None
    eval_on = held if held.shape[0] else x[: min(len(x), 8192)]
    if eval_on.shape[0] > 1:
        held_fvu = concepts.fvu(eval_on)
        l0 = concepts.measure_l0(eval_on)
    info = dict(concepts.info)
    info["fvu_on"] = "held-out" if held.shape[0] else "training vectors"
    info["seconds"] = round(time.perf_counter() - t_start, 3)
    return replace(concepts, heldout_fvu=held_fvu, l0=l0, info=info)


class _Trainer:
    """The state of one training run (on vectors scaled to unit spread)."""

    def __init__(
        self,
        x: torch.Tensor,
        n: int,
        k: int,
        architecture: str,
        l1: float,
        batch_size: int,
        lr: float,
        seed: int,
        device: torch.device,
        resample: bool,
    ) -> None:
        self.x = x
        self.n, self.k = n, k
        self.arch = architecture
        self.l1 = float(l1)
        self.batch = min(batch_size, len(x))
        self.device = device
        self.resample_on = resample
        self.gen = torch.Generator().manual_seed(seed)
        d = int(x.shape[1])
        mean = x.double().mean(0)
        spread = float((x.double() - mean).square().sum(1).mean())
        self.scale = math.sqrt(d / spread) if spread > 0 else 1.0
        w_dec = torch.randn(n, d, generator=self.gen)
        w_dec /= w_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
        self.w_dec = w_dec.to(device)
        self.w_enc_t = w_dec.clone().to(device)  # (n, d): row i is concept i's encoder
        self.b_enc = torch.zeros(n, device=device)
        self.b_dec = (mean.float() * self.scale).to(device)
        self.params = [self.w_enc_t, self.w_dec, self.b_enc, self.b_dec]
        for p in self.params:
            p.requires_grad_(architecture != "topk")
        self.opt = _fused_adam(self.params, lr)
        self.since_fired = torch.zeros(n, dtype=torch.int64, device=device)
        self.epoch_counts = torch.zeros(n, dtype=torch.int64, device=device)
        self.threshold = 0.0  # batchtopk: running mean of the smallest kept activation
        self.dead_after = max(5000, 20 * n // max(1, k))
        self.resampled = 0
        self.steps = 0

    # -- one step
    def _step_topk(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One manual-gradient TopK step; returns (per-vector squared error, fired indices)."""
        b, k, n = xb.shape[0], self.k, self.n
        w_enc_t, w_dec, b_enc, b_dec = self.params
        xc = xb - b_dec
        pre = torch.addmm(b_enc, xc, w_enc_t.T)
        vals, idx = pre.topk(k, dim=1, sorted=False)
        idx, order = idx.sort(dim=1)  # CSR wants sorted columns
        vals = vals.gather(1, order)
        act = vals.clamp_min(0)
        flat_idx = idx.reshape(-1)
        crow = torch.arange(0, b * k + 1, k, device=xb.device)
        z = torch.sparse_csr_tensor(crow, flat_idx, act.reshape(-1), (b, n), check_invariants=False)
        err = (z @ w_dec).add_(b_dec).sub_(xb)  # x_hat - x
        g = err * (2.0 / b)
        pattern = torch.sparse_csr_tensor(
            crow, flat_idx, torch.zeros_like(act).reshape(-1), (b, n), check_invariants=False
        )
        g_act = torch.sparse.sampled_addmm(pattern, g, w_dec.T, beta=0.0).values()
        g_pre = g_act * (act.reshape(-1) > 0)
        rows = torch.arange(b, device=xb.device).repeat_interleave(k)
        cols = torch.stack((flat_idx, rows))
        w_dec.grad = torch.sparse.mm(
            torch.sparse_coo_tensor(cols, act.reshape(-1), (n, b), check_invariants=False), g
        )
        w_enc_t.grad = torch.sparse.mm(
            torch.sparse_coo_tensor(cols, g_pre, (n, b), check_invariants=False), xc
        )
        b_enc.grad = torch.zeros(n, device=xb.device).index_add_(0, flat_idx, g_pre)
        b_dec.grad = g.sum(0) - w_enc_t.T @ b_enc.grad
        return err.square().sum(1), flat_idx[act.reshape(-1) > 0]

    def _step_autograd(self, xb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w_enc_t, w_dec, b_enc, b_dec = self.params
        for p in self.params:
            p.grad = None
        with torch.enable_grad():
            pre = torch.addmm(b_enc, xb - b_dec, w_enc_t.T)
            z = pre.clamp_min(0)
            if self.arch == "batchtopk":
                keep = min(z.numel(), self.k * xb.shape[0])
                vals, where = z.reshape(-1).topk(keep, sorted=False)
                z = torch.zeros_like(z).reshape(-1).scatter(0, where, vals).reshape(z.shape)
                with torch.no_grad():
                    positive = vals[vals > 0]
                    if positive.numel():
                        low = float(positive.min())
                        self.threshold = (
                            low if self.steps == 0 else 0.99 * self.threshold + 0.01 * low
                        )
            err = z @ w_dec + b_dec - xb
            per = err.square().sum(1)
            loss = per.mean()
            if self.arch == "relu":
                loss = loss + self.l1 * z.sum(1).mean()
            loss.backward()
        fired = torch.nonzero(z.detach() > 0)[:, 1]
        return per.detach(), fired

    @torch.no_grad()
    def step(self, xb: torch.Tensor) -> torch.Tensor:
        """One optimisation step on ``xb`` (scaled); returns the per-vector squared errors."""
        per, fired = self._step_topk(xb) if self.arch == "topk" else self._step_autograd(xb)
        w_dec = self.w_dec
        # The gradient along each (unit) row only changes its norm, which the projection
        # below undoes: remove it so Adam's step goes to the direction.
        grad = w_dec.grad
        grad -= (grad * w_dec).sum(1, keepdim=True) * w_dec
        self.opt.step()
        w_dec /= w_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
        self.since_fired += xb.shape[0]
        self.since_fired[fired] = 0
        self.epoch_counts.index_add_(0, fired, torch.ones_like(fired))
        self.steps += 1
        return per

    @torch.no_grad()
    def resample_dead(self, xb: torch.Tensor, per: torch.Tensor) -> int:
        """Give dead concepts the residual directions of badly reconstructed vectors."""
        dead = torch.nonzero(self.since_fired > self.dead_after).flatten()
        if dead.numel() == 0:
            return 0
        w_enc_t, w_dec, b_enc, b_dec = self.params
        weights = per.double().clamp_min(0) ** 2
        if float(weights.sum()) <= 0:
            return 0
        pick = torch.multinomial(weights.cpu(), dead.numel(), replacement=True, generator=self.gen)
        chosen = xb[pick.to(xb.device)]
        z = self._encode(chosen)
        resid = chosen - (z @ w_dec + b_dec)
        resid /= resid.norm(dim=1, keepdim=True).clamp_min(1e-12)
        alive = torch.ones(self.n, dtype=torch.bool, device=xb.device)
        alive[dead] = False
        norm = float(w_enc_t[alive].norm(dim=1).mean()) if bool(alive.any()) else 1.0
        w_dec[dead] = resid
        w_enc_t[dead] = resid * (0.5 * norm)
        b_enc[dead] = 0.0
        for p in self.params:
            state = self.opt.state.get(p, {})
            for key in ("exp_avg", "exp_avg_sq"):
                if key in state and p is not b_dec:
                    state[key][dead] = 0.0
        self.since_fired[dead] = 0
        self.resampled += int(dead.numel())
        return int(dead.numel())

    def _encode(self, xb: torch.Tensor) -> torch.Tensor:
        w_enc_t, _, b_enc, b_dec = self.params
        pre = torch.addmm(b_enc, xb - b_dec, w_enc_t.T)
        if self.arch == "topk":
            vals, idx = pre.topk(self.k, dim=1, sorted=False)
            return torch.zeros_like(pre).scatter(1, idx, vals.clamp_min(0))
        if self.arch == "batchtopk":
            return torch.where(pre > self.threshold, pre, torch.zeros((), device=pre.device))
        return pre.clamp_min(0)

    def run(
        self,
        epochs: int,
        progress: Callable[[TrainProgress], None] | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        x = self.x
        n_vec = int(x.shape[0])
        per_epoch = max(1, n_vec // self.batch)  # the last partial batch is dropped
        total = per_epoch * epochs
        check = max(1, per_epoch // 4)
        stop_resampling = int(total * 0.8)
        mu = self.b_dec.clone()
        t0 = time.perf_counter()
        err_sum = var_sum = 0.0
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
            for epoch in range(epochs):
                order = torch.randperm(n_vec, generator=self.gen)
                self.epoch_counts.zero_()
                for s in range(per_epoch):
                    if should_stop is not None and should_stop():
                        raise TrainCancelled(f"training cancelled at step {self.steps} of {total}")
                    rows = order[s * self.batch : (s + 1) * self.batch]
                    xb = x[rows].to(self.device, non_blocking=True).mul_(self.scale)
                    per = self.step(xb)
                    if (
                        self.resample_on
                        and self.steps % check == 0
                        and self.steps < stop_resampling
                    ):
                        self.resample_dead(xb, per)
                    if progress is not None and (self.steps % 10 == 0 or self.steps == total):
                        err_sum = float(per.sum())
                        var_sum = float((xb - mu).square().sum())
                        rate = self.steps / max(time.perf_counter() - t0, 1e-9)
                        progress(
                            TrainProgress(
                                "train",
                                self.steps,
                                total,
                                self.steps * self.batch,
                                err_sum / var_sum if var_sum > 0 else None,
                                (total - self.steps) / rate if rate > 0 else None,
                                epoch + 1,
                            )
                        )
        self.train_s = time.perf_counter() - t0

    def result(self, hook_name: str, info: dict[str, Any]) -> Concepts:
        """The dictionary in the layer's own units (the scale folded into the biases)."""
        s = self.scale
        w_enc_t, w_dec, b_enc, b_dec = (p.detach().cpu() for p in self.params)
        dead = float((self.epoch_counts == 0).float().mean())
        info = {
            **info,
            "trained_as": self.arch,
            "n_concepts": self.n,
            "k": self.k if self.arch != "relu" else None,
            "l1": self.l1 if self.arch == "relu" else None,
            "steps": self.steps,
            "batch_size": self.batch,
            "lr": self.opt.param_groups[0]["lr"],
            "seed": int(self.gen.initial_seed()),
            "scale": s,
            "resampled": self.resampled,
            "train_s": round(getattr(self, "train_s", 0.0), 3),
        }
        common = {
            "W_enc": w_enc_t.T.contiguous(),
            "W_dec": w_dec,
            "b_enc": b_enc / s,
            "b_dec": b_dec / s,
            "hook_name": hook_name,
            "dead_fraction": dead,
            "info": info,
        }
        if self.arch == "topk":
            return Concepts(architecture="topk", k=self.k, **common)
        if self.arch == "batchtopk":
            th = torch.full((self.n,), self.threshold / s)
            return Concepts(architecture="jumprelu", threshold=th, **common)
        return Concepts(architecture="standard", **common)
