"""Guessing the architecture of a bare state_dict, and opening such files without ``arch``."""

from __future__ import annotations

import functools
import sys
import types

import pytest
import torch
import torchvision
from torch import nn

from actviz.io.errors import ArchitectureNeededError, ModelLoadError
from actviz.io.models import arch_guess, zoo
from actviz.io.models.arch_guess import (
    ArchGuess,
    compare_architecture,
    confident_guess,
    guess_architecture,
)
from actviz.io.models.checkpoints import best_prefix
from actviz.io.models.loading import load_model, open_model
from tests.io.conftest import same_output


@functools.cache
def _meta_state_dict(name: str, num_classes: int = 1000, **kwargs) -> dict[str, torch.Tensor]:
    """A torchvision model's state_dict on the meta device: real keys and shapes, no memory.

    Built with torchvision directly (initialisers included), independent of the guesser's
    own signature builder.
    """
    with torch.device("meta"):
        model = torchvision.models.get_model(name, weights=None, num_classes=num_classes, **kwargs)
    return model.state_dict()


def _prefixed(state_dict: dict, prefix: str) -> dict:
    return {prefix + k: v for k, v in state_dict.items()}


# The architectures of the issue, each with a close relative it must be told apart from.
RELATIVES = {
    "resnet18": "resnet34",
    "resnet50": "resnet101",
    "vgg16": "vgg19",
    "mobilenet_v3_large": "mobilenet_v3_small",
    "mobilenet_v3_small": "mobilenet_v3_large",
    "efficientnet_b0": "efficientnet_b1",
    "vit_b_16": "vit_b_32",
    "convnext_tiny": "convnext_small",
}
TENSORS = {
    "resnet18": 122,
    "resnet50": 320,
    "vgg16": 32,
    "mobilenet_v3_large": 312,
    "mobilenet_v3_small": 244,
    "efficientnet_b0": 360,
    "vit_b_16": 152,
    "convnext_tiny": 182,
}


@pytest.mark.parametrize("prefix", ["", "module.", "model.", "_orig_mod."])
@pytest.mark.parametrize("name", list(RELATIVES))
def test_torchvision_state_dicts_are_guessed_exactly(name, prefix):
    state_dict = _prefixed(_meta_state_dict(name), prefix)
    guesses = guess_architecture(state_dict)
    best = guesses[0]
    n = TENSORS[name]
    assert (best.name, best.score, best.matched, best.tensors, best.expected) == (
        name,
        1.0,
        n,
        n,
        n,
    )
    assert best.describe() == f"{name} (score 1.00: all {n} tensors match)"
    assert best.prefix == ("" if prefix == "_orig_mod." else prefix)  # compile prefix: dropped
    assert best.fits and best.num_classes is None and best.zoo == "torchvision"
    assert confident_guess(guesses) is best
    assert all(g.score < 0.98 and not g.fits for g in guesses[1:])
    relative = compare_architecture(state_dict, RELATIVES[name])
    assert not relative.fits and relative.score < 0.98


@pytest.mark.parametrize("prefix", ["", "module.", "model."])
@pytest.mark.parametrize("name", list(RELATIVES))
def test_ten_class_heads_are_guessed_with_their_class_count(name, prefix):
    state_dict = _prefixed(_meta_state_dict(name, 10), prefix)
    guesses = guess_architecture(state_dict)
    best = guesses[0]
    assert (best.name, best.score, best.num_classes, best.prefix) == (name, 0.99, 10, prefix)
    assert best.reason == "head has 10 classes instead of 1000; all other tensors match"
    assert best.fits and best.expected == TENSORS[name]
    assert confident_guess(guesses) is best
    assert all(g.score < 0.99 for g in guesses[1:])


def test_vit_patch_size_separates_b16_from_b32_with_the_same_keys():
    state_dict = _meta_state_dict("vit_b_16")
    b32 = compare_architecture(state_dict, "vit_b_32")
    # Same 152 keys; the patch convolution and the position embedding differ.
    assert (b32.keys_matched, b32.matched, b32.score) == (152, 150, 0.9736)
    assert b32.reason == "150 of 152 tensors match, 2 differ in shape (e.g. conv_proj.weight)"
    guesses = guess_architecture(state_dict)
    assert [g.name for g in guesses[:2]] == ["vit_b_16", "vit_b_32"]


def test_relatives_scores_are_exact():
    r34 = compare_architecture(_meta_state_dict("resnet18"), "resnet34")
    assert (r34.score, r34.reason) == (
        0.5484,
        "122 of 122 tensors match, 96 of the model's are missing",
    )
    vgg19 = compare_architecture(_meta_state_dict("vgg16"), "vgg19")
    assert vgg19.reason == (
        "25 of 32 tensors match, 1 differs in shape (e.g. features.19.weight), "
        "12 of the model's are missing, 6 are not in the model"
    )
    vgg16_bn = compare_architecture(_meta_state_dict("vgg16"), "vgg16_bn")
    assert vgg16_bn.score < 0.2  # too far to be listed
    assert "vgg16_bn" not in [g.name for g in guess_architecture(_meta_state_dict("vgg16"))]


