"""open_model / load_model on real files of every supported format, and their failures."""

from __future__ import annotations

import os
import random
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torchvision
from torch import nn

from actviz.io.errors import ActvizError, ModelLoadError, UntrustedFileError
from actviz.io.models.loaded_model import LoadedModel
from actviz.io.models.loading import load_model, open_model
from tests.io.conftest import Payload, same_output, tiny_namespace


@pytest.fixture(scope="module")
def r18() -> nn.Module:
    """torchvision resnet18 with random weights (seeded), eval mode."""
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


@pytest.fixture(scope="module")
def r18_x() -> torch.Tensor:
    # 32x32 is the smallest size ResNet-18 takes (1x1 after layer4): keeps forwards cheap.
    return torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))


@pytest.fixture(scope="module")
def r18_out(r18, r18_x) -> torch.Tensor:
    with torch.no_grad():
        return r18(r18_x)


# --------------------------------------------------------------------------------------------
# state_dict variants
# --------------------------------------------------------------------------------------------


def _wrap(state: dict, variant: str) -> dict:
    if variant == "bare":
        return state
    if variant == "state_dict_key":
        return {"state_dict": state, "epoch": 7, "best_acc": 0.5}
    if variant == "model_state_dict_key":
        return {
            "model_state_dict": state,
            "optimizer_state_dict": {"state": {}, "param_groups": []},
        }
    if variant == "model_key":
        return {"model": state, "step": 100}
    if variant == "lightning":
        return {
            "epoch": 3,
            "global_step": 300,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": {f"model.{k}": v for k, v in state.items()},
            "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1}]}],
            "lr_schedulers": [],
            "loops": {},
        }
    raise AssertionError(variant)


