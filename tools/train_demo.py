"""Train the bundled demo CNN and write its weights and sample images into ``resources/demo``.

Everything is generated here (no downloads): coloured shapes on textured backgrounds, drawn by
:func:`actviz.io.models.demo_model.generate_example`. The run is deterministic for a given seed and
thread count, CPU only, and takes about three minutes on two cores.

Usage::

    python tools/train_demo.py                 # writes resources/demo/{demo_cnn.pt,samples/}
    python tools/train_demo.py --out /tmp/d    # somewhere else

Outputs
-------
``demo_cnn.pt``
    float32 ``state_dict`` of :class:`actviz.io.models.demo_model.DemoNet` (about 250 kB).
``samples/<class>.png``
    One off-centre example per class; the file name is the true class.
``samples/boxes.json``
    ``{"<class>.png": [x0, y0, x1, y1]}``, the object's bounding box (x1, y1 exclusive; null for
    the background sample), used by the tests to check that Grad-CAM lands on the object.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import pathlib
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from actviz.io.models.demo_model import (
    DEMO_CLASSES,
    DEMO_GRADCAM_LAYER,
    build_demo_model,
    demo_transform,
    generate_example,
)

logger = logging.getLogger("train_demo")

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "resources" / "demo"

# Sample objects sit at least this far (pixels) from the image centre, so a Grad-CAM that just
# peaks in the middle of the image fails the check.
SAMPLE_MIN_OFFSET = 14.0


def make_dataset(n_per_class: int, seed: int) -> tuple[Tensor, Tensor, list[tuple[int, ...]]]:
    """Generate ``n_per_class`` images of every class, interleaved.

    Returns
    -------
    x : Tensor
        ``(N, 3, H, W)`` float32 in [0, 1].
    y : Tensor
        ``(N,)`` int64 labels.
    boxes : list of tuple
        Bounding box of each object.
    """
    rng = np.random.default_rng(seed)
    images, labels, boxes = [], [], []
    for _ in range(n_per_class):
        for label in range(len(DEMO_CLASSES)):
            example = generate_example(label, rng)
            images.append(demo_transform(example.image))
            labels.append(label)
            boxes.append(example.box)
    return torch.stack(images), torch.tensor(labels), boxes


def augment(x: Tensor, gen: torch.Generator) -> Tensor:
    """Flips, 90-degree turns and colour-channel shuffles: none of them changes a shape's class."""
    if torch.rand((), generator=gen) < 0.5:
        x = x.flip(3)
    k = int(torch.randint(4, (), generator=gen))
    if k:
        x = torch.rot90(x, k, dims=(2, 3))
    perm = torch.randperm(3, generator=gen)
    return x[:, perm]


@torch.no_grad()
def evaluate(model: nn.Module, x: Tensor, y: Tensor, batch: int = 256) -> float:
    """Top-1 accuracy of ``model`` on ``(x, y)``."""
    model.eval()
    correct = 0
    for i in range(0, len(x), batch):
        logits = model(x[i : i + batch].contiguous(memory_format=torch.channels_last))
        correct += int((logits.argmax(1) == y[i : i + batch]).sum())
    return correct / len(x)


def grad_cam_batch(model: nn.Module, x: Tensor, classes: Tensor) -> Tensor:
    """Grad-CAM of ``classes`` at :data:`DEMO_GRADCAM_LAYER`, upsampled to the input size.

    Plain torch (forward hook + ``autograd.grad``), so this script does not depend on
    ``actviz.core``. Returns ``(N, H, W)``, each map scaled to [0, 1].
    """
    model.eval()
    layer = model.get_submodule(DEMO_GRADCAM_LAYER)
    kept: list[Tensor] = []
    handle = layer.register_forward_hook(lambda _m, _i, out: kept.append(out))
    try:
        logits = model(x)
    finally:
        handle.remove()
    act = kept[0]
    score = logits.gather(1, classes[:, None]).sum()
    (grad,) = torch.autograd.grad(score, act)
    weights = grad.mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * act).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    flat = cam.flatten(1)
    lo, hi = flat.min(1).values, flat.max(1).values
    return ((flat - lo[:, None]) / (hi - lo).clamp_min(1e-12)[:, None]).view_as(cam).detach()


def cam_hits(
    cams: Tensor, boxes: list[tuple[int, ...] | None]
) -> tuple[list[bool | None], list[bool | None]]:
    """Whether each CAM's peak, and its mass centroid, fall inside the object's box.

    None for images without an object (the "background" class).
    """
    peak_hits: list[bool | None] = []
    centroid_hits: list[bool | None] = []
    h, w = cams.shape[-2:]
    ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    for cam, box in zip(cams, boxes, strict=True):
        if box is None:
            peak_hits.append(None)
            centroid_hits.append(None)
            continue
        x0, y0, x1, y1 = box
        py, px = divmod(int(cam.argmax()), w)
        peak_hits.append(x0 <= px < x1 and y0 <= py < y1)
        mass = cam.sum().clamp_min(1e-12)
        cy, cx = float((cam * ys).sum() / mass), float((cam * xs).sum() / mass)
        centroid_hits.append(x0 <= cx < x1 and y0 <= cy < y1)
    return peak_hits, centroid_hits


