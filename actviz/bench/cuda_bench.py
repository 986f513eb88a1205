"""CUDA checks and figures, run once on a machine with a GPU (skipped without one).

``python -m actviz.bench cuda`` (or ``python -m actviz.bench.cuda_bench``) checks, on the first
CUDA device:

* a capture on the GPU equals the same capture on the CPU for a random-init ResNet-18 and a
  timm ViT (when timm is installed): every recorded output, as the largest difference over the
  largest magnitude of that tensor (``cuda_capture_rel``; target <= 1e-5), and the gradients
  held to bare PyTorch on the GPU (``cuda_grad_vs_bare_rel``; see :func:`compare_devices` for
  why not to the CPU's). TF32 is turned off for the comparison (it is on for cuDNN
  convolutions by default and alone gives differences of ~1e-3); the previous settings are put
  back;
* live frames with ``keep_on_device=True``: the records stay on the GPU, ``prepare(fast=True)``
  reduces there with one host copy, and its statistics against a CPU capture's
  (``cuda_live_rel``; the gradients' statistics move with the ReLU masks, as above), with the
  frame time of both paths;
* a dataset scan of 512 random 64-px images (128 with ``--quick``) on the GPU against the CPU: the same top-k images for
  every channel (``cuda_scan_topk_same``) and the scan rate of each;
* the capture section's ratios on the card: ResNet-18/50 at 224 px, blocks forward-only, every
  leaf and blocks with gradients, against bare PyTorch, each call synchronised
  (``cuda_capture_fwd_ratio``, ``cuda_capture_all_ratio``, ``cuda_capture_grad_ratio``), and the
  fixed cost of a capture with no layers (``cuda_capture_fixed_ms``).

Nothing here asserts; the figures go into the bench's JSON line with ``cuda_device`` naming the
card.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torchvision

from actviz.bench.timing import Paired, paired
from actviz.core.capture import capture, leaf_names
from actviz.core.structures import iter_tensors

#: Largest difference over largest magnitude accepted between a GPU and a CPU capture.
TOLERANCE = 1e-5


@contextlib.contextmanager
def exact_fp32() -> Iterator[None]:
    """TF32 off for convolutions and matrix products while the block runs (restored after)."""
    conv, mm = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = conv, mm


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max |b|, on float64 CPU copies (0 for two empty or all-zero tensors)."""
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    if a.shape != b.shape:
        return float("inf")
    if b.numel() == 0:
        return 0.0
    scale = b.abs().max().item()
    diff = (a - b).abs().max().item()
    return diff / scale if scale > 0 else diff


