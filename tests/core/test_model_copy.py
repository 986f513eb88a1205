"""The model-copy service: a copy is the model's twin, independent, stale after a change,
kept by purpose while nothing changed, and never carries a running capture's hooks."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import torch
import torchvision
from torch import nn

from actviz.core.capture import capture
from actviz.core.edit_kinds import ablate
from actviz.core.model_copy import (
    ModelCopy,
    copy_refusal,
    model_bytes,
    private_copy,
    weights_signature,
    with_loading,
)


def _conv_bn_flatten() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten()).eval()


class Uncopyable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def __deepcopy__(self, memo):
        raise TypeError("holds a file handle")


def test_the_copy_captures_exactly_what_the_model_does():
    model = torchvision.models.resnet18(weights=None).eval()
    rep = ModelCopy(model)
    rep.build()
    assert rep.usable() and rep.twin is not model and not rep.failure
    x = torch.randn(1, 3, 64, 64)
    layers = ["layer1", "layer4.1.conv2"]
    a = capture(model, x, layers)
    b = capture(rep.twin, x, layers)
    for name in layers:
        assert torch.equal(a[name].output, b[name].output)
        assert torch.equal(a[name].grad_output, b[name].grad_output)
    assert torch.equal(a.output, b.output)
    # No weight is shared: the copy's tensors are its own.
    ids = {id(p) for p in model.parameters()}
    assert not ids & {id(p) for p in rep.twin.parameters()}
    assert (
        rep.nbytes
        == model_bytes(model)
        == sum(
            t.numel() * 4 for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()
        )
        + sum(t.numel() * 8 for t in model.buffers() if not t.is_floating_point())
    )


def test_a_change_to_the_copy_leaves_the_original_alone():
    model = _conv_bn_flatten()
    before = model[0].weight.detach().clone()
    twin = private_copy(model)
    with torch.no_grad():
        twin[0].weight.zero_()
    twin[1] = nn.Identity()
    assert torch.equal(model[0].weight, before)
    assert isinstance(model[1], nn.BatchNorm2d)


def test_an_in_place_change_or_a_swapped_module_makes_the_copy_stale():
    model = _conv_bn_flatten()
    rep = ModelCopy(model)
    rep.build()
    assert rep.usable()
    before = weights_signature(model)
    capture(model, torch.randn(1, 3, 6, 6), ["0"])  # an eval capture writes nothing back
    assert weights_signature(model) == before and rep.usable()
    with torch.no_grad():
        model[0].weight.mul_(2.0)
    assert not rep.usable()

    other = ModelCopy(model)
    other.build()
    assert other.usable()
    model[0] = nn.Conv2d(3, 4, 3)
    assert not other.usable()

    # New memory under the same parameter (``.data =``, ``.to(device)``) keeps the version.
    third = ModelCopy(model)
    third.build()
    assert third.usable()
    model[1].weight.data = torch.full((4,), 3.0)
    assert not third.usable()


def test_an_uncopyable_model_is_refused_with_its_reason_not_raised():
    rep = ModelCopy(Uncopyable())
    rep.build()
    assert rep.twin is None and not rep.usable()
    assert rep.failure == "TypeError: holds a file handle"
    assert isinstance(rep.error, TypeError)
    with pytest.raises(TypeError, match="holds a file handle"):
        private_copy(Uncopyable())


def test_refusals_name_the_reason():
    assert copy_refusal(_conv_bn_flatten()) is None
    assert copy_refusal(_conv_bn_flatten(), max_bytes=100) == "the model's weights take 0 MiB"
    scripted = torch.jit.script(_conv_bn_flatten())
    assert copy_refusal(scripted) == "a TorchScript model is not copied"
    meta = nn.Linear(2, 2, device="meta")  # an offloaded part's parameters sit on "meta"
    assert copy_refusal(meta) == "the model is not on the CPU"


def test_train_and_eval_flags_are_kept_or_set_to_eval_when_asked():
    model = _conv_bn_flatten().train()
    model[1].eval()  # a frozen norm inside a model that trains
    kept = private_copy(model)
    assert [m.training for m in kept.modules()] == [m.training for m in model.modules()]
    assert [m.training for m in kept.modules()] == [True, True, False, True, True]
    evaluated = private_copy(model, to_eval=True)
    assert not any(m.training for m in evaluated.modules())
    assert [m.training for m in model.modules()] == [True, True, False, True, True]


def test_a_copy_made_during_a_capture_leaves_its_hooks_out_and_keeps_the_users():
    model = _conv_bn_flatten()
    made: list[nn.Module] = []
    user_calls: list[int] = []

    def user_hook(_module, _args, _output):
        user_calls.append(1)
        if not made:
            made.append(private_copy(model))  # a scan thread copies while a capture runs

    handle = model[2].register_forward_hook(user_hook)
    try:
        capture(model, torch.randn(1, 3, 6, 6), ["0", "2"])
        assert made
        twin = made[0]
        hooks = [h for m in twin.modules() for h in m._forward_hooks.values()]  # noqa: SLF001
        assert hooks == [user_hook]  # the capture's recorder hooks stayed behind
        assert all("forward" not in m.__dict__ for m in twin.modules())  # its wrappers too
        x = torch.randn(1, 3, 6, 6)
        assert torch.equal(twin(x), model(x))
        assert len(user_calls) == 3
    finally:
        handle.remove()


def test_a_copy_made_on_another_thread_while_captures_run_waits_its_turn_and_is_clean():
    """A dataset scan copies the model on its own thread while live mode captures it on the
    capture worker. Copied under way, 1 copy in 6 failed ("dictionary changed size during
    iteration", a recorded non-leaf tensor) and 1 in 40 carried the capture's wrappers; the
    window's scan then failed beside live mode. The copy takes its turn with the captures."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU(), nn.Flatten()
    ).eval()
    x = torch.randn(2, 3, 12, 12)
    stop = threading.Event()
    captures: list[int] = []
    errors: list[BaseException] = []

    def capture_loop() -> None:
        try:
            while not stop.is_set():
                capture(model, x, ["0", "1", "2", "3"])
                captures.append(1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    thread = threading.Thread(target=capture_loop)
    thread.start()
    twins = []
    try:
        for _ in range(40):
            seen = len(captures)
            while len(captures) == seen and thread.is_alive():  # a capture between two copies
                time.sleep(0.0005)
            entry = ModelCopy(model, to_eval=True)
            entry.build()
            assert entry.error is None, entry.failure
            twins.append(entry.twin)
    finally:
        stop.set()
        thread.join()
    assert not errors and len(captures) >= 40
    for twin in twins:
        assert all("forward" not in m.__dict__ for m in twin.modules())
        assert all(not m._forward_hooks for m in twin.modules())  # noqa: SLF001
    assert all(not m._forward_hooks for m in model.modules())  # noqa: SLF001
    assert torch.equal(twins[-1](x), model(x))


def test_a_copy_carries_no_edit_and_applies_the_edits_its_run_is_given():
    model = _conv_bn_flatten()
    twin = private_copy(model)
    x = torch.randn(1, 3, 6, 6)
    edits = {"0": (ablate([1, 2]),)}
    plain = capture(model, x, ["2"])
    edited = capture(model, x, ["2"], edits=edits)
    assert not torch.equal(plain.output, edited.output)
    assert torch.equal(capture(twin, x, ["2"]).output, plain.output)
    on_twin = capture(twin, x, ["2"], edits=edits)
    assert torch.equal(on_twin.output, edited.output)
    assert torch.equal(on_twin["2"].output[:, 1:3], torch.zeros_like(on_twin["2"].output[:, 1:3]))


def test_an_offloaded_model_shares_its_offloaded_weights(tmp_path):
    pytest.importorskip("accelerate")
    from actviz.io.models import big

    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(4)]).eval()
    where = big.placement(
        {"0": "cpu", "1": "cpu", "2": "disk", "3": "disk"}, offload_folder=tmp_path
    )
    big.dispatch(model, where)
    x = torch.randn(2, 16)
    expected = model(x)
    twin = private_copy(model)
    assert model[2].weight.device.type == "meta"
    for i in (2, 3):
        assert twin[i]._hf_hook.weights_map is model[i]._hf_hook.weights_map  # noqa: SLF001
    assert twin[0].weight is not model[0].weight
    assert torch.equal(twin(x), expected)
    assert copy_refusal(model) == "the model is not on the CPU"


def test_with_loading_puts_the_copy_in_the_loaded_models_place():
    @dataclasses.dataclass
    class Loaded:
        model: nn.Module
        size: int = 224

    model, twin = _conv_bn_flatten(), _conv_bn_flatten()
    loaded = Loaded(model, 96)
    assert with_loading(twin, model, loaded) == Loaded(twin, 96)
    assert (
        with_loading(twin, model, Loaded(_conv_bn_flatten())) is twin
    )  # another model's: the copy alone
    assert with_loading(twin, model, None) is twin