VARIANTS = ["bare", "state_dict_key", "model_state_dict_key", "model_key", "lightning"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_tiny_state_dict_variants_load_exact_weights(
    variant, tmp_path, tiny_file, tiny_ref, fixed_input
):
    path = tmp_path / "tiny.ckpt"
    torch.save(_wrap(tiny_ref.state_dict(), variant), path)
    loaded = open_model(path, arch=f"{tiny_file}:TinyNet")
    assert isinstance(loaded, LoadedModel)
    assert loaded.kind == "state_dict"
    assert loaded.name == "tiny.ckpt" + f" ({tiny_file}:TinyNet)"
    assert loaded.model.training is False
    assert all(not m.training for m in loaded.model.modules())
    assert same_output(loaded.model, tiny_ref, fixed_input)


def test_tiny_from_dataparallel_and_compile_prefixes(tmp_path, tiny_file, tiny_ref, fixed_input):
    dp = nn.DataParallel(tiny_ref)
    compiled = torch.compile(tiny_ref)
    ddp_compiled = {f"module.{k}": v for k, v in compiled.state_dict().items()}
    assert next(iter(dp.state_dict())).startswith("module.")
    assert next(iter(compiled.state_dict())).startswith("_orig_mod.")
    for name, state in [
        ("dp", dp.state_dict()),
        ("compiled", compiled.state_dict()),
        ("both", ddp_compiled),
    ]:
        path = tmp_path / f"{name}.pth"
        torch.save(state, path)
        model = load_model(path, arch=f"{tiny_file}:TinyNet")
        assert same_output(model, tiny_ref, fixed_input), name


def test_lightning_entries_outside_model_prefix_are_ignored(
    tmp_path, tiny_file, tiny_ref, fixed_input
):
    state = {f"model.{k}": v for k, v in tiny_ref.state_dict().items()}
    state["criterion.pos_weight"] = torch.ones(4)
    path = tmp_path / "lit.ckpt"
    torch.save({"state_dict": state, "epoch": 1}, path)
    model = load_model(path, arch=f"{tiny_file}:TinyNet")
    assert same_output(model, tiny_ref, fixed_input)


def test_arch_whose_own_keys_start_with_model_keeps_them(
    tmp_path, tiny_ref, fixed_input, monkeypatch
):
    # A wrapper whose attribute is literally called "model": nothing may be stripped. It also
    # imports a sibling file, which works because the file's folder is on sys.path meanwhile.
    from tests.io.conftest import TINY_SOURCE

    (tmp_path / "actviz_test_sibling.py").write_text(TINY_SOURCE, encoding="utf-8")
    monkeypatch.delitem(sys.modules, "actviz_test_sibling", raising=False)
    code = tmp_path / "wrapper.py"
    code.write_text(
        "from torch import nn\n"
        "from actviz_test_sibling import TinyNet\n"
        "class Wrapper(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.model = TinyNet()\n"
        "    def forward(self, x):\n"
        "        return self.model(x)\n",
        encoding="utf-8",
    )
    path = tmp_path / "wrapped.pt"
    torch.save({f"model.{k}": v for k, v in tiny_ref.state_dict().items()}, path)
    try:
        model = load_model(path, arch=f"{code}:Wrapper")
    finally:
        sys.modules.pop("actviz_test_sibling", None)
    assert str(tmp_path) not in sys.path
    assert same_output(model, tiny_ref, fixed_input)


def test_arch_recorded_in_checkpoint_is_used(tmp_path, r18, r18_x, r18_out):
    path = tmp_path / "imagenet_example.pth.tar"
    torch.save({"arch": "resnet18", "epoch": 90, "state_dict": r18.state_dict()}, path)
    loaded = open_model(path)
    assert loaded.name == "imagenet_example.pth.tar (resnet18)"
    assert same_output(loaded.model, r18_out, r18_x)


@pytest.mark.parametrize("variant", ["bare", "module", "lightning", "orig_mod"])
def test_resnet18_state_dict_variants(variant, tmp_path, r18, r18_x, r18_out):
    state = r18.state_dict()
    if variant == "module":
        state = nn.DataParallel(r18).state_dict()
    elif variant == "orig_mod":
        state = torch.compile(r18).state_dict()
    elif variant == "lightning":
        state = _wrap(state, "lightning")
    path = tmp_path / f"r18_{variant}.pt"
    torch.save(state, path)
    loaded = open_model(path, arch="resnet18")
    assert loaded.kind == "state_dict"
    # Metadata comes from the torchvision weights enum even for a random-init arch.
    assert loaded.input_size == (224, 224)
    assert loaded.categories is not None and len(loaded.categories) == 1000
    assert loaded.categories[1] == "goldfish"
    assert not loaded.model.training
    assert same_output(loaded.model, r18_out, r18_x)


def test_legacy_non_zip_torch_save(tmp_path, tiny_file, tiny_ref, fixed_input):
    path = tmp_path / "legacy.pt"
    torch.save(tiny_ref.state_dict(), path, _use_new_zipfile_serialization=False)
    assert path.read_bytes()[:1] == b"\x80"
    model = load_model(path, arch=f"{tiny_file}:TinyNet")
    assert same_output(model, tiny_ref, fixed_input)


# --------------------------------------------------------------------------------------------
# safetensors, TorchScript, torch.export
# --------------------------------------------------------------------------------------------


def test_safetensors_tiny_and_resnet18_detected_by_content(
    tmp_path, tiny_file, tiny_ref, fixed_input, r18, r18_x, r18_out
):
    from safetensors.torch import save_file

    tiny_path = tmp_path / "tiny.weights"  # no telling extension: detected from the header
    save_file(
        {f"module.{k}": v.contiguous() for k, v in tiny_ref.state_dict().items()}, str(tiny_path)
    )
    loaded = open_model(tiny_path, arch=f"{tiny_file}:TinyNet")
    assert loaded.kind == "safetensors"
    assert same_output(loaded.model, tiny_ref, fixed_input)

    r18_path = tmp_path / "r18.safetensors"
    save_file(r18.state_dict(), str(r18_path))
    loaded = open_model(r18_path, arch="resnet18")
    assert loaded.kind == "safetensors"
    assert same_output(loaded.model, r18_out, r18_x)


def test_safetensors_without_arch_asks_for_it(tmp_path, tiny_ref):
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file(tiny_ref.state_dict(), str(path))
    with pytest.raises(ModelLoadError, match=r"w\.safetensors.*--arch.*arch="):
        open_model(path)


def _jit(model: nn.Module, x: torch.Tensor) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        try:
            return torch.jit.script(model)
        except OSError:  # classes built from a string have no source to script: trace
            return torch.jit.trace(model, x)


def test_torchscript_tiny_and_resnet18(tmp_path, tiny_ref, fixed_input, r18, r18_x, r18_out):
    with torch.no_grad():
        tiny_out = tiny_ref(fixed_input)
    cases = [(tiny_ref, tiny_out, fixed_input, "tiny_ts.pt"), (r18, r18_out, r18_x, "r18_ts.pt")]
    for ref, expected, x, name in cases:
        path = tmp_path / name
        scripted = _jit(ref, x)
        scripted.train()  # saved in train mode: open_model must switch it to eval
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.jit.save(scripted, str(path))
        loaded = open_model(path, arch="resnet18")  # arch is irrelevant for TorchScript
        assert loaded.kind == "torchscript"
        assert not loaded.model.training
        assert any("hooks cannot fire" in w and "input gradients" in w for w in loaded.warnings)
        assert any("arch='resnet18' ignored" in w for w in loaded.warnings)
        # The module tree is still there to browse.
        names = [n for n, _ in loaded.model.named_modules()]
        assert set(names) == {n for n, _ in ref.named_modules()}
        assert same_output(loaded.model, expected, x)


def test_torch_export_program_is_unflattened_and_hookable(tmp_path, tiny_ref, fixed_input):
    program = torch.export.export(tiny_ref, (fixed_input,))
    path = tmp_path / "tiny.pt2"
    torch.export.save(program, str(path))
    loaded = open_model(path)
    assert loaded.kind == "export"
    assert loaded.input_shape == (1, 3, 32, 32)
    assert loaded.input_size == (32, 32)
    assert same_output(loaded.model, tiny_ref, fixed_input)
    # Hooks fire on the original submodule names, which is what capture relies on.
    seen: dict[str, tuple] = {}
    modules = dict(loaded.model.named_modules())
    handles = [
        modules[name].register_forward_hook(
            lambda mod, inp, out, name=name: seen.__setitem__(name, tuple(out.shape))
        )
        for name in ("conv", "bn", "fc")
    ]
    try:
        loaded.model(fixed_input)
    finally:
        for h in handles:
            h.remove()
    assert seen == {"conv": (1, 6, 32, 32), "bn": (1, 6, 32, 32), "fc": (1, 4)}


def test_torch_export_with_pickled_payload_needs_trust(tmp_path, tiny_ref, fixed_input):
    # Rewrite a real .pt2 so one weight is stored "use_pickle" with a payload that runs code:
    # torch.export.load would unpickle it with weights_only=False, so open_model must refuse.
    import json
    import zipfile

    clean = tmp_path / "clean.pt2"
    torch.export.save(torch.export.export(tiny_ref, (fixed_input,)), str(clean))
    marker = tmp_path / "pwned"
    payload = tmp_path / "payload.bin"
    torch.save({"w": Payload(str(marker))}, payload)
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(clean) as src:
        config_name = next(n for n in src.namelist() if n.endswith("model_weights_config.json"))
        config = json.loads(src.read(config_name))
        entry = next(iter(config["config"].values()))
        entry["use_pickle"] = True
        poisoned = config_name.rsplit("/", 1)[0] + "/" + entry["path_name"]
        with zipfile.ZipFile(evil, "w") as dst:
            for item in src.infolist():
                data = src.read(item.filename)
                if item.filename == config_name:
                    data = json.dumps(config).encode()
                elif item.filename == poisoned:
                    data = payload.read_bytes()
                dst.writestr(item, data)
    with pytest.raises(UntrustedFileError) as info:
        open_model(evil)
    assert "mkdir" in str(info.value)
    assert not marker.exists()
    assert open_model(clean).kind == "export"  # the untouched file needs no trust


# --------------------------------------------------------------------------------------------
# Whole pickled modules and trust
# --------------------------------------------------------------------------------------------


def test_whole_pickled_module_needs_trust(tmp_path, fixed_input):
    torch.manual_seed(2)
    ref = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 30 * 30, 2))
    ref.train()
    path = tmp_path / "whole.pt"
    torch.save(ref, path)
    with pytest.raises(UntrustedFileError) as info:
        open_model(path)
    err = info.value
    assert err.path == str(path)
    message = str(err)
    assert "\n" not in message
    assert str(path) in message and "run code" in message
    assert "torch.nn.modules.container.Sequential" in message
    assert "trust=True" in message and "--trust" in message and "dialog" in message

    loaded = open_model(path, trust=True)
    assert loaded.kind == "pickle"
    assert not loaded.model.training
    assert same_output(loaded.model, ref.eval(), fixed_input)


