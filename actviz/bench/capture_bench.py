"""Capture overhead on ResNet-18/50 versus bare PyTorch, measured side by side.

``gradcam_ratio`` compares Grad-CAM at ``layer4`` through ``actviz.capture(...,
input_grads=False)`` with the cheapest method there is (TorchCAM's): a plain forward hook on
``layer4`` and ``torch.autograd.grad`` of the target with respect to that output only. Both
sides finish with the same ``views.grad_cam``.

:func:`overheads` splits a capture's cost into a fixed part and a part per hooked call:

* ``capture_fixed_ms``: a capture recording no layer (forward only) minus a bare ``no_grad``
  forward, ResNet-18 at 32 px (target <= 0.3 ms), the median of 180 interleaved pairs'
  differences (30 pairs' difference of medians moved by ~0.1 ms between runs);
* ``capture_per_call_us``: a forward-only capture of every leaf of torchvision's
  MobileNetV3-small minus a bare forward, divided by the hooked calls (target <= 30 us);
* ``capture_small_all_ratio``: every leaf with gradients against a bare forward plus
  ``autograd.grad`` of the same target to the input, MobileNetV3-small at 224 px (target
  <= 1.3).

All of them measure the library's default: glibc's allocator as the process found it
(:func:`actviz.tune_allocator` not called). The rows also count minor page faults per run:
the memory a capture keeps is returned to the OS when the capture is freed, so the next
capture can touch fresh pages again where a bare pass reuses what it freed. Forward-only
captures of a model seen to fault keep one record alive at the top of glibc's heap so the
freed ones stay warm, or, where that is not enough, copy their large records into warm pooled
memory (:mod:`actviz.core.pool`), which the figures include.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

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


def hooks_pairs(
    arch: str,
    model: torch.nn.Module,
    x: torch.Tensor,
    pairs: int,
    clock: Callable[[], float] | None = None,
) -> list[Paired]:
    """The library default against plain hooks keeping the same records, forward only and
    with gradients: ``capture(model, x, blocks)`` (and ``gradients=False``) against a forward
    hook per block that clones its output (what a record must keep: a later in-place op would
    overwrite it) and, with gradients, ``autograd.grad`` of the top-1 logit to every block's
    output and the input, as the capture's records and ``input_grads`` hold. ``clock``: as
    for :func:`~actviz.bench.timing.paired` (None: wall time; ``time.process_time``: CPU)."""
    blocks = block_names(model)
    modules = dict(model.named_modules())

    def hooked(grad: bool) -> None:
        outs: list[torch.Tensor] = []
        kept: list[torch.Tensor] = []

        def keep(_m: torch.nn.Module, _a: object, out: torch.Tensor) -> None:
            outs.append(out)
            kept.append(out.detach().clone())

        handles = [modules[n].register_forward_hook(keep) for n in blocks]
        try:
            if not grad:
                with torch.no_grad():
                    model(x)
                return
            xi = x.clone().requires_grad_(True)
            out = model(xi)
        finally:
            for h in handles:
                h.remove()
        top = out.detach().argmax(1)
        wanted = [xi, *(t for t in outs if t.requires_grad)]
        torch.autograd.grad(out.gather(1, top[:, None]).sum(), wanted, allow_unused=True)

    r_fwd = paired(
        f"{arch} fwd: {len(blocks)} blocks / hooks",
        lambda: hooked(False),
        lambda: capture(model, x, blocks, gradients=False),
        pairs,
        clock=clock,
    )
    r_grad = paired(
        f"{arch} fwd+grad: {len(blocks)} blocks / hooks",
        lambda: hooked(True),
        lambda: capture(model, x, blocks),
        pairs,
        clock=clock,
    )
    return [r_fwd, r_grad]


def hooks_run(
    models: tuple[str, ...] = ("resnet18", "resnet50"), pairs: int = 15, size: int = 224
) -> dict:
    """``capture_hooks_ratio``: the worst of :func:`hooks_pairs` over ``models`` (wall time),
    with rows and each model's forward / gradient ratios; ``capture_hooks_cpu_ratio``: the
    same in CPU time (the work done, steadier beside other tenants). Meant for a fresh process
    (see :func:`hooks_in_fresh_process`): nothing run before it, the library's defaults."""
    torch.manual_seed(0)
    results: dict = {"rows": []}
    for arch in models:
        model = torchvision.models.get_model(arch, weights=None).eval()
        x = torch.randn(1, 3, size, size)
        fwd, grad = hooks_pairs(arch, model, x, pairs)
        cpu_fwd, cpu_grad = hooks_pairs(arch, model, x, pairs, clock=time.process_time)
        cpu_fwd.name, cpu_grad.name = f"{cpu_fwd.name} (CPU)", f"{cpu_grad.name} (CPU)"
        results["rows"] += [fwd, grad, cpu_fwd, cpu_grad]
        results[arch] = {
            "hooks_fwd_ratio": fwd.ratio,
            "hooks_grad_ratio": grad.ratio,
            "hooks_cpu_ratio": max(cpu_fwd.ratio, cpu_grad.ratio),
        }
    results["capture_hooks_fwd_ratio"] = max(results[m]["hooks_fwd_ratio"] for m in models)
    results["capture_hooks_grad_ratio"] = max(results[m]["hooks_grad_ratio"] for m in models)
    results["capture_hooks_ratio"] = max(
        results["capture_hooks_fwd_ratio"], results["capture_hooks_grad_ratio"]
    )
    results["capture_hooks_cpu_ratio"] = max(results[m]["hooks_cpu_ratio"] for m in models)
    return results