def _pairs(gpu: Any, cpu: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    yield from zip(iter_tensors(gpu), iter_tensors(cpu), strict=True)


def compare_devices(
    label: str, model: torch.nn.Module, x: torch.Tensor, layers: list[str] | None, device: str
) -> dict:
    """Capture ``model`` on the CPU and a copy of it on ``device``; the worst differences.

    Forward values are compared directly (``out_rel``). Gradients are compared too
    (``grad_rel``), but through a ReLU a forward difference of one rounding step can flip an
    element's mask and so move its gradient by a lot; the capture is then held to bare PyTorch:
    its input gradient on ``device`` against a plain ``autograd.grad`` there (``vs_bare_rel``,
    which must be ~0), and bare PyTorch's own CPU/GPU difference is given (``bare_grad_rel``).

    Returns ``{"model", "layers", "tensors", "out_rel", "grad_rel", "bare_grad_rel",
    "vs_bare_rel", "worst", "ok"}``; ``worst`` names the gradient that differs most.
    """
    worst = {"output": (0.0, ""), "grad": (0.0, "")}
    count = 0

    def note(kind: str, r: float, where: str) -> None:
        if r > worst[kind][0]:
            worst[kind] = (r, where)

    with exact_fp32():
        cpu = capture(model, x, layers)
        gpu_model = copy.deepcopy(model).to(device)
        gpu = capture(gpu_model, x.to(device), layers, target=cpu.target_index)
        bare = {}
        for tag, m, inp in (("cpu", model, x), ("gpu", gpu_model, x.to(device))):
            xi = inp.clone().requires_grad_(True)
            out = m(xi)
            bare[tag] = torch.autograd.grad(
                out.reshape(out.shape[0], -1)[:, cpu.target_index].sum(), xi
            )[0]
    for name in cpu.names:
        for rc, rg in zip(cpu.calls(name), gpu.calls(name), strict=True):
            for part, kind in (("output", "output"), ("grad_output", "grad")):
                for tg, tc in _pairs(getattr(rg, part), getattr(rc, part)):
                    count += 1
                    note(kind, _rel(tg, tc), f"{name}[{rc.call_index}].{part}")
    for tg, tc in _pairs(gpu.input_grads, cpu.input_grads):
        count += 1
        note("grad", _rel(tg, tc), "input gradient")
    vs_bare = _rel(gpu.input_grads, bare["gpu"])
    out_rel, grad_rel = worst["output"][0], worst["grad"][0]
    bare_rel = _rel(bare["gpu"], bare["cpu"])
    return {
        "model": label,
        "layers": len(cpu.names),
        "tensors": count,
        "out_rel": out_rel,
        "grad_rel": grad_rel,
        "bare_grad_rel": bare_rel,
        "vs_bare_rel": vs_bare,
        "worst": worst["grad"][1],
        "ok": out_rel <= TOLERANCE and vs_bare <= TOLERANCE,
    }


def live_frames(device: str, frames: int = 20, size: int = 112) -> dict:
    """Live frames on the GPU (``keep_on_device``) through ``prepare(fast=True)``.

    Returns the worst relative difference of each shown layer's statistics against the same
    frame captured and prepared on the CPU (``max_rel``), where the records lay (``on_device``),
    and the median time of one frame (capture + prepare) on each path: GPU with records kept
    there, GPU with records copied to the host first, and CPU.
    """
    from actviz.bench.capture_bench import block_names
    from actviz.display.prepare import prepare
    from actviz.display.prepared import DisplaySpec

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    gpu_model = copy.deepcopy(model).to(device)
    layers = block_names(model)
    spec = DisplaySpec(layers=tuple(layers))
    x = torch.randn(1, 3, size, size)
    xg = x.to(device)
    worst, on_device = 0.0, True
    with exact_fp32():
        cap_cpu = capture(model, x, layers)
        cap_gpu = capture(gpu_model, xg, layers, keep_on_device=True)
        on_device = all(r.output.is_cuda for n in cap_gpu.names for r in cap_gpu.calls(n))
        host = prepare(cap_cpu, spec, fast=True)
        dev = prepare(cap_gpu, spec, fast=True)
    for name in host.shown:
        for key in ("mean", "std", "min", "max", "grad_norm"):
            a, b = dev.layers[name].stats.get(key), host.layers[name].stats.get(key)
            if a is None or b is None:
                continue
            worst = max(worst, abs(a - b) / max(abs(b), 1e-12))

    def frame(m: torch.nn.Module, inp: torch.Tensor, keep: bool) -> Callable[[], object]:
        def run() -> object:
            cap = capture(m, inp, layers, keep_on_device=keep)
            out = prepare(cap, spec, fast=True)
            if inp.is_cuda:  # the frame ends when its kernels do
                torch.cuda.synchronize()
            return out

        return run

    times = {}
    for label, fn in (
        ("gpu_keep", frame(gpu_model, xg, True)),
        ("gpu_copy", frame(gpu_model, xg, False)),
        ("cpu", frame(model, x, False)),
    ):
        fn()
        samples = []
        for _ in range(frames):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        samples.sort()
        times[label] = samples[len(samples) // 2] * 1e3
    return {
        "layers": len(layers),
        "size": size,
        "max_rel": worst,
        "on_device": on_device,
        "ok": on_device and worst <= TOLERANCE,
        "frame_ms": times,
    }


def scan_check(device: str, images: int = 256, size: int = 64) -> dict:
    """The same dataset scan on the GPU and the CPU: same top-k images, and each rate."""
    from actviz.data.scan import scan

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    data = torch.randn(images, 3, size, size, generator=torch.Generator().manual_seed(1))
    layers = ["layer3", "layer4"]
    out = {}
    with exact_fp32():
        for label, m in (("cpu", model), ("gpu", copy.deepcopy(model).to(device))):
            t0 = time.perf_counter()
            out[label] = scan(m, data, layers, k=5, cache=False, num_workers=0, batch_size=64)
            out[label + "_s"] = time.perf_counter() - t0
    same, worst = True, 0.0
    for layer in layers:
        a, b = out["gpu"].results[layer], out["cpu"].results[layer]
        same = same and bool((a.indices == b.indices).all())
        scale = max(float(abs(b.values).max()), 1e-12)
        worst = max(worst, float(abs(a.values - b.values).max()) / scale)
    return {
        "images": images,
        "size": size,
        "topk_same": same,
        "values_rel": worst,
        "gpu_images_per_s": images / out["gpu_s"],
        "cpu_images_per_s": images / out["cpu_s"],
    }


def _sync(fn: Callable[[], object], device: str) -> Callable[[], object]:
    """``fn`` timed to the end of its GPU work (a CUDA call returns before its kernels end)."""
    if not device.startswith("cuda"):
        return fn

    def run() -> object:
        out = fn()
        torch.cuda.synchronize()
        return out

    return run


def capture_ratios(device: str, pairs: int = 15, size: int = 224) -> dict:
    """The capture section's ratios on the GPU (each call synchronised), plus the fixed cost."""
    from actviz.bench.capture_bench import block_names

    rows: list[Paired] = []
    out: dict = {}
    torch.manual_seed(0)
    for arch in ("resnet18", "resnet50"):
        model = torchvision.models.get_model(arch, weights=None).eval().to(device)
        x = torch.randn(1, 3, size, size, device=device)
        blocks, leaves = block_names(model), leaf_names(model)

        def bare_fwd(model: torch.nn.Module = model, x: torch.Tensor = x) -> None:
            with torch.no_grad():
                model(x)

        def bare_grad(model: torch.nn.Module = model, x: torch.Tensor = x) -> None:
            xi = x.clone().requires_grad_(True)
            y = model(xi)
            top = y.detach().argmax(1)
            torch.autograd.grad(y.gather(1, top[:, None]).sum(), [xi])

        fwd = paired(
            f"{arch} fwd: {len(blocks)} blocks / bare",
            _sync(bare_fwd, device),
            _sync(lambda m=model, x=x, b=blocks: capture(m, x, b, gradients=False), device),
            pairs,
        )
        all_ = paired(
            f"{arch} fwd: all {len(leaves)} leaves / bare",
            _sync(bare_fwd, device),
            _sync(lambda m=model, x=x: capture(m, x, None, gradients=False), device),
            pairs,
        )
        grad = paired(
            f"{arch} grad: {len(blocks)} blocks / bare",
            _sync(bare_grad, device),
            _sync(lambda m=model, x=x, b=blocks: capture(m, x, b), device),
            pairs,
        )
        rows += [fwd, all_, grad]
        for key, row in (("fwd", fwd), ("all", all_), ("grad", grad)):
            out[f"cuda_capture_{key}_ratio"] = max(
                out.get(f"cuda_capture_{key}_ratio", 0), row.ratio
            )
        if arch == "resnet18":
            small = torch.randn(1, 3, 32, 32, device=device)

            def bare_small(model: torch.nn.Module = model, small: torch.Tensor = small) -> None:
                with torch.no_grad():
                    model(small)

            fixed = paired(
                "resnet18 32 px: no layers / bare",
                _sync(bare_small, device),
                _sync(lambda m=model, s=small: capture(m, s, [], gradients=False), device),
                pairs * 2,
            )
            rows.append(fixed)
            out["cuda_capture_fixed_ms"] = fixed.diff_ms
    out["rows"] = rows
    return out


def run(quick: bool, summary: dict) -> None:
    """The bench section: every check and figure above, printed, into ``summary``."""
    if not torch.cuda.is_available():
        print("cuda: no CUDA device here; nothing measured")
        return
    device = "cuda"
    name = torch.cuda.get_device_name(0)
    print(f"cuda: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    summary["cuda_device"] = name
    checks = [
        compare_devices(
            "resnet18 224 px, every leaf",
            _seeded(lambda: torchvision.models.resnet18(weights=None).eval()),
            torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),
            None,
            device,
        )
    ]
    vit = _timm_vit()
    if vit is not None:
        checks.append(
            compare_devices(
                "timm vit_tiny_patch16_224, every leaf",
                vit,
                torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),
                None,
                device,
            )
        )
    for c in checks:
        print(
            f"  {c['model']:<40} {c['tensors']:5d} tensors  GPU vs CPU: outputs"
            f" {c['out_rel']:.1e}, gradients {c['grad_rel']:.1e} (bare PyTorch's input"
            f" gradient {c['bare_grad_rel']:.1e}); input gradient vs bare on the GPU"
            f" {c['vs_bare_rel']:.1e}  {'ok' if c['ok'] else 'OVER ' + str(TOLERANCE)}"
        )
    summary["cuda_capture_rel"] = max(c["out_rel"] for c in checks)
    summary["cuda_grad_vs_bare_rel"] = max(c["vs_bare_rel"] for c in checks)
    live = live_frames(device, frames=10 if quick else 30)
    t = live["frame_ms"]
    print(
        f"  live frames (resnet18 {live['size']} px, {live['layers']} layers): records on GPU"
        f" {live['on_device']}, stats max rel diff {live['max_rel']:.2e}; frame ms: GPU kept"
        f" {t['gpu_keep']:.1f}, GPU copied {t['gpu_copy']:.1f}, CPU {t['cpu']:.1f}"
    )
    summary["cuda_live_rel"] = live["max_rel"]
    summary["cuda_live_frame_ms"] = t["gpu_keep"]
    sc = scan_check(device, images=128 if quick else 512)
    print(
        f"  scan ({sc['images']} images {sc['size']} px, layer3+layer4): top-k same"
        f" {sc['topk_same']}, values max rel diff {sc['values_rel']:.2e}; images/s GPU"
        f" {sc['gpu_images_per_s']:.0f}, CPU {sc['cpu_images_per_s']:.0f}"
    )
    summary["cuda_scan_topk_same"] = sc["topk_same"]
    summary["cuda_scan_images_per_s"] = sc["gpu_images_per_s"]
    ratios = capture_ratios(device, pairs=5 if quick else 15)
    print(f"  {'capture on the GPU':<44} {'bare ms':>9} {'ours ms':>9} {'ratio':>8}")
    for row in ratios.pop("rows"):
        print("  " + row.row())
    summary.update(ratios)


def _seeded(make: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    torch.manual_seed(0)
    return make()


def _timm_vit() -> torch.nn.Module | None:
    try:
        import timm
    except ImportError:
        print("  (timm not installed: no ViT check)")
        return None
    return _seeded(lambda: timm.create_model("vit_tiny_patch16_224", pretrained=False).eval())


def main(argv: list[str] | None = None) -> int:
    """Run the checks alone: ``python -m actviz.bench.cuda_bench [--quick]``."""
    parser = argparse.ArgumentParser(prog="python -m actviz.bench.cuda_bench")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    summary: dict = {}
    run(args.quick, summary)
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
