"""The bundled demo model: weights, samples, predictions, Grad-CAM localisation, packaging."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import actviz
from actviz.display.attribution import grad_cam
from actviz.io.models.demo_model import (
    DEMO_CLASSES,
    DEMO_GRADCAM_LAYER,
    DEMO_INPUT_SIZE,
    DemoNet,
    build_demo_model,
    demo_sample_tensor,
    demo_samples,
    demo_transform,
    demo_weights_path,
    generate_example,
    generate_image,
    load_demo_model,
)

REPO = Path(__file__).resolve().parents[2]

# conv 3*16*9 + 16*32*9 + 32*64*9 + 64*64*9 (no bias), bn 2*(16+32+64+64), fc 64*8 + 8.
EXPECTED_PARAMS = 432 + 4608 + 18432 + 36864 + 2 * (16 + 32 + 64 + 64) + 64 * 8 + 8


@pytest.fixture(scope="module")
def model() -> DemoNet:
    return load_demo_model()


def _in_box(x: float, y: float, box: tuple[int, ...]) -> bool:
    x0, y0, x1, y1 = box
    return x0 <= x < x1 and y0 <= y < y1


def _grow(box: tuple[int, ...], margin: int) -> tuple[int, ...]:
    x0, y0, x1, y1 = box
    return (x0 - margin, y0 - margin, x1 + margin, y1 + margin)


def _cam_peak_and_centroid(cam: np.ndarray) -> tuple[tuple[int, int], tuple[float, float]]:
    """(x, y) of the CAM's maximum and of its mass centroid."""
    py, px = np.unravel_index(int(np.argmax(cam)), cam.shape)
    ys, xs = np.mgrid[0 : cam.shape[0], 0 : cam.shape[1]]
    mass = float(cam.sum())
    return (int(px), int(py)), (float((cam * xs).sum() / mass), float((cam * ys).sum() / mass))


def _demo_cam(model: DemoNet, x: torch.Tensor, label: int) -> np.ndarray:
    """Grad-CAM of class ``label`` at the last conv block, through actviz's own engine."""
    rec = actviz.capture(model, x, layers=[DEMO_GRADCAM_LAYER], target=label)[DEMO_GRADCAM_LAYER]
    assert rec.tensor.shape[-2:] == (8, 8)
    return grad_cam(rec.tensor, rec.grad, size=DEMO_INPUT_SIZE)


# ------------------------------------------------------------------------------- model + weights


def test_load_demo_model_is_eval_with_expected_parameters(model: DemoNet) -> None:
    assert isinstance(model, DemoNet)
    assert not model.training
    assert not any(m.training for m in model.modules())
    assert sum(p.numel() for p in model.parameters()) == EXPECTED_PARAMS == 61208
    assert all(p.dtype == torch.float32 for p in model.parameters())
    # The in-place trap is part of the demo on purpose.
    assert model.features.block4.relu.inplace
    assert not model.features.block3.relu.inplace
    # Trained, not a fresh init: batch-norm statistics moved away from their defaults.
    assert int(model.features.block1.bn.num_batches_tracked) > 100
    assert not torch.allclose(model.features.block1.bn.running_var, torch.ones(16))


def test_spatial_sizes_follow_the_blocks(model: DemoNet) -> None:
    x = torch.zeros(1, 3, *DEMO_INPUT_SIZE)
    names = ["features.block1", "features.block2", "features.block3", "features.block4", "fc"]
    cap = actviz.capture(model, x, layers=names, gradients=False)
    assert [tuple(cap[n].tensor.shape) for n in names] == [
        (1, 16, 64, 64),
        (1, 32, 32, 32),
        (1, 64, 16, 16),
        (1, 64, 8, 8),
        (1, len(DEMO_CLASSES)),
    ]


def test_weight_file_is_a_small_float32_state_dict() -> None:
    path = Path(str(demo_weights_path()))
    assert path.is_file()
    assert path.stat().st_size < 2 * 1024 * 1024
    state = torch.load(path, map_location="cpu", weights_only=True)
    assert set(state) == set(build_demo_model().state_dict())
    assert all(v.dtype == torch.float32 for k, v in state.items() if "num_batches" not in k)