def test_identical_signatures_are_not_guessed_confidently():
    # These two Faster R-CNN builders differ only in their input resolution.
    guesses = guess_architecture(
        _meta_state_dict("fasterrcnn_mobilenet_v3_large_fpn", 91, weights_backbone=None)
    )
    assert [g.name for g in guesses[:2]] == [
        "fasterrcnn_mobilenet_v3_large_320_fpn",
        "fasterrcnn_mobilenet_v3_large_fpn",
    ]
    assert guesses[0].fits and guesses[1].fits and guesses[0].score == guesses[1].score == 1.0
    assert confident_guess(guesses) is None


def test_unrelated_state_dict_gives_no_guess():
    state_dict = {"encoder.w": torch.zeros(3, 4), "decoder.w": torch.zeros(4, 3)}
    assert guess_architecture(state_dict) == []
    assert guess_architecture({}) == []
    assert confident_guess([]) is None


def test_unknown_zoo_is_refused():
    with pytest.raises(ValueError, match="unknown model zoo 'hub'"):
        guess_architecture(_meta_state_dict("resnet18"), zoos=("hub",))


def test_best_prefix_prefers_no_prefix_on_ties():
    keys = ["model.fc.weight", "model.fc.bias", "loss.weight"]
    assert best_prefix(keys, {"fc.weight", "fc.bias"}) == ("model.", 2)
    own = {"model.fc.weight", "model.fc.bias", "fc.weight", "fc.bias"}
    assert best_prefix(["model.fc.weight", "model.fc.bias"], own) == ("", 2)


# --------------------------------------------------------------------------------------------
# Opening files without arch
# --------------------------------------------------------------------------------------------


def test_resnet18_file_opens_without_arch(tmp_path):
    torch.manual_seed(0)
    ref = torchvision.models.resnet18(weights=None).eval()
    path = tmp_path / "r18.pt"
    torch.save({"state_dict": _prefixed(ref.state_dict(), "module.")}, path)
    loaded = open_model(path)
    assert loaded.name == "r18.pt (resnet18)" and loaded.kind == "state_dict"
    assert loaded.arch_guesses[0].describe() == "resnet18 (score 1.00: all 122 tensors match)"
    assert loaded.arch_guesses[0].prefix == "module."
    assert loaded.categories is not None and len(loaded.categories) == 1000
    assert loaded.warnings == []
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    assert same_output(loaded.model, ref, x)
    assert same_output(load_model(path), ref, x)


def test_ten_class_mobilenet_file_opens_without_arch(tmp_path):
    torch.manual_seed(1)
    ref = torchvision.models.mobilenet_v3_small(weights=None, num_classes=10).eval()
    path = tmp_path / "lightning.ckpt"
    torch.save({"state_dict": _prefixed(ref.state_dict(), "model."), "epoch": 3}, path)
    loaded = open_model(path)
    assert loaded.name == "lightning.ckpt (mobilenet_v3_small)"
    assert loaded.arch_guesses[0].num_classes == 10
    assert loaded.model.classifier[3].out_features == 10
    assert loaded.categories is None  # ImageNet's 1000 names do not fit 10 outputs
    assert loaded.warnings == [
        "lightning.ckpt: its mobilenet_v3_small head has 10 classes instead of 1000, "
        "so the class names are unknown"
    ]
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(4))
    assert same_output(loaded.model, ref, x)


def test_explicit_arch_adapts_to_a_retrained_head(tmp_path):
    torch.manual_seed(2)
    ref = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    path = tmp_path / "ft.pt"
    torch.save(ref.state_dict(), path)
    loaded = open_model(path, arch="resnet18")
    assert loaded.arch_guesses == ()  # named, not guessed
    assert loaded.model.fc.out_features == 10 and loaded.categories is None
    assert "head has 10 classes instead of 1000" in loaded.warnings[0]
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    assert same_output(loaded.model, ref, x)


def test_near_miss_asks_with_candidates(tmp_path, monkeypatch, fresh_timm_listing):
    # torchvision's ranking: timm, when installed, adds its own ResNets (resnet26) between.
    monkeypatch.setitem(sys.modules, "timm", None)
    torch.manual_seed(0)
    state = torchvision.models.resnet18(weights=None).state_dict()
    state["extra_head.weight"] = torch.zeros(5, 512)
    path = tmp_path / "custom.pt"
    torch.save(state, path)
    with pytest.raises(ArchitectureNeededError) as info:
        open_model(path)
    exc = info.value
    assert isinstance(exc, ModelLoadError) and exc.path == str(path)
    assert [g.name for g in exc.candidates[:2]] == ["resnet18", "resnet34"]
    best = exc.candidates[0]
    assert isinstance(best, ArchGuess) and not best.fits
    assert best.reason == "122 of 123 tensors match, 1 is not in the model"
    assert str(exc) == (
        f"{path}: holds only weights (123 tensors), not the architecture; closest: "
        f"resnet18 (score {best.score:.2f}), resnet34 (score {exc.candidates[1].score:.2f}), "
        f"resnet50 (score {exc.candidates[2].score:.2f}); pass the architecture with --arch "
        "on the command line or arch= in Python (a torchvision name such as resnet18, "
        "timm:NAME, or file.py:ClassName)"
    )
    assert best.score == round(0.98 * 122 / 123, 4)


