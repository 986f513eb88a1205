"""The cost of what-if edits: a capture with three edits against the same capture without.

Both sides record the blocks a user ticks first (:func:`capture_bench.block_names`) with
gradients, on the same input, interleaved. The three edits are of three kinds on three depths,
one of them on a recorded block: ``ablate`` three channels of ``layer1.0.conv1``, ``scale`` two
channels of the recorded ``layer2.1``, ``clamp`` ``layer3.0.bn2``. Target: ``edits_ratio`` at
most 1.05.
"""

from __future__ import annotations

import torch
import torchvision

from actviz.bench.capture_bench import block_names
from actviz.bench.timing import Paired, paired
from actviz.core.capture import capture
from actviz.core.edit_kinds import ablate, clamp, scale

#: The edits of the benchmark (ResNet-18 and ResNet-50 both have these modules).
EDITS = {
    "layer1.0.conv1": ablate([1, 5, 9]),
    "layer2.1": scale([3, 10], 0.5),
    "layer3.0.bn2": clamp(max=1.0),
}


def run(
    models: tuple[str, ...] = ("resnet18", "resnet50"), pairs: int = 15, size: int = 224
) -> dict:
    """``edits_ratio`` (the worst model's) and one row per model."""
    torch.manual_seed(0)
    rows: list[Paired] = []
    for arch in models:
        model = torchvision.models.get_model(arch, weights=None).eval()
        x = torch.randn(1, 3, size, size)
        blocks = block_names(model)
        rows.append(
            paired(
                f"{arch} fwd+grad, {len(blocks)} blocks: 3 edits / none",
                lambda m=model, b=blocks, x=x: capture(m, x, b),
                lambda m=model, b=blocks, x=x: capture(m, x, b, edits=EDITS),
                pairs,
            )
        )
    return {"rows": rows, "edits_ratio": max(r.ratio for r in rows)}


def print_table(results: dict) -> None:
    print(
        f"{'what-if edits (median of paired runs)':<44} {'none ms':>9} {'edits ms':>9} {'ratio':>8}"
    )
    for r in results["rows"]:
        print(r.row())