def test_resources_live_in_the_actviz_resources_package() -> None:
    # Located through the package, not the repository layout: this is what keeps working
    # after a non-editable install.
    import actviz.resources

    package_dir = Path(actviz.resources.__file__).parent
    assert Path(str(demo_weights_path())).parent == package_dir / "demo"
    assert all(p.parent == package_dir / "demo" / "samples" for p in demo_samples())


# ------------------------------------------------------------------------------------- samples


def demo_sample_boxes() -> dict[str, tuple[int, int, int, int] | None]:
    """``file name -> (x0, y0, x1, y1)`` object box of each sample (exclusive ends; None: none),
    as tools/train_demo.py wrote them beside the samples."""
    boxes = demo_samples()[0].parent / "boxes.json"
    data = json.loads(boxes.read_text(encoding="utf-8"))
    return {name: None if box is None else tuple(int(v) for v in box) for name, box in data.items()}


def test_samples_are_named_after_their_classes() -> None:
    samples = demo_samples()
    assert 5 <= len(samples) <= 10
    assert samples == sorted(samples)
    assert {p.stem for p in samples} == set(DEMO_CLASSES)
    assert set(demo_sample_boxes()) == {p.name for p in samples}
    for path in samples:
        with Image.open(path) as image:
            assert image.mode == "RGB"
            assert image.size == DEMO_INPUT_SIZE[::-1]


def test_every_sample_is_predicted_as_its_class(model: DemoNet) -> None:
    samples = demo_samples()
    x = torch.stack([demo_transform(Image.open(p)) for p in samples])
    with torch.no_grad():
        probs = model(x).softmax(dim=1)
    predicted = [DEMO_CLASSES[i] for i in probs.argmax(dim=1).tolist()]
    assert predicted == [p.stem for p in samples]
    assert float(probs.max(dim=1).values.min()) > 0.5


def test_sample_objects_are_off_centre() -> None:
    h, w = DEMO_INPUT_SIZE
    boxes = demo_sample_boxes()
    assert boxes.pop("background.png") is None
    assert len(boxes) == len(DEMO_CLASSES) - 1
    for name, (x0, y0, x1, y1) in boxes.items():
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        assert np.hypot(cx - w / 2, cy - h / 2) > 8, name
        # The box must be a real object, not the whole image.
        assert (x1 - x0) * (y1 - y0) < 0.4 * h * w, name


def test_grad_cam_lands_on_the_object_in_every_sample(model: DemoNet) -> None:
    boxes = demo_sample_boxes()
    checked = 0
    for path in demo_samples():
        if boxes[path.name] is None:  # the background sample has no object to land on
            continue
        checked += 1
        x, _ = demo_sample_tensor(path.name)
        cam = _demo_cam(model, x, DEMO_CLASSES.index(path.stem))
        assert cam.shape == DEMO_INPUT_SIZE
        (px, py), (cx, cy) = _cam_peak_and_centroid(cam)
        box = boxes[path.name]
        assert _in_box(cx, cy, box), f"{path.name}: CAM centroid {(cx, cy)} outside {box}"
        # The peak may sit on the outline (round shapes light up at their edges); one CAM cell
        # is 8 input pixels, so allow half a cell around the box.
        assert _in_box(px, py, _grow(box, 4)), f"{path.name}: CAM peak {(px, py)} off {box}"
        # The CAM is concentrated on the object, not spread over the image.
        x0, y0, x1, y1 = box
        inside = np.zeros(cam.shape, dtype=bool)
        inside[y0:y1, x0:x1] = True
        assert cam[inside].mean() > 2 * cam[~inside].mean(), path.name
    assert checked == len(DEMO_CLASSES) - 1