def test_malicious_pickle_runs_nothing_unless_trusted(tmp_path, fixed_input):
    marker = tmp_path / "pwned"
    torch.manual_seed(4)
    ref = nn.Sequential(nn.Conv2d(3, 2, 1))
    ref.payload = Payload(str(marker))  # unpickling this calls os.mkdir(marker)
    path = tmp_path / "evil.pt"
    torch.save(ref, path)

    for _ in range(2):  # also from the GUI's retry path: refusing twice still runs nothing
        with pytest.raises(UntrustedFileError, match="evil.pt"):
            open_model(path)
    assert not marker.exists()
    with pytest.raises(UntrustedFileError):
        open_model(path, arch="resnet18")
    assert not marker.exists()

    loaded = open_model(path, trust=True)
    assert marker.exists()  # trusting really unpickles (the code ran)
    del ref.payload
    assert same_output(loaded.model, ref.eval(), fixed_input)


def test_training_dict_holding_a_module_needs_trust(tmp_path, fixed_input):
    torch.manual_seed(5)
    ref = nn.Sequential(nn.Conv2d(3, 2, 1), nn.Flatten())
    path = tmp_path / "bundle.pt"
    torch.save({"model": ref, "epoch": 2}, path)
    with pytest.raises(UntrustedFileError):
        load_model(path)
    model = load_model(path, trust=True)
    assert same_output(model, ref.eval(), fixed_input)


