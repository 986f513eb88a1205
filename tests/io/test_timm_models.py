"""timm sources: names in every form, timm's own preprocessing, checkpoints with prefixes,
safetensors and EMA weights, the architecture guess, and the unknown-name message.

The models are timm's own tiny test networks (``test_vit``: 0.37 M parameters,
``test_convnext``: 0.27 M), random init; nothing is downloaded.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

timm = pytest.importorskip("timm", reason="needs the timm extra")

from PIL import Image  # noqa: E402

from actviz.io.errors import ModelLoadError  # noqa: E402
from actviz.io.input_files import open_input  # noqa: E402
from actviz.io.models import arch_guess  # noqa: E402
from actviz.io.models import hf_models as timm_models  # noqa: E402
from actviz.io.models.hf_models import TimmTransform, resolve_name  # noqa: E402
from actviz.io.models.loading import open_model  # noqa: E402


def _equal_outputs(a: torch.nn.Module, b: torch.nn.Module, size: int = 160) -> bool:
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return torch.equal(a.eval()(x), b.eval()(x))


@pytest.fixture(scope="module")
def vit_ref() -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model("test_vit").eval()


def test_name_forms():
    assert resolve_name("timm:test_vit") == "timm/test_vit"
    assert resolve_name("timm/Test_ViT") == "timm/test_vit"
    assert resolve_name("test_vit") == "timm/test_vit"
    assert resolve_name("test_vit", bare=False) is None
    assert resolve_name("timm:vit_tiny_patch16_224.augreg_in21k") == (
        "timm/vit_tiny_patch16_224.augreg_in21k"
    )
    assert resolve_name("not_a_model") is None
    with pytest.raises(ModelLoadError, match=r"timm has no model named 'test_vitt'.*timm:test_vit"):
        resolve_name("timm:test_vitt")


def test_open_by_name_uses_timms_preprocessing():
    loaded = open_model("timm:test_vit", weights=None)
    assert loaded.kind == "timm" and loaded.name == "timm/test_vit (random init)"
    assert loaded.warnings == [] and not loaded.model.training
    assert loaded.input_size == (160, 160) and loaded.task == "classifier"
    assert len(loaded.categories) == 1000 and loaded.categories[0] == "tench"
    assert isinstance(loaded.transforms, TimmTransform)
    assert loaded.transforms.mean == (0.5, 0.5, 0.5) and loaded.transforms.resize_size == [168]
    # The input pipeline gives exactly what timm's own eval transform makes of the image.
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (120, 200, 3), dtype=np.uint8), "RGB")
    inp = open_input(img, model=loaded)
    cfg = timm.data.resolve_data_config({}, model=loaded.model)
    expected = timm.data.create_transform(**cfg)(img)
    assert torch.equal(inp.value[0], expected)
    assert inp.value.shape == (1, 3, 160, 160) and inp.image.shape == (160, 160, 3)
    assert "resize 168, center crop 160x160, mean/std normalisation" in inp.description
    # A bare timm name works too; a torchvision name stays torchvision's.
    assert open_model("test_convnext", weights=None).name == "timm/test_convnext (random init)"
    assert open_model("resnet18", weights=None).kind == "torchvision"


def test_pretrained_weights_only_from_the_cache(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("ACTVIZ_OFFLINE", "1")
    loaded = open_model("timm:test_vit")
    assert loaded.name == "timm/test_vit (random init)"
    assert loaded.warnings == [
        "no network (ACTVIZ_OFFLINE is set) and no cached weights: timm/test_vit uses random "
        "weights; predictions are meaningless"
    ]


def test_pretrained_weights_come_from_the_hub_cache(monkeypatch, tmp_path, vit_ref):
    from huggingface_hub import constants
    from safetensors.torch import save_file

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--timm--test_vit.r160_in1k"
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    save_file(vit_ref.state_dict(), repo / "snapshots" / "abc" / "model.safetensors")
    loaded = open_model("timm:test_vit")
    assert loaded.name == "timm/test_vit (cached timm/test_vit.r160_in1k)"
    assert loaded.warnings == []
    assert _equal_outputs(loaded.model, vit_ref)


def test_checkpoint_with_prefix_ema_and_recorded_arch(tmp_path, vit_ref):
    torch.manual_seed(1)
    other = timm.create_model("test_vit").state_dict()
    # timm's train.py layout: both copies, EMA preferred (as timm's own loader does).
    ckpt = {
        "epoch": 3,
        "arch": "test_vit",
        "state_dict": {f"module.{k}": v for k, v in other.items()},
        "state_dict_ema": {f"module.{k}": v for k, v in vit_ref.state_dict().items()},
    }
    path = tmp_path / "checkpoint.pth.tar"
    torch.save(ckpt, path)
    loaded = open_model(path)
    assert loaded.name == "checkpoint.pth.tar (timm/test_vit, EMA weights)"
    assert loaded.weights_from == "['state_dict_ema'] (EMA)"
    assert isinstance(loaded.transforms, TimmTransform) and loaded.input_size == (160, 160)
    assert _equal_outputs(loaded.model, vit_ref)


def test_safetensors_with_model_prefix_and_a_new_head(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(2)
    ref = timm.create_model("test_convnext", num_classes=5).eval()
    path = tmp_path / "convnext.safetensors"
    save_file({f"model.{k}": v.contiguous() for k, v in ref.state_dict().items()}, path)
    loaded = open_model(path, arch="timm:test_convnext")
    assert loaded.name == "convnext.safetensors (timm/test_convnext)"
    assert loaded.model.num_classes == 5 and loaded.categories is None
    assert _equal_outputs(loaded.model, ref)
    with pytest.raises(ModelLoadError, match=r"arch 'test_convnextt': unknown architecture"):
        open_model(path, arch="test_convnextt")


def test_guess_covers_timm_architectures(vit_ref, monkeypatch):
    # Every shortlisted name is a timm model (a renamed one would silently drop out).
    assert [n for n in arch_guess.TIMM_SHORTLIST if not timm.is_model(n)] == []
    # A few close relatives from two families keep the test cheap (each is built on meta).
    few = ("test_vit", "test_vit2", "vit_tiny_patch16_224", "test_convnext", "convnext_atto")
    monkeypatch.setattr(arch_guess, "TIMM_SHORTLIST", few)
    arch_guess._timm_families.cache_clear()
    try:
        families = arch_guess._timm_families()
        assert families["vision_transformer"] == (
            "timm/test_vit", "timm/test_vit2", "timm/vit_tiny_patch16_224"
        )  # fmt: skip
        sd = {f"module.{k}": v for k, v in vit_ref.state_dict().items()}
        guesses = arch_guess.guess_architecture(sd, zoos=("timm",))
    finally:
        arch_guess._timm_families.cache_clear()
    assert [g.name for g in guesses[:2]] == ["timm/test_vit", "timm/test_vit2"]
    assert guesses[0].fits and guesses[0].prefix == "module." and not guesses[1].fits
    assert arch_guess.confident_guess(guesses) is guesses[0]


def test_unknown_name_lists_the_forms_and_closest_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError) as info:
        open_model("test_vitt")
    message = str(info.value)
    assert message.startswith("test_vitt: unknown model: not a file, 'demo', a torchvision name")
    for form in ("timm:NAME", "save_pretrained", "file.py:ClassName", "package.module:factory"):
        assert form in message
    assert "did you mean timm:test_vit" in message


def test_without_timm_the_prefix_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "timm", None)
    assert timm_models.timm_names() == ()
    assert resolve_name("test_vit") is None
    with pytest.raises(ModelLoadError, match=r"needs the 'timm' package"):
        open_model("timm:test_vit")


def test_search_ranks_exact_then_prefix_then_part_then_any_match():
    names = sorted(timm.list_models())
    found = timm_models.rank_matches("ResNet18", names)
    # Exact, then what starts with it, then the rest (timm's sorted list has legacy_ first).
    assert found[:2] == ["resnet18", "resnet18d"]
    assert found.index("legacy_seresnet18") > found.index("resnet18d")
    assert all("resnet18" in n for n in found) and len(found) == sum("resnet18" in n for n in names)
    assert timm_models.rank_matches("convit_tiny", names)[0] == "convit_tiny"
    assert timm_models.rank_matches("convit", names)[:3] == [
        "convit_base",
        "convit_small",
        "convit_tiny",
    ]
    tiny = timm_models.rank_matches("vit_tiny", names)
    starts = [n for n in tiny if n.startswith("vit_tiny")]
    assert starts and tiny[: len(starts)] == starts
    assert tiny.index("convit_tiny") >= len(starts)
    # A part of a name beginning with the query ranks above a match inside a part.
    assert timm_models.rank_matches("net18", ["seresnet18", "x_net18"]) == ["x_net18", "seresnet18"]
    assert timm_models.rank_matches("  ", ["b", "a"]) == ["b", "a"]