def test_grad_cam_lands_on_the_object_in_fresh_images(model: DemoNet) -> None:
    # Off-centre images the model never saw (a seed the training script does not use).
    rng = np.random.default_rng(12345)
    shapes = [c for c in DEMO_CLASSES if c != "background"]
    examples = [generate_example(c, rng, min_offset=10.0) for _ in range(4) for c in shapes]
    x = torch.stack([demo_transform(e.image) for e in examples])
    with torch.no_grad():
        correct = (model(x).argmax(1) == torch.tensor([e.label for e in examples])).float()
    assert float(correct.mean()) >= 0.9
    centroid_hits = peak_hits = 0
    for i, example in enumerate(examples):
        cam = _demo_cam(model, x[i : i + 1], example.label)
        (px, py), (cx, cy) = _cam_peak_and_centroid(cam)
        centroid_hits += _in_box(cx, cy, example.box)
        peak_hits += _in_box(px, py, _grow(example.box, 4))
    assert centroid_hits / len(examples) >= 0.9
    assert peak_hits / len(examples) >= 0.85


def test_background_image_is_not_taken_for_a_shape(model: DemoNet) -> None:
    rng = np.random.default_rng(99)
    x = torch.stack([demo_transform(generate_image("background", rng)) for _ in range(8)])
    with torch.no_grad():
        predicted = model(x).argmax(1)
    assert int((predicted == DEMO_CLASSES.index("background")).sum()) >= 7


def test_first_block_feature_maps_show_structure(model: DemoNet) -> None:
    # What the mosaic shows for features.block1 (after its ReLU), one off-centre image per shape.
    rng = np.random.default_rng(3)
    examples = [
        generate_example(c, rng, min_offset=10.0) for c in DEMO_CLASSES if c != "background"
    ]
    x = torch.stack([demo_transform(e.image) for e in examples])
    fmaps = actviz.capture(model, x, layers=["features.block1"], gradients=False)[
        "features.block1"
    ].tensor
    assert fmaps.shape == (len(examples), 16, *DEMO_INPUT_SIZE)
    edge_counts = []
    for example, fmap in zip(examples, fmaps, strict=True):
        name = DEMO_CLASSES[example.label]
        # Most channels respond to something in the image (a random init leaves about half of
        # them flat on these images).
        assert int((fmap.flatten(1).std(dim=1) > 0.02).sum()) >= 12, name
        # Edge channels: a large share of their activation sits on the object's outline, a band
        # covering only 4-10 % of the image.
        band_np = _dilate(example.mask) & ~_erode(example.mask)
        band = torch.from_numpy(band_np)
        on_band = fmap[:, band].sum(1) / fmap.flatten(1).sum(1).clamp_min(1e-6)
        edge_counts.append(int((on_band > 3 * band_np.mean()).sum()))
        # Region channels: the object's inside and the background far from it light up
        # differently (colour/brightness detectors).
        inside = fmap[:, torch.from_numpy(example.mask & ~band_np)].mean(1)
        outside = fmap[:, torch.from_numpy(~example.mask & ~band_np)].mean(1)
        ratio = torch.maximum(inside / outside.clamp_min(1e-6), outside / inside.clamp_min(1e-6))
        assert int((ratio > 3).sum()) >= 5, name
    assert min(edge_counts) >= 5 and np.mean(edge_counts) >= 7, edge_counts


def _shifts(mask: np.ndarray) -> list[np.ndarray]:
    padded = np.pad(mask, 1, mode="edge")
    h, w = mask.shape
    return [
        padded[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w] for dy in (-1, 0, 1) for dx in (-1, 0, 1)
    ]


def _dilate(mask: np.ndarray) -> np.ndarray:
    return np.logical_or.reduce(_shifts(mask))


def _erode(mask: np.ndarray) -> np.ndarray:
    return np.logical_and.reduce(_shifts(mask))


# ----------------------------------------------------------------------------------- generator