# --------------------------------------------------------------------------------------------
# Code references
# --------------------------------------------------------------------------------------------


def test_file_class_factory_and_instance(tiny_file, fixed_input):
    ns = tiny_namespace()
    reference = [(n, type(m).__name__) for n, m in ns["TinyNet"]().named_modules()]
    for attr in ("TinyNet", "make_tiny", "instance"):
        loaded = open_model(f"{tiny_file}:{attr}")
        assert loaded.kind == "code"
        assert [(n, type(m).__name__) for n, m in loaded.model.named_modules()] == reference
        assert not loaded.model.training
        out = loaded.model(fixed_input)
        assert out.shape == (1, 4)
        # eval mode for real: Dropout(0.5) is off and BatchNorm uses its running statistics
        torch.testing.assert_close(loaded.model(fixed_input), out, rtol=0, atol=0)


def test_package_module_factory_builds_random_torchvision(offline, r18_x):
    model = load_model("torchvision.models:resnet18")
    assert isinstance(model, torchvision.models.ResNet)
    assert model(r18_x).shape == (1, 1000)
    assert offline == []  # the builder's default is weights=None: no network involved


@pytest.mark.parametrize(
    "source, expected",
    [
        ("{file}:Missing", r"tiny_model\.py has no attribute 'Missing'; it defines .*TinyNet"),
        ("{file}:needs_args", r"needs_args\(\) with no arguments failed .*width"),
        ("{file}:not_a_model", r"not_a_model.*is a int, not a model class or factory"),
        ("{dir}/nope.py:Net", r"nope\.py: file not found"),
        ("no_such_pkg_xyz.models:Net", r"no_such_pkg_xyz\.models: cannot import module"),
        (
            "{file}",
            r"tiny_model\.py: name the model inside the file as .*:ClassName.*TinyNet, GrayNet",
        ),
    ],
)
def test_code_reference_errors(source, expected, tiny_file):
    src = source.format(file=tiny_file, dir=tiny_file.parent)
    with pytest.raises(ModelLoadError, match=expected):
        open_model(src)


# --------------------------------------------------------------------------------------------
# torchvision names and the network
# --------------------------------------------------------------------------------------------


