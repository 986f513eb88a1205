"""Capture overhead on ResNet-18/50 versus bare PyTorch, measured side by side.

``gradcam_ratio`` compares Grad-CAM at ``layer4`` through ``actviz.capture(...,
input_grads=False)`` with the cheapest method there is (TorchCAM's): a plain forward hook on
``layer4`` and ``torch.autograd.grad`` of the target with respect to that output only. Both
sides finish with the same ``views.grad_cam``.
"""

from __future__ import annotations

import torch
import torchvision

from actviz.bench.timing import Paired, paired
from actviz.core.capture import capture, leaf_names
from actviz.display import attribution as views

GRADCAM_LAYER = "layer4"


def block_names(model: torch.nn.Module) -> list[str]:
    """The stem, every residual block, the pool and the head: what a user ticks first."""
    names = ["conv1", "bn1", "relu", "maxpool"]
    for stage in ("layer1", "layer2", "layer3", "layer4"):
        names += [f"{stage}.{i}" for i in range(len(getattr(model, stage)))]
    return names + ["avgpool", "fc"]


def run(
    models: tuple[str, ...] = ("resnet18", "resnet50"), pairs: int = 15, size: int = 224
) -> dict:
    """Measure forward, every-leaf and gradient overheads; returns ratios and rows."""
    torch.manual_seed(0)
    results: dict = {"rows": []}
    for arch in models:
        model = torchvision.models.get_model(arch, weights=None).eval()
        x = torch.randn(1, 3, size, size)
        results[arch], rows = _measure(arch, model, x, pairs)
        results["rows"] += rows
    first = models[0]
    results["capture_fwd_ratio"] = max(results[m]["fwd_ratio"] for m in models)
    results["capture_all_ratio"] = max(results[m]["all_ratio"] for m in models)
    results["capture_grad_ratio"] = max(results[m]["grad_ratio"] for m in models)
    results["capture_bytes_ratio"] = results[first]["bytes_ratio"]
    results["gradcam_ratio"] = max(results[m]["gradcam_ratio"] for m in models)
    return results


def _measure(arch: str, model: torch.nn.Module, x: torch.Tensor, pairs: int) -> tuple[dict, list]:
    blocks = block_names(model)
    leaves = leaf_names(model)

    def bare_fwd() -> None:
        with torch.no_grad():
            model(x)

    def bare_grad() -> None:
        xi = x.clone().requires_grad_(True)
        out = model(xi)
        top = out.detach().argmax(1)
        torch.autograd.grad(out.gather(1, top[:, None]).sum(), [xi])

    r_fwd = paired(
        f"{arch} fwd: {len(blocks)} blocks / bare",
        bare_fwd,
        lambda: capture(model, x, blocks, gradients=False),
        pairs,
    )
    r_all = paired(
        f"{arch} fwd: all {len(leaves)} leaves / bare",
        bare_fwd,
        lambda: capture(model, x, None, gradients=False),
        pairs,
    )
    r_grad = paired(
        f"{arch} fwd+grad: {len(blocks)} blocks / bare",
        bare_grad,
        lambda: capture(model, x, blocks, gradients=True),
        pairs,
    )
    r_cam = gradcam_pair(arch, model, x, pairs)
    cap = capture(model, x, blocks, gradients=False)
    expected = sum(r.tensor.numel() * r.tensor.element_size() for r in cap.all_records())
    figures = {
        "fwd_ratio": r_fwd.ratio,
        "all_ratio": r_all.ratio,
        "grad_ratio": r_grad.ratio,
        "bytes": cap.nbytes,
        "bytes_ratio": cap.nbytes / expected,
        "gradcam_ratio": r_cam.ratio,
    }
    return figures, [r_fwd, r_all, r_grad, r_cam]


def gradcam_pair(arch: str, model: torch.nn.Module, x: torch.Tensor, pairs: int) -> Paired:
    """Grad-CAM at ``layer4`` of class ``k`` (the top-1): actviz against a bare hook."""
    layer = dict(model.named_modules())[GRADCAM_LAYER]
    with torch.no_grad():
        k = int(model(x).argmax(1)[0])

    def bare() -> None:
        held: list[torch.Tensor] = []
        handle = layer.register_forward_hook(lambda _m, _a, out: held.append(out))
        try:
            out = model(x)
        finally:
            handle.remove()
        (grad,) = torch.autograd.grad(out[:, k].sum(), held[0])
        views.grad_cam(held[0].detach(), grad)

    def ours() -> None:
        cap = capture(model, x, [GRADCAM_LAYER], target=k, input_grads=False)
        rec = cap[GRADCAM_LAYER]
        views.grad_cam(rec.output, rec.grad_output)

    return paired(f"{arch} Grad-CAM {GRADCAM_LAYER} / hook + grad", bare, ours, pairs)


def print_table(results: dict) -> None:
    rows: list[Paired] = results["rows"]
    print(
        f"{'capture overhead (median of paired runs)':<44} {'bare ms':>9} {'actviz ms':>9} {'ratio':>8}"
    )
    for r in rows:
        print(r.row())