def train(args: argparse.Namespace) -> tuple[nn.Module, float]:
    """Train :class:`DemoNet` on freshly generated data; returns it (eval mode) and val accuracy."""
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    t0 = time.perf_counter()
    x_train, y_train, _ = make_dataset(args.train_per_class, seed=args.seed)
    x_val, y_val, val_boxes = make_dataset(args.val_per_class, seed=args.seed + 1)
    logger.info(
        "generated %d train / %d val images in %.1fs",
        len(x_train),
        len(x_val),
        time.perf_counter() - t0,
    )

    model = build_demo_model().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    steps_per_epoch = math.ceil(len(x_train) / args.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.2
    )

    t_train = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen)
        total_loss, correct = 0.0, 0
        for i in range(0, len(x_train), args.batch):
            idx = order[i : i + args.batch]
            xb = augment(x_train[idx], gen).contiguous(memory_format=torch.channels_last)
            yb = y_train[idx]
            logits = model(xb)
            loss = F.cross_entropy(logits, yb, label_smoothing=0.05)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item() * len(idx)
            correct += int((logits.argmax(1) == yb).sum())
        val_acc = evaluate(model, x_val, y_val)
        logger.info(
            "epoch %d/%d  loss %.4f  train acc %.4f  val acc %.4f  (%.0fs)",
            epoch + 1,
            args.epochs,
            total_loss / len(x_train),
            correct / len(x_train),
            val_acc,
            time.perf_counter() - t_train,
        )
    model = model.to(memory_format=torch.contiguous_format).eval()

    train_acc = evaluate(model, x_train, y_train)
    val_acc = evaluate(model, x_val, y_val)
    logger.info("final train acc %.4f, val acc %.4f", train_acc, val_acc)

    cams = grad_cam_batch(model, x_val, y_val)
    peaks, centroids = cam_hits(cams, val_boxes)
    peaks = [p for p in peaks if p is not None]
    centroids = [c for c in centroids if c is not None]
    logger.info(
        "Grad-CAM (%s, true class) on %d val images with an object: "
        "peak in box %.3f, centroid in box %.3f",
        DEMO_GRADCAM_LAYER,
        len(peaks),
        float(np.mean(peaks)),
        float(np.mean(centroids)),
    )
    return model, val_acc


def write_samples(model: nn.Module, out: pathlib.Path, seed: int) -> bool:
    """Write one off-centre sample per class plus ``boxes.json``; True if all are predicted right.

    Samples are chosen by the generator alone (seeded, off-centre), never by the model's output,
    so the checks on them are honest.
    """
    samples_dir = out / "samples"
    samples_dir.mkdir(parents=True, exist_ok=True)
    for old in samples_dir.glob("*.png"):
        old.unlink()
    rng = np.random.default_rng(seed)
    boxes: dict[str, list[int] | None] = {}
    xs, labels, box_list = [], [], []
    for label, name in enumerate(DEMO_CLASSES):
        example = generate_example(label, rng, min_offset=SAMPLE_MIN_OFFSET)
        filename = f"{name}.png"
        example.image.save(samples_dir / filename, optimize=True)
        boxes[filename] = None if example.box is None else list(example.box)
        xs.append(demo_transform(example.image))
        labels.append(label)
        box_list.append(example.box)
    # One sample per line: small diffs when the samples change.
    lines = [f"  {json.dumps(name)}: {json.dumps(box)}" for name, box in sorted(boxes.items())]
    text = "{\n" + ",\n".join(lines) + "\n}\n"
    (samples_dir / "boxes.json").write_text(text, encoding="utf-8")

    x, y = torch.stack(xs), torch.tensor(labels)
    with torch.no_grad():
        probs = model(x).softmax(1)
    cams = grad_cam_batch(model, x, y)
    peaks, centroids = cam_hits(cams, box_list)
    all_right = True
    for i, name in enumerate(DEMO_CLASSES):
        pred = int(probs[i].argmax())
        all_right &= pred == i
        logger.info(
            "sample %-13s pred %-9s p=%.3f  box %s  cam peak in box %s, centroid in box %s",
            f"{name}.png",
            DEMO_CLASSES[pred],
            float(probs[i, pred]),
            box_list[i],
            peaks[i],
            centroids[i],
        )
    return all_right


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sample-seed", type=int, default=2024)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--train-per-class", type=int, default=1500)
    parser.add_argument("--val-per-class", type=int, default=250)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=4e-3)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (max 2)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    torch.set_num_threads(max(1, min(args.threads, 2)))
    t0 = time.perf_counter()
    model, val_acc = train(args)

    args.out.mkdir(parents=True, exist_ok=True)
    weights = args.out / "demo_cnn.pt"
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    torch.save(state, weights)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info(
        "wrote %s (%d parameters, %.1f kB)", weights, n_params, weights.stat().st_size / 1024
    )

    samples_ok = write_samples(model, args.out, args.sample_seed)
    logger.info("total time %.0fs", time.perf_counter() - t0)

    ok = True
    if val_acc < 0.95:
        logger.error("validation accuracy %.4f is below 0.95", val_acc)
        ok = False
    if not samples_ok:
        logger.error("some samples are misclassified")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
