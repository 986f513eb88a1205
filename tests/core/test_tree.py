"""module_tree mirrors named_modules() with real counts and shapes."""

from __future__ import annotations

import torch
import torchvision
from torch import nn

import actviz
from tests.core.seed_models import PowLogModel, SeedMLP


def test_resnet18_tree():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    tree = actviz.module_tree(model)
    assert [n.name for n in tree] == [name for name, _ in model.named_modules()]
    root = tree[""]
    assert root.type_name == "ResNet" and root.total_params == 11_689_512 and root.own_params == 0
    assert root.short_name == "(model)" and root.children[:3] == ["conv1", "bn1", "relu"]
    conv1 = tree["conv1"]
    assert conv1.own_params == 64 * 3 * 7 * 7 and conv1.is_leaf and conv1.depth == 1
    assert conv1.parameters[0].shape == (64, 3, 7, 7)
    assert abs(conv1.parameters[0].norm - float(model.conv1.weight.detach().norm())) < 1e-3
    bn = tree["layer1.0.bn1"]
    assert {b.name for b in bn.buffers} == {"running_mean", "running_var", "num_batches_tracked"}
    assert bn.parent == "layer1.0" and bn.depth == 3 and not bn.training
    assert tree["layer1"].total_params == sum(p.numel() for p in model.layer1.parameters())
    assert len(tree.leaves()) == 52
    assert tree.names_of_type("Conv2d")[:2] == ["conv1", "layer1.0.conv1"]
    assert tree.descendants("layer4.1", leaves_only=True) == [
        "layer4.1.conv1",
        "layer4.1.bn1",
        "layer4.1.relu",
        "layer4.1.conv2",
        "layer4.1.bn2",
    ]


def test_the_tree_reads_no_weights_until_a_norm_is_asked_for_and_keeps_none_alive(monkeypatch):
    """Built at every model switch on the GUI thread: no pass over the weights there."""
    import gc
    import weakref

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    norms = []
    real = torch.linalg.vector_norm
    monkeypatch.setattr(
        torch.linalg, "vector_norm", lambda *a, **k: norms.append(1) or real(*a, **k)
    )
    tree = actviz.module_tree(model)
    assert norms == []  # 62 parameters, none read
    fc = tree["fc"].parameters[0]
    assert fc.norm == float(real(model.fc.weight.detach())) and len(norms) == 1
    assert fc.norm == fc.norm and len(norms) == 1  # read once
    conv = tree["layer1.0.conv1"]
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None  # the tree holds no weights of a model the window let go
    assert tree["conv1"].parameters[0].numel == 9408 and conv.own_params == 36864
    assert str(tree["conv1"].parameters[0].norm) == "nan"  # freed before it was read


def test_tree_with_capture_has_shapes_and_calls():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    cap = actviz.capture(model, torch.randn(1, 3, 64, 64), layers=["layer1.0.relu", "fc"])
    tree = actviz.module_tree(model, cap)
    assert tree["layer1.0.relu"].output_shape == (1, 64, 16, 16)
    assert tree["layer1.0.relu"].calls == 2
    assert tree["fc"].output_shape == (1, 1000) and tree["fc"].calls == 1
    assert tree["conv1"].output_shape is None and tree["conv1"].calls == 0


def test_seed_models_tree_and_training_flag():
    mlp = SeedMLP().train()
    mlp.s2.eval()
    tree = actviz.module_tree(mlp)
    assert (
        len(tree) == 5 and tree["fc1"].own_params == 5
    )  # 2x2 weight + a bias of size 1, as in the article
    assert tree["s1"].training and not tree["s2"].training
    pl = actviz.module_tree(PowLogModel())
    assert [n.name for n in pl] == ["", "powModel", "logModel"]
    assert pl["powModel"].parameters[0].name == "powParam"


def test_scripted_tree_still_shows():
    scripted = torch.jit.script(nn.Sequential(nn.Linear(2, 3), nn.ReLU()))
    tree = actviz.module_tree(scripted)
    assert [n.name for n in tree] == ["", "0", "1"]
    assert tree["0"].own_params == 9


def test_lazy_modules_before_and_after_their_first_forward():
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU())
    tree = actviz.module_tree(model)
    assert tree["0"].own_params == 0 and tree["0"].parameters[0].dtype == "uninitialized"
    cap = actviz.capture(model, torch.randn(2, 3))
    tree = actviz.module_tree(model, cap)
    assert tree["0"].own_params == 3 * 4 + 4 and tree["0"].output_shape == (2, 4)


def test_a_torchscript_models_tree_names_the_classes_it_was_made_of():
    import warnings

    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated upstream
        scripted = torch.jit.script(net)
    tree = actviz.module_tree(scripted)
    assert [n.type_name for n in tree] == ["Sequential", "Conv2d", "BatchNorm2d", "ReLU"]