def hooks_in_fresh_process(
    models: tuple[str, ...], pairs: int, size: int = 224, threads: int | None = None
) -> dict:
    """:func:`hooks_run` in a new Python process (a script's first captures: no pool, no
    allocator tuning, no window); its rows come back as text, its figures as numbers."""
    import json
    import subprocess
    import sys

    threads = torch.get_num_threads() if threads is None else threads
    code = (
        f"import json, torch; torch.set_num_threads({int(threads)})\n"
        "from actviz.bench.capture_bench import hooks_run\n"
        f"r = hooks_run({tuple(models)!r}, pairs={int(pairs)}, size={int(size)})\n"
        "print('\\n'.join(row.row() for row in r.pop('rows')))\n"
        "print(json.dumps(r))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        raise RuntimeError(
            "the hooks comparison failed in its own process: "
            + (proc.stderr.strip().splitlines() or ["no output"])[-1]
        )
    results = json.loads(lines[-1])
    results["row_text"] = lines[:-1]
    return results


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


def overheads(pairs: int = 15, small_size: int = 224, fixed_size: int = 32) -> dict:
    """``capture_fixed_ms``, ``capture_per_call_us`` and ``capture_small_all_ratio``, with rows.

    Parameters
    ----------
    pairs
        Interleaved pairs per figure (see :func:`actviz.bench.timing.paired`).
    small_size
        Input size of MobileNetV3-small (224 for the targets).
    fixed_size
        Input size of ResNet-18 for the fixed cost (32 for the target).
    """
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    x = torch.randn(1, 3, fixed_size, fixed_size)

    def bare_resnet() -> None:
        with torch.no_grad():
            resnet(x)

    fixed = paired(
        f"resnet18 {fixed_size} px: no layers / bare",
        bare_resnet,
        lambda: capture(resnet, x, [], gradients=False),
        # ~6 ms runs and a ~0.3 ms difference: many pairs, read as the median difference
        pairs * 12,
    )
    small = torchvision.models.mobilenet_v3_small(weights=None).eval()
    xs = torch.randn(1, 3, small_size, small_size)
    calls = sum(len(c) for c in capture(small, xs, None, gradients=False).records.values())

    def bare_small() -> None:
        with torch.no_grad():
            small(xs)

    def bare_small_grad() -> None:
        xi = xs.clone().requires_grad_(True)
        out = small(xi)
        top = out.detach().argmax(1)
        torch.autograd.grad(out.gather(1, top[:, None]).sum(), [xi])

    per_call = paired(
        f"mobilenet_v3_small {small_size} px: all {calls} calls / bare",
        bare_small,
        lambda: capture(small, xs, None, gradients=False),
        pairs,
    )
    all_grad = paired(
        f"mobilenet_v3_small {small_size} px: all + grads / bare",
        bare_small_grad,
        lambda: capture(small, xs, None),
        pairs,
    )
    return {
        "rows": [fixed, per_call, all_grad],
        # (bare, actviz) minor page faults per run, counted apart from the timed runs
        "faults": {
            "per_call": (
                minor_faults(bare_small),
                minor_faults(lambda: capture(small, xs, None, gradients=False)),
            ),
            "all_grad": (
                minor_faults(bare_small_grad),
                minor_faults(lambda: capture(small, xs, None)),
            ),
        },
        "capture_fixed_ms": fixed.diff_ms,
        "capture_per_call_us": (per_call.test_ms - per_call.base_ms) / calls * 1e3,
        "capture_small_all_ratio": all_grad.ratio,
        "calls": calls,
    }


def minor_faults(fn: Callable[[], object], runs: int = 3) -> float:
    """Minor page faults of this process per call of ``fn`` (NaN where it cannot be read)."""
    try:
        import resource
    except ImportError:  # not on Unix
        return math.nan
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(runs):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / runs


def print_overheads(results: dict) -> None:
    """The rows of :func:`overheads` and its three figures."""
    print(f"{'capture fixed and per-call cost':<44} {'bare ms':>9} {'actviz ms':>9} {'ratio':>8}")
    for r in results["rows"]:
        print(r.row())
    print(
        f"capture_fixed_ms {results['capture_fixed_ms']:.3f}, capture_per_call_us "
        f"{results['capture_per_call_us']:.1f} ({results['calls']} calls), "
        f"capture_small_all_ratio {results['capture_small_all_ratio']:.3f}"
    )
    faults = results.get("faults", {})
    if faults:
        print(
            "minor page faults per run (bare / actviz): "
            + ", ".join(f"{k} {b:.0f} / {a:.0f}" for k, (b, a) in faults.items())
        )


def print_table(results: dict) -> None:
    rows: list[Paired] = results["rows"]
    print(
        f"{'capture overhead (median of paired runs)':<44} {'bare ms':>9} {'actviz ms':>9} {'ratio':>8}"
    )
    for r in rows:
        print(r.row())