def test_unknown_weights_error_has_no_candidates(tmp_path):
    path = tmp_path / "mine.pt"
    torch.save({"encoder.w": torch.zeros(3, 4)}, path)
    with pytest.raises(ArchitectureNeededError) as info:
        open_model(path)
    assert info.value.candidates == ()
    assert (
        "no known architecture matches its keys and shapes; pass the architecture with --arch"
        in str(info.value)
    )


def test_guess_false_does_not_guess(tmp_path, monkeypatch):
    path = tmp_path / "r18.pt"
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), path)
    monkeypatch.setattr(arch_guess, "_candidates", lambda *a: pytest.fail("guessed"))
    with pytest.raises(ArchitectureNeededError) as info:
        open_model(path, guess=False)
    assert info.value.candidates == ()
    assert str(info.value).startswith(
        f"{path}: holds only weights (122 tensors), not the architecture; pass"
    )


# --------------------------------------------------------------------------------------------
# timm: optional
# --------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_timm_listing():
    arch_guess._timm_families.cache_clear()
    yield
    arch_guess._timm_families.cache_clear()


def test_without_timm_torchvision_is_still_guessed(monkeypatch, fresh_timm_listing):
    monkeypatch.setitem(sys.modules, "timm", None)  # import timm raises ImportError
    guesses = guess_architecture(_meta_state_dict("resnet18"), zoos=("torchvision", "timm"))
    assert guesses[0].name == "resnet18" and {g.zoo for g in guesses} == {"torchvision"}
    with pytest.raises(ModelLoadError, match=r"timm/resnet18: needs the 'timm' package"):
        zoo.construct("timm/resnet18")


class _FakeNet(nn.Module):
    def __init__(self, width: int, num_classes: int) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3)
        self.norm = nn.BatchNorm2d(width)
        self.head = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.stem(x)).mean((2, 3)))


def _fake_timm() -> types.ModuleType:
    widths = {"fakenet_small": 8, "fakenet_big": 16}
    timm = types.ModuleType("timm")
    timm.list_modules = lambda: ["fakenet", "empty"]
    timm.list_models = lambda module="": list(widths) if module in ("fakenet", "") else []

    def create_model(name, pretrained=False, num_classes=7):
        assert not pretrained
        return _FakeNet(widths[name], num_classes)

    timm.create_model = create_model
    return timm


def test_timm_models_are_guessed_and_loaded_when_installed(
    tmp_path, monkeypatch, fresh_timm_listing
):
    monkeypatch.setitem(sys.modules, "timm", _fake_timm())
    monkeypatch.setattr(arch_guess, "TIMM_SHORTLIST", ("fakenet_small", "fakenet_big"))
    torch.manual_seed(3)
    ref = _FakeNet(16, 3).eval()
    guesses = guess_architecture(ref.state_dict())
    assert [(g.name, g.zoo, g.num_classes) for g in guesses] == [
        ("timm/fakenet_big", "timm", 3),
        ("timm/fakenet_small", "timm", None),
    ]
    assert guesses[0].reason == "head has 3 classes instead of 7; all other tensors match"
    path = tmp_path / "fake.pt"
    torch.save(ref.state_dict(), path)
    loaded = open_model(path)
    assert loaded.name == "fake.pt (timm/fakenet_big)"
    assert same_output(loaded.model, ref, torch.randn(2, 3, 8, 8))


# --------------------------------------------------------------------------------------------
# Every torchvision architecture
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_torchvision_architecture_is_guessed_from_its_own_signature():
    # Also proves the family pre-filter never drops the right architecture.
    import torchvision.models as tvm

    identical = {"fasterrcnn_mobilenet_v3_large_320_fpn", "fasterrcnn_mobilenet_v3_large_fpn"}
    names = [
        *tvm.list_models(module=tvm),
        *tvm.list_models(module=tvm.segmentation),
        *tvm.list_models(module=tvm.detection),
    ]
    wrong = []
    for name in names:
        sig = arch_guess._signature(name, None)
        assert sig is not None, name
        guesses = guess_architecture(
            {f"module.{k}": torch.empty(s, device="meta") for k, s in sig.shapes.items()}
        )
        best = confident_guess(guesses)
        if name in identical:
            ok = best is None and {g.name for g in guesses[:2]} == identical
        else:
            ok = best is not None and best.name == name
        if not ok:
            wrong.append((name, [g.describe() for g in guesses[:2]]))
    assert wrong == []
    assert len(names) == 98
