"""The cost of channel effects on ResNet-18 (random init), four layers.

* ``effects_estimate_ratio``: ``actviz.effects(method="estimate")`` (every channel of
  ``layer1``..``layer4``) against the capture it runs, alone: ``capture`` of the same layers
  with the same options (gradients, no input gradients, no layer inputs). What is left is the
  cost of the estimate itself. Target: at most 1.05.
* ``effects_exact_per_channel``: :func:`actviz.analysis.effects.channel_effects.verify` of the top
  16 channels of each of the four layers (a batch of 16 per layer, as "Verify top 16" does), per
  channel, against one bare single-image forward pass (``no_grad``). Batches share the modules
  before their layer (:mod:`actviz.analysis.effects.exact`), so deeper layers cost less. Target:
  at most 0.5.

Both are medians of per-pair ratios of interleaved runs (:func:`actviz.bench.timing.paired`).
"""

from __future__ import annotations

import torch
import torchvision

from actviz.analysis.effects.channel_effects import effects, verify
from actviz.bench.timing import Paired, paired
from actviz.core.capture import capture

LAYERS = ("layer1", "layer2", "layer3", "layer4")


def measure(
    arch: str = "resnet18", size: int = 224, pairs: int = 7, verified: int = 16, batch: int = 16
) -> dict:
    """Both figures and their rows (see the module docstring)."""
    torch.manual_seed(0)
    model = torchvision.models.get_model(arch, weights=None).eval()
    x = torch.randn(1, 3, size, size)
    layers = list(LAYERS)
    estimate = paired(
        f"{arch} {size}px, 4 layers: estimate / capture",
        lambda: capture(model, x, layers, input_grads=False, keep_inputs=False),
        lambda: effects(model, x, layers),
        pairs,
    )
    est = effects(model, x, layers)
    # What a window's "Verify top 16" asks of each layer: one batch of 16 per layer.
    chosen = {layer: [r.channel for r in est.top(layer, verified)] for layer in layers}
    count = verified * len(layers)

    def forward() -> None:
        with torch.no_grad():
            model(x)

    exact = paired(
        f"{arch} {size}px: {count} exact (batch {batch}) / fwd",
        forward,
        lambda: verify(model, est, chosen, batch=batch),
        pairs,
    )
    per_channel = Paired(
        f"{arch} {size}px: one exact channel / one fwd",
        exact.base_ms,
        exact.test_ms / count,
        exact.ratio / count,
        exact.pairs,
    )
    return {
        "rows": [estimate, exact, per_channel],
        "effects_estimate_ratio": estimate.ratio,
        "effects_exact_per_channel": per_channel.ratio,
    }


def print_table(results: dict) -> None:
    print(
        f"{'channel effects (median of paired runs)':<44} {'base ms':>9} {'test ms':>9} {'ratio':>8}"
    )
    for r in results["rows"]:
        print(r.row())


def run(quick: bool, summary: dict) -> None:
    """The bench section: prints the table, puts both figures into ``summary``."""
    results = measure(pairs=3 if quick else 9)
    print_table(results)
    for key in ("effects_estimate_ratio", "effects_exact_per_channel"):
        summary[key] = results[key]
