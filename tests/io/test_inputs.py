"""open_input / load_input on real image and tensor files, random specs, and their failures."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image
from torch import nn

from actviz.io.errors import InputError
from actviz.io.input_files import expected_input, load_input, open_input
from actviz.io.models.loaded_model import LoadedModel
from tests.io.conftest import tiny_namespace


@pytest.fixture(scope="module")
def r18_loaded() -> LoadedModel:
    """resnet18 (random init) with the real ImageNet transforms from its weights enum."""
    weights = torchvision.models.ResNet18_Weights.DEFAULT
    return LoadedModel(
        torchvision.models.resnet18(weights=None).eval(),
        "resnet18",
        "resnet18",
        "torchvision",
        categories=list(weights.meta["categories"]),
        transforms=weights.transforms(),
        input_size=(224, 224),
    )


@pytest.fixture
def gray_model() -> nn.Module:
    return tiny_namespace()["GrayNet"]().eval()


def _gradient_rgb(h: int = 12, w: int = 16) -> np.ndarray:
    """A deterministic RGB picture with distinct values per channel."""
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 15 % 256, yy * 20 % 256, (xx + yy) * 7 % 256], axis=-1).astype(np.uint8)


# --------------------------------------------------------------------------------------------
# Image modes and formats
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ["png", "bmp", "tiff", "webp"])
def test_lossless_formats_round_trip_exactly(ext, tmp_path):
    pixels = _gradient_rgb()
    path = tmp_path / f"img.{ext}"
    save_kwargs = {"lossless": True} if ext == "webp" else {}
    Image.fromarray(pixels, "RGB").save(path, **save_kwargs)
    loaded = open_input(path)
    assert loaded.kind == "image"
    assert loaded.value.shape == (1, 3, 12, 16)
    assert loaded.value.dtype == torch.float32
    expected = torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255.0
    assert torch.allclose(loaded.value, expected, atol=1e-6)
    np.testing.assert_array_equal(loaded.image, pixels)
    assert loaded.description == f"img.{ext}: RGB 16x12 -> 1x3x12x16 (scaled to [0, 1])"


def test_jpeg_and_cmyk_jpeg(tmp_path):
    flat = np.full((8, 8, 3), (200, 40, 90), np.uint8)
    path = tmp_path / "photo.jpg"
    Image.fromarray(flat, "RGB").save(path, quality=100)
    value = load_input(path)
    assert value.shape == (1, 3, 8, 8)
    assert torch.allclose(value[0, :, 4, 4], torch.tensor([200, 40, 90]) / 255.0, atol=3 / 255)

    cmyk = tmp_path / "print.jpg"
    Image.new("CMYK", (6, 5), (0, 255, 255, 0)).save(cmyk, quality=100)  # pure red ink
    loaded = open_input(cmyk)
    assert loaded.value.shape == (1, 3, 5, 6)
    assert loaded.description.startswith("print.jpg: CMYK 6x5")
    red = loaded.value[0, :, 2, 2]
    assert red[0] > 0.9 and red[1] < 0.1 and red[2] < 0.1


def test_grayscale_stays_one_channel_without_a_model(tmp_path):
    gray = (np.arange(20, dtype=np.uint8) * 12).reshape(4, 5)
    path = tmp_path / "gray.png"
    Image.fromarray(gray, "L").save(path)
    loaded = open_input(path)
    assert loaded.value.shape == (1, 1, 4, 5)
    assert torch.allclose(loaded.value[0, 0], torch.from_numpy(gray).float() / 255.0)
    # The overlay image is always RGB.
    assert loaded.image.shape == (4, 5, 3)
    np.testing.assert_array_equal(loaded.image[..., 1], gray)


def test_gray_image_feeds_rgb_model_and_rgb_feeds_gray_model(tmp_path, rgb_model, gray_model):
    gray = (np.arange(30, dtype=np.uint8) * 8).reshape(5, 6)
    gpath = tmp_path / "gray.png"
    Image.fromarray(gray, "L").save(gpath)
    loaded = open_input(gpath, model=rgb_model)
    assert loaded.value.shape == (1, 3, 5, 6)
    for c in range(3):
        assert torch.allclose(loaded.value[0, c], torch.from_numpy(gray).float() / 255.0)
    assert "gray -> 3 channels" in loaded.description
    assert rgb_model(loaded.value).shape == (1, 4)

    pixels = _gradient_rgb(5, 6)
    cpath = tmp_path / "color.png"
    Image.fromarray(pixels, "RGB").save(cpath)
    loaded = open_input(cpath, model=gray_model)
    assert loaded.value.shape == (1, 1, 5, 6)
    luma = (pixels.astype(np.float32) / 255.0) @ np.array([0.299, 0.587, 0.114], np.float32)
    assert torch.allclose(loaded.value[0, 0], torch.from_numpy(luma), atol=1e-6)
    assert "RGB -> gray" in loaded.description
    gray_model(loaded.value)  # the model accepts it


def test_rgba_composited_on_white(tmp_path):
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., 0] = 255  # red everywhere
    rgba[:2, :, 3] = 255  # top half opaque, bottom half fully transparent
    rgba[2:, :, 3] = 0
    path = tmp_path / "alpha.png"
    Image.fromarray(rgba, "RGBA").save(path)
    loaded = open_input(path)
    assert loaded.value.shape == (1, 3, 4, 4)
    assert torch.allclose(loaded.value[0, :, 0, 0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(loaded.value[0, :, 3, 0], torch.tensor([1.0, 1.0, 1.0]))
    assert "alpha composited on white" in loaded.description


def test_palette_images_with_and_without_transparency(tmp_path):
    img = Image.new("P", (3, 2))
    img.putpalette([0, 0, 0, 10, 20, 30, 250, 0, 0] + [0] * (256 * 3 - 9))
    img.putdata([1, 2, 1, 2, 0, 0])
    path = tmp_path / "pal.png"
    img.save(path)
    value = load_input(path)
    assert value.shape == (1, 3, 2, 3)
    assert torch.allclose(value[0, :, 0, 0] * 255, torch.tensor([10.0, 20.0, 30.0]), atol=1e-4)
    assert torch.allclose(value[0, :, 0, 1] * 255, torch.tensor([250.0, 0.0, 0.0]), atol=1e-4)

    transparent = tmp_path / "pal_t.png"
    img.save(transparent, transparency=0)  # index 0 (the last row) is transparent
    value = load_input(transparent)
    assert torch.allclose(value[0, :, 1, 2], torch.ones(3))  # white where transparent
    assert torch.allclose(value[0, :, 0, 0] * 255, torch.tensor([10.0, 20.0, 30.0]), atol=1e-4)


def test_16_bit_grayscale_keeps_precision(tmp_path, rgb_model):
    deep = np.array([[0, 1000, 40000], [65535, 1100, 12345]], dtype=np.uint16)
    path = tmp_path / "deep.png"
    Image.fromarray(deep).save(path)
    assert Image.open(path).mode.startswith("I")
    loaded = open_input(path)
    assert loaded.value.shape == (1, 1, 2, 3)
    expected = torch.from_numpy(deep.astype(np.float32) / 65535.0)
    assert torch.allclose(loaded.value[0, 0], expected, atol=1e-6)
    # 1000 and 1100 fall in the same 8-bit step: only 16-bit reading keeps them apart, and the
    # values are not multiples of 1/255 as an 8-bit reading would give.
    assert loaded.value[0, 0, 1, 1] - loaded.value[0, 0, 0, 1] == pytest.approx(100 / 65535)
    steps = loaded.value[0, 0] * 255
    assert not torch.allclose(steps, steps.round(), atol=1e-3)
    loaded = open_input(path, model=rgb_model)
    assert loaded.value.shape == (1, 3, 2, 3)


def test_la_and_bilevel_modes(tmp_path):
    la = Image.new("LA", (2, 2), (0, 0))  # black, fully transparent -> white
    la.save(tmp_path / "la.png")
    value = load_input(tmp_path / "la.png")
    assert value.shape == (1, 1, 2, 2) and torch.allclose(value, torch.ones_like(value))

    bits = Image.new("1", (3, 3), 0)
    bits.putpixel((1, 1), 1)
    bits.save(tmp_path / "bits.png")
    value = load_input(tmp_path / "bits.png")
    assert value.shape == (1, 1, 3, 3)
    assert value[0, 0, 1, 1] == 1.0 and value.sum() == 1.0


# --------------------------------------------------------------------------------------------
# Preprocessing with a loaded model
# --------------------------------------------------------------------------------------------


def test_torchvision_weights_transforms_are_applied(tmp_path, r18_loaded):
    pixels = np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    path = tmp_path / "cat.png"
    Image.fromarray(pixels, "RGB").save(path)
    loaded = open_input(path, loaded_model=r18_loaded)
    reference = r18_loaded.transforms(Image.fromarray(pixels, "RGB"))[None]
    assert loaded.value.shape == (1, 3, 224, 224)
    # Same resize/crop/normalisation as torchvision's own PIL path (up to uint8 rounding).
    assert torch.allclose(loaded.value, reference, atol=0.05)
    assert abs(float((loaded.value - reference).abs().mean())) < 0.01
    assert loaded.image.shape == (224, 224, 3) and loaded.image.dtype == np.uint8
    # The overlay image is the un-normalised picture.
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    shown = ((reference[0] * std + mean).clamp(0, 1) * 255).permute(1, 2, 0).numpy()
    assert np.abs(loaded.image.astype(np.float32) - shown).mean() < 1.5
    assert "resize 256, center crop 224, ImageNet normalisation" in loaded.description


def test_gray_image_through_torchvision_transforms(tmp_path, r18_loaded):
    path = tmp_path / "g.png"
    Image.fromarray(np.full((30, 30), 128, np.uint8), "L").save(path)
    value = load_input(path, loaded_model=r18_loaded)
    assert value.shape == (1, 3, 224, 224)
    expected = (128 / 255 - torch.tensor([0.485, 0.456, 0.406])) / torch.tensor(
        [0.229, 0.224, 0.225]
    )
    assert torch.allclose(value[0, :, 100, 100], expected, atol=1e-3)


def test_custom_pil_transform_like_the_demo(tmp_path):
    from actviz.io.models import demo_model as demo

    loaded_model = LoadedModel(
        demo.build_demo_model().eval(),
        "demo",
        "demo",
        "demo",
        categories=list(demo.DEMO_CLASSES),
        transforms=demo.demo_transform,
        input_size=demo.DEMO_INPUT_SIZE,
    )
    pixels = _gradient_rgb(80, 100)
    path = tmp_path / "shape.png"
    Image.fromarray(pixels, "RGB").save(path)
    loaded = open_input(path, loaded_model=loaded_model)
    expected = demo.demo_transform(Image.fromarray(pixels, "RGB"))[None]
    assert torch.equal(loaded.value, expected)
    assert loaded.description == "shape.png: RGB 100x80 -> 1x3x64x64 (via demo_transform)"
    assert loaded.image.shape == (64, 64, 3)
    np.testing.assert_allclose(
        loaded.image.astype(np.float32) / 255.0,
        expected[0].permute(1, 2, 0).numpy(),
        atol=0.5 / 255 + 1e-6,
    )


def test_resize_to_model_input_size_then_size_then_native(tmp_path, rgb_model):
    path = tmp_path / "p.png"
    Image.fromarray(_gradient_rgb(12, 16), "RGB").save(path)
    lm = LoadedModel(rgb_model, "tiny", "tiny", "code", input_size=(8, 10))
    assert load_input(path, loaded_model=lm, size=(30, 30)).shape == (1, 3, 8, 10)
    assert load_input(path, model=rgb_model, size=(6, 7)).shape == (1, 3, 6, 7)
    assert load_input(path, size=5).shape == (1, 3, 5, 5)
    assert load_input(path, model=rgb_model).shape == (1, 3, 12, 16)
    # A flat image stays flat through the antialiased resize.
    flat = tmp_path / "flat.png"
    Image.fromarray(np.full((12, 16, 3), 51, np.uint8), "RGB").save(flat)
    assert torch.allclose(load_input(flat, size=(5, 9)), torch.full((1, 3, 5, 9), 0.2), atol=1e-5)


def test_image_for_model_with_four_channels_is_refused(tmp_path):
    model = nn.Sequential(nn.Conv2d(4, 2, 1))
    path = tmp_path / "rgb.png"
    Image.fromarray(_gradient_rgb(), "RGB").save(path)
    with pytest.raises(InputError) as info:
        load_input(path, model=model)
    assert str(info.value) == (
        f"{path}: model expects 4 input channels (first layer 0: Conv2d(4, 2, ...)); "
        "an image gives 1 (gray) or 3 (RGB)"
    )


# --------------------------------------------------------------------------------------------
# Tensor files
# --------------------------------------------------------------------------------------------


def test_pt_tensor_tuple_list_dict(tmp_path, rgb_model):
    x = torch.randn(1, 3, 5, 5, dtype=torch.float64)
    torch.save(x, tmp_path / "x.pt")
    loaded = open_input(tmp_path / "x.pt", model=rgb_model)
    assert loaded.kind == "tensor"
    assert loaded.value.dtype == torch.float32  # cast to the model's dtype
    assert torch.allclose(loaded.value, x.float())
    assert loaded.image.shape == (5, 5, 3)  # image-like tensors get a min-max preview
    assert loaded.description == "x.pt: 1x3x5x5 float32"

    ids = torch.tensor([[1, 2, 3]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    torch.save((x, ids), tmp_path / "pair.pt")
    torch.save([x, ids], tmp_path / "pair_list.pt")
    for name in ("pair.pt", "pair_list.pt"):
        # No model: TinyNet takes one input (a pair for it is refused, test_input_mistakes).
        value = load_input(tmp_path / name)
        assert isinstance(value, tuple) and len(value) == 2
        assert value[0].dtype == torch.float32 and torch.allclose(value[0], x.float())
        assert value[1].dtype == torch.int64 and torch.equal(value[1], ids)

    torch.save({"input_ids": ids, "attention_mask": mask}, tmp_path / "kw.pt")
    loaded = open_input(tmp_path / "kw.pt")
    assert isinstance(loaded.value, dict) and list(loaded.value) == ["input_ids", "attention_mask"]
    assert torch.equal(loaded.value["attention_mask"], mask)
    assert loaded.image is None
    assert loaded.description == "kw.pt: {input_ids: 1x3 int64, attention_mask: 1x3 bool}"


def test_npy_and_npz(tmp_path, rgb_model):
    arr = np.random.default_rng(1).standard_normal((2, 3, 4, 4))
    np.save(tmp_path / "a.npy", arr)
    value = load_input(tmp_path / "a.npy", model=rgb_model)
    assert value.dtype == torch.float32
    assert torch.allclose(value, torch.from_numpy(arr).float())

    np.savez(tmp_path / "one.npz", only=arr)
    assert torch.allclose(load_input(tmp_path / "one.npz"), torch.from_numpy(arr).float())

    tokens = np.array([[5, 6, 7]], dtype=np.int64)
    np.savez(tmp_path / "many.npz", pixels=arr, tokens=tokens)
    value = load_input(tmp_path / "many.npz")
    assert list(value) == ["pixels", "tokens"]
    assert value["tokens"].dtype == torch.int64 and value["tokens"].tolist() == [[5, 6, 7]]


def test_safetensors_input(tmp_path):
    from safetensors.torch import save_file

    x = torch.randn(1, 3, 4, 4)
    save_file({"x": x}, str(tmp_path / "one.safetensors"))
    assert torch.equal(load_input(tmp_path / "one.safetensors"), x)
    save_file({"a": x, "b": torch.arange(3)}, str(tmp_path / "two.safetensors"))
    value = load_input(tmp_path / "two.safetensors")
    assert sorted(value) == ["a", "b"] and torch.equal(value["b"], torch.arange(3))


def test_unbatched_chw_gets_batch_dimension(tmp_path, rgb_model):
    chw = np.random.default_rng(2).standard_normal((3, 6, 6)).astype(np.float32)
    np.save(tmp_path / "chw.npy", chw)
    loaded = open_input(tmp_path / "chw.npy", model=rgb_model)
    assert loaded.value.shape == (1, 3, 6, 6)
    assert "added a batch dimension" in loaded.description
    rgb_model(loaded.value)


def test_in_memory_sources(rgb_model):
    x = torch.rand(1, 3, 4, 4)
    loaded = open_input(x, model=rgb_model)
    assert torch.equal(loaded.value, x) and loaded.value is not x
    assert load_input(np.zeros((1, 3, 2, 2), np.float32)).shape == (1, 3, 2, 2)
    img = Image.fromarray(_gradient_rgb(4, 4), "RGB")
    assert load_input(img, model=rgb_model).shape == (1, 3, 4, 4)


# --------------------------------------------------------------------------------------------
# Random specs
# --------------------------------------------------------------------------------------------


def test_random_specs_are_seeded(r18_loaded):
    a = open_input("random:1x3x8x8")
    b = open_input("random:1x3x8x8")
    assert a.kind == "random" and a.value.shape == (1, 3, 8, 8)
    assert torch.equal(a.value, b.value)
    expected = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.value, expected)
    c = open_input("random:1x3x8x8:5")
    assert not torch.equal(a.value, c.value)
    assert c.description == "random: 1x3x8x8 float32, standard normal, seed 5"
    assert load_input("random:2x10").shape == (2, 10)

    auto = open_input("random", loaded_model=r18_loaded)
    assert auto.value.shape == (1, 3, 224, 224)
    assert open_input("random", model=r18_loaded.model, size=(16, 20)).value.shape == (1, 3, 16, 20)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("random:1xAx8", r"random:1xAx8: cannot read the shape '1xAx8'"),
        ("random:1x0x8", r"every dimension must be a positive integer"),
        ("random:1x3x8x8:abc", r"seed 'abc' is not an integer"),
        (
            "random",
            r"random: the model's input size is unknown; give a shape like random:1x3x224x224",
        ),
    ],
)
def test_bad_random_specs(spec, message):
    with pytest.raises(InputError, match=message):
        open_input(spec)


def test_random_with_wrong_channels_for_model(r18_loaded):
    with pytest.raises(InputError, match=r"model expects 3 input channels .*with 1 channel;"):
        open_input("random:1x1x8x8", loaded_model=r18_loaded)


# --------------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------------


def test_wrong_rank_array_names_file_layer_and_shape(tmp_path, r18_loaded):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((5, 5)))
    with pytest.raises(InputError) as info:
        open_input(path, loaded_model=r18_loaded)
    assert str(info.value) == (
        f"{path}: model expects 3 input channels (first layer conv1: Conv2d(3, 64, ...)), "
        "got a 2-D array of shape (5, 5); expected 4-D (N, 3, H, W)"
    )


def test_wrong_channels_tensor(tmp_path, r18_loaded):
    path = tmp_path / "one_channel.pt"
    torch.save(torch.zeros(2, 1, 8, 8), path)
    with pytest.raises(InputError) as info:
        open_input(path, model=r18_loaded.model)
    assert str(info.value) == (
        f"{path}: model expects 3 input channels (first layer conv1: Conv2d(3, 64, ...)), "
        "got a tensor of shape (2, 1, 8, 8) with 1 channel; expected (N, 3, H, W)"
    )


def test_missing_empty_corrupt_and_truncated_files(tmp_path):
    with pytest.raises(InputError, match=r"nothere\.png: file not found"):
        open_input(tmp_path / "nothere.png")

    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.png: file is empty"):
        open_input(tmp_path / "empty.png")

    (tmp_path / "junk.png").write_bytes(b"this is not an image at all" * 10)
    with pytest.raises(InputError, match=r"junk\.png: not a readable image or tensor file"):
        open_input(tmp_path / "junk.png")

    good = tmp_path / "good.png"
    Image.fromarray(np.random.default_rng(3).integers(0, 256, (64, 64, 3), np.uint8)).save(good)
    data = good.read_bytes()
    (tmp_path / "cut.png").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"cut\.png: damaged image"):
        open_input(tmp_path / "cut.png")

    torch.save(torch.zeros(3), tmp_path / "t.pt")
    (tmp_path / "t_cut.pt").write_bytes((tmp_path / "t.pt").read_bytes()[:100])
    with pytest.raises(InputError, match=r"t_cut\.pt"):
        open_input(tmp_path / "t_cut.pt")

    with pytest.raises(InputError, match=r"is a folder"):
        open_input(tmp_path)


def test_tensor_files_holding_objects_are_refused(tmp_path):
    torch.save({"x": torch.zeros(2), "net": nn.Linear(2, 2)}, tmp_path / "obj.pt")
    with pytest.raises(InputError, match=r"obj\.pt: holds Python objects, not just tensors"):
        open_input(tmp_path / "obj.pt")

    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match=r"obj\.npy: holds Python objects"):
        open_input(tmp_path / "obj.npy")

    torch.save(3.5, tmp_path / "scalar.pt")
    with pytest.raises(InputError, match=r"scalar\.pt: holds a float; expected a tensor"):
        open_input(tmp_path / "scalar.pt")


def test_expected_input_reads_first_conv(r18_loaded, gray_model):
    exp = expected_input(loaded_model=r18_loaded)
    assert (exp.channels, exp.spatial_dims, exp.size) == (3, 2, (224, 224))
    assert exp.layer == "first layer conv1: Conv2d(3, 64, ...)"
    assert expected_input(gray_model).channels == 1
    mlp = expected_input(nn.Sequential(nn.Linear(4, 2)))
    assert mlp.channels is None and mlp.spatial_dims is None
    conv1d = expected_input(nn.Sequential(nn.Conv1d(2, 3, 1)))
    assert (conv1d.channels, conv1d.spatial_dims) == (2, 1)


def test_expected_input_of_torchscript_model():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.script(nn.Sequential(nn.ReLU(), nn.Conv2d(1, 2, 3)))
    exp = expected_input(scripted)
    assert (exp.channels, exp.spatial_dims) == (1, 2)
    assert exp.layer == "first layer 1: Conv2d(1, 2, ...)"


def test_an_image_gone_since_it_was_chosen_is_no_such_file_not_damaged(tmp_path):
    from actviz.io.input_tensors import _open_image

    with pytest.raises(InputError, match=r"gone\.png: no such file$"):
        _open_image(tmp_path / "gone.png", "gone.png")