def test_torchvision_name_offline_is_random_init_with_warning(offline, r18_x):
    loaded = open_model("resnet18")
    assert offline == []  # ACTVIZ_OFFLINE: not even the probe touches the network
    assert loaded.kind == "torchvision"
    assert loaded.name == "resnet18 (random init)"
    assert loaded.warnings == [
        "no network (ACTVIZ_OFFLINE is set): resnet18 uses random weights; "
        "predictions are meaningless"
    ]
    assert loaded.input_size == (224, 224)
    assert loaded.categories[0] == "tench"
    assert loaded.transforms is not None and list(loaded.transforms.crop_size) == [224]
    assert not loaded.model.training


def test_torchvision_probe_without_cache_uses_short_timeout(offline, monkeypatch):
    monkeypatch.delenv("ACTVIZ_OFFLINE")
    loaded = open_model("squeezenet1_1")
    assert len(offline) == 1
    args, kwargs = offline[0]
    assert args[0] == ("download.pytorch.org", 443)
    assert 0 < kwargs["timeout"] <= 3
    assert "download.pytorch.org unreachable" in loaded.warnings[0]
    assert "squeezenet1_1 uses random weights" in loaded.warnings[0]


def test_torchvision_random_weights_requested_has_no_warning(offline):
    loaded = open_model("resnet18", weights=None)
    assert loaded.warnings == []
    assert offline == []
    assert loaded.categories is not None  # still from the DEFAULT weights' metadata


def test_detection_model_random_init_does_not_fetch_backbone(offline, monkeypatch):
    monkeypatch.delenv("ACTVIZ_OFFLINE")
    loaded = open_model("lraspp_mobilenet_v3_large", weights=None)
    assert offline == []  # weights_backbone=None: nothing to download
    assert loaded.warnings == []


def test_torchvision_weights_from_cache_without_network(offline, monkeypatch, r18, r18_x, r18_out):
    monkeypatch.delenv("ACTVIZ_OFFLINE")
    weights = torchvision.models.ResNet18_Weights.IMAGENET1K_V1
    cache = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)
    assert str(cache).startswith(os.environ["TORCH_HOME"])
    cache.parent.mkdir(parents=True)
    torch.save(r18.state_dict(), cache)  # stands in for the real downloaded file
    loaded = open_model("resnet18", weights="IMAGENET1K_V1")
    assert offline == []
    assert loaded.warnings == []
    assert loaded.name == "resnet18 (IMAGENET1K_V1)"
    assert same_output(loaded.model, r18_out, r18_x)


def test_unknown_weights_name_lists_choices(offline):
    with pytest.raises(
        ModelLoadError,
        match=r"resnet18: unknown weights 'BOGUS'; available: DEFAULT, IMAGENET1K_V1",
    ):
        open_model("resnet18", weights="BOGUS")


def test_unknown_source_suggests_close_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError) as info:
        open_model("resnet81")
    message = str(info.value)
    assert message.startswith("resnet81: unknown model")
    assert "did you mean resnet18" in message


# --------------------------------------------------------------------------------------------
# Broken files and mismatches
# --------------------------------------------------------------------------------------------


def test_missing_empty_random_truncated_files(tmp_path, tiny_ref):
    with pytest.raises(ModelLoadError, match=r"gone\.pt: file not found"):
        open_model(tmp_path / "gone.pt")

    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match=r"empty\.pt: file is empty"):
        open_model(empty)

    noise = tmp_path / "noise.pth"
    noise.write_bytes(b"\x13" + random.Random(0).randbytes(4095))
    with pytest.raises(
        ModelLoadError, match=r"noise\.pth: not a model file \(unrecognised content\)"
    ):
        open_model(noise)

    good = tmp_path / "good.pt"
    torch.save(tiny_ref.state_dict(), good)
    data = good.read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match=r"truncated\.pt: damaged or truncated zip"):
        open_model(truncated, arch="resnet18")

    legacy = tmp_path / "legacy.pt"
    torch.save(tiny_ref.state_dict(), legacy, _use_new_zipfile_serialization=False)
    cut = tmp_path / "legacy_cut.pt"
    cut.write_bytes(legacy.read_bytes()[:200])
    with pytest.raises(ActvizError, match=r"legacy_cut\.pt"):
        open_model(cut, arch="resnet18")