def test_generator_is_deterministic_and_consistent() -> None:
    a = generate_example("ring", np.random.default_rng(0))
    b = generate_example("ring", np.random.default_rng(0))
    assert np.array_equal(np.asarray(a.image), np.asarray(b.image))
    assert np.array_equal(
        np.asarray(generate_image(DEMO_CLASSES.index("triangle"), np.random.default_rng(5))),
        np.asarray(generate_example("triangle", np.random.default_rng(5)).image),
    )
    rng = np.random.default_rng(1)
    empty = generate_example("background", rng)
    assert empty.box is None and not empty.mask.any()
    for name in (c for c in DEMO_CLASSES if c != "background"):
        ex = generate_example(name, rng, min_offset=12.0)
        assert ex.image.size == DEMO_INPUT_SIZE[::-1] and ex.image.mode == "RGB"
        assert ex.label == DEMO_CLASSES.index(name)
        ys, xs = np.nonzero(ex.mask)
        assert ex.box == (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
        assert 80 < ex.mask.sum() < 0.4 * ex.mask.size, name
        cx, cy = ex.center
        assert np.hypot(cx - 32, cy - 32) >= 12.0
        # The object stands out from the background around it.
        pixels = np.asarray(ex.image, dtype=np.float32)
        assert np.abs(pixels[ex.mask].mean(0) - pixels[~ex.mask].mean(0)).sum() > 30, name
    with pytest.raises(ValueError, match="unknown demo class"):
        generate_example("hexagon", rng)
    with pytest.raises(ValueError, match="unknown demo class index"):
        generate_example(len(DEMO_CLASSES), rng)


def test_demo_transform_resizes_to_unit_range_rgb() -> None:
    image = Image.fromarray(np.full((80, 100), 255, np.uint8), "L")
    x = demo_transform(image)
    assert x.shape == (3, *DEMO_INPUT_SIZE) and x.dtype == torch.float32
    assert torch.allclose(x, torch.ones_like(x))


def test_demo_sample_tensor_matches_the_file() -> None:
    x, rgb = demo_sample_tensor()
    first = demo_samples()[0]
    assert x.shape == (1, 3, *DEMO_INPUT_SIZE) and x.dtype == torch.float32
    assert rgb.shape == (*DEMO_INPUT_SIZE, 3) and rgb.dtype == np.uint8 and rgb.flags.c_contiguous
    assert np.array_equal(rgb, np.asarray(Image.open(first).convert("RGB")))
    assert torch.allclose(x[0].permute(1, 2, 0) * 255, torch.from_numpy(rgb).float(), atol=1e-3)
    x_star, _ = demo_sample_tensor("star")
    x_star_png, _ = demo_sample_tensor("star.png")
    assert torch.equal(x_star, x_star_png)
    assert not torch.equal(x_star, demo_sample_tensor("circle")[0])
    with pytest.raises(FileNotFoundError, match="hexagon"):
        demo_sample_tensor("hexagon")


# ----------------------------------------------------------------------------------- packaging


@pytest.mark.slow
def test_demo_resources_survive_a_non_editable_install(tmp_path: Path) -> None:
    # Build a wheel from a copy of the sources (the repository itself is never written to),
    # install it into a plain directory and load the demo from there in a fresh interpreter.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "actviz", src / "actviz", ignore=ignore)
    shutil.copytree(REPO / "resources", src / "resources", ignore=ignore)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]

    def run(args: list[str], **kwargs) -> subprocess.CompletedProcess:
        result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    dist = tmp_path / "dist"
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)])
    (wheel,) = dist.glob("actviz-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {"actviz/resources/demo/demo_cnn.pt", "actviz/resources/demo/samples/boxes.json"}
    expected |= {f"actviz/resources/demo/samples/{p.name}" for p in demo_samples()}
    assert expected <= names

    site = tmp_path / "site"
    run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)])
    script = (
        "import json, actviz, torch\n"
        "from actviz.io.models import demo_model as demo\n"
        "m = demo.load_demo_model()\n"
        "x, _ = demo.demo_sample_tensor('star')\n"
        "print(json.dumps({'file': actviz.__file__,\n"
        "    'weights': str(demo.demo_weights_path()),\n"
        "    'samples': [p.name for p in demo.demo_samples()],\n"
        "    'boxes': json.loads((demo.demo_samples()[0].parent / 'boxes.json').read_text()),\n"
        "    'star': demo.DEMO_CLASSES[int(m(x).argmax())]}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = json.loads(run([sys.executable, "-c", script], env=env, cwd=tmp_path).stdout)
    # The installed copy was imported, not the editable checkout.
    assert Path(out["file"]).is_relative_to(site)
    assert Path(out["weights"]).is_relative_to(site)
    assert out["samples"] == [p.name for p in demo_samples()]
    assert out["boxes"] == {k: v and list(v) for k, v in demo_sample_boxes().items()}
    assert out["star"] == "star"