def test_npy_is_not_a_model(tmp_path):
    import numpy as np

    path = tmp_path / "x.npy"
    np.save(path, np.zeros(3))
    with pytest.raises(ModelLoadError, match=r"x\.npy: not a model file \(a numpy array"):
        open_model(path)


def test_state_dict_without_arch_names_the_flag(tmp_path, tiny_ref):
    path = tmp_path / "weights.pt"
    torch.save(tiny_ref.state_dict(), path)
    with pytest.raises(ModelLoadError) as info:
        open_model(path)
    message = str(info.value)
    assert message.startswith(f"{path}: holds only weights")
    assert "--arch" in message and "arch=" in message


def test_wrong_architecture_lists_shape_mismatches(tmp_path, r18):
    torch.manual_seed(6)
    ten_class = torchvision.models.resnet18(weights=None, num_classes=10)
    # A grayscale stem: unlike a 10-class head alone (adapted, see test_arch_guess), no fit.
    ten_class.conv1 = nn.Conv2d(1, 64, 7, 2, 3, bias=False)
    path = tmp_path / "ft.pt"
    torch.save({"model_state_dict": ten_class.state_dict()}, path)
    with pytest.raises(ModelLoadError) as info:
        open_model(path, arch="resnet18")
    message = str(info.value)
    assert message.startswith(f"{path}: weights do not fit architecture resnet18")
    assert "3 shape mismatches" in message
    assert "conv1.weight: checkpoint (64, 1, 7, 7) vs model (64, 3, 7, 7)" in message
    assert "fc.weight: checkpoint (10, 512) vs model (1000, 512)" in message
    assert "fc.bias: checkpoint (10,) vs model (1000,)" in message


def test_wrong_architecture_lists_missing_and_unexpected(tmp_path, tiny_file):
    torch.manual_seed(8)
    other = nn.Sequential(nn.Conv2d(3, 6, 3), nn.Linear(6, 2))
    path = tmp_path / "other.pt"
    torch.save(other.state_dict(), path)
    with pytest.raises(ModelLoadError) as info:
        open_model(path, arch=f"{tiny_file}:TinyNet")
    message = str(info.value)
    assert "missing keys (conv.weight, conv.bias, bn.weight, ..." in message
    assert "4 unexpected keys (0.weight, 0.bias, 1.weight, ... (1 more))" in message


def test_training_dict_without_weights_lists_keys(tmp_path):
    path = tmp_path / "meta.pt"
    torch.save({"epoch": 3, "lr": 0.1}, path)
    with pytest.raises(
        ModelLoadError, match=r"meta\.pt: no model weights found; top-level keys are 'epoch', 'lr'"
    ):
        open_model(path, arch="resnet18")


def test_unknown_arch_suggests(tmp_path, tiny_ref):
    path = tmp_path / "w.pt"
    torch.save(tiny_ref.state_dict(), path)
    with pytest.raises(
        ModelLoadError, match=r"arch 'resnt18': unknown architecture.*did you mean resnet18"
    ):
        open_model(path, arch="resnt18")


def test_cuda_device_is_refused_when_absent():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ModelLoadError, match=r"device 'cuda': CUDA is not available"):
        open_model("torchvision.models:resnet18", device="cuda")


def test_model_instance_passes_through_in_eval_mode(tiny_ref):
    tiny_ref.train()
    loaded = open_model(tiny_ref)
    assert loaded.model is tiny_ref and not tiny_ref.training
    assert loaded.kind == "module"


def test_demo_model():
    from actviz.io.models import demo_model as demo

    weights = demo.demo_weights_path()
    if not weights.is_file():
        with pytest.raises(ModelLoadError, match=r"^demo: the bundled demo model is unavailable"):
            open_model("demo")
        pytest.skip("demo weights are not trained yet (checked the error instead)")
    loaded = open_model("demo")
    assert loaded.kind == "demo"
    assert loaded.categories == demo.DEMO_CLASSES
    assert loaded.input_size == demo.DEMO_INPUT_SIZE
    assert loaded.transforms is demo.demo_transform
    assert not loaded.model.training
    assert loaded.model(torch.zeros(1, 3, 64, 64)).shape == (1, len(demo.DEMO_CLASSES))
