"""Channel effects: estimates against a hand computation, exact effects against single captures
with one edit each, for zero, scan-mean and patch baselines; the model left as found."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.analysis.effects.channel_effects import effects, estimate_from_capture, verify
from actviz.analysis.effects.effect_results import Effects, spearman
from actviz.core.records import CaptureCancelled
from actviz.edits import ablate, custom, patch
from actviz.io.models.demo_model import demo_sample_tensor, generate_image, load_demo_model

# In ResNet's BasicBlock one ReLU(inplace=True) runs twice: a reused module and an in-place one.
RESNET_LAYERS = ["layer1.0.relu", "layer2", "layer3.1.conv2", "layer4"]


def hand_estimate(model, x, layer, target, baseline=None):
    """sum over calls and positions of (baseline - a) * g, channels in dim 1 (float64)."""
    cap = actviz.capture(model, x, [layer], target=target)
    total = 0.0
    for call, rec in enumerate(cap.calls(layer)):
        a, g = rec.tensor.double(), rec.grad.double()
        b = torch.zeros_like(a) if baseline is None else baseline(call, a)
        dims = [d for d in range(a.ndim) if d != 1]
        total = total + ((b - a) * g).sum(dim=dims)
    return total.numpy()


def top_class(model, x) -> int:
    with torch.no_grad():
        return int(model(x).argmax(1)[0])


def loop_exact(model, x, layer, channels, target, make_edit):
    """The target change of one single capture per channel, each with one edit."""
    clean = actviz.capture(model, x, [layer], target=target, gradients=False).target_value
    out = []
    for c in channels:
        cap = actviz.capture(
            model, x, [layer], target=target, gradients=False, edits={layer: make_edit(c)}
        )
        out.append(cap.target_value - clean)
    return np.array(out)


def model_state(model: nn.Module):
    return (
        {k: v.clone() for k, v in model.state_dict().items()},
        [(m.training, dict(m._forward_hooks), dict(m._forward_pre_hooks)) for m in model.modules()],
        [(p.requires_grad, None if p.grad is None else p.grad.clone()) for p in model.parameters()],
        [getattr(m, "inplace", None) for m in model.modules()],
    )


def assert_same_state(before, after):
    sd0, flags0, params0, inplace0 = before
    sd1, flags1, params1, inplace1 = after
    assert sd0.keys() == sd1.keys()
    for k in sd0:
        assert torch.equal(sd0[k], sd1[k]), k
    assert flags0 == flags1
    assert inplace0 == inplace1
    for (rg0, g0), (rg1, g1) in zip(params0, params1, strict=True):
        assert rg0 == rg1
        assert (g0 is None) == (g1 is None)
        if g0 is not None:
            assert torch.equal(g0, g1)


# -------------------------------------------------------------------------------- estimates


def test_estimates_equal_hand_computation_on_resnet18(resnet, image):
    k = top_class(resnet, image)
    eff = effects(resnet, image, RESNET_LAYERS)
    assert eff.method == "estimate" and eff.target_description.startswith("top-1 logit")
    for layer in RESNET_LAYERS:
        want = hand_estimate(resnet, image, layer, k)
        np.testing.assert_allclose(eff.estimate(layer), want, rtol=1e-6, atol=1e-6)
    # The reused ReLU ran twice; both calls count.
    assert eff["layer1.0.relu"].calls == 2 and eff["layer2"].calls == 1
    assert eff["layer4"].shape == (1, 512, 2, 2) and eff["layer4"].channels == 512
    # After layer4 the network is linear (pool, fc): the estimate is exact there.
    assert np.abs(eff.estimate("layer4")).max() > 1e-3


def test_estimates_equal_hand_computation_on_the_demo_with_channel_means():
    model = load_demo_model()
    x, _ = demo_sample_tensor()
    layers = ["features.block2", "features.block4.relu", "fc"]
    k = top_class(model, x)
    rng = np.random.default_rng(0)
    means = {layer: rng.normal(size=n) for layer, n in zip(layers, (32, 64, 8), strict=True)}
    zero = effects(model, x, layers)
    mean = effects(model, x, layers, baseline=means)
    assert mean.baseline == "given channel means"
    for layer in layers:
        np.testing.assert_allclose(
            zero.estimate(layer), hand_estimate(model, x, layer, k), rtol=1e-6, atol=1e-6
        )
        vec = torch.from_numpy(means[layer])

        def base(_call, a, vec=vec):
            return vec.view([1, -1] + [1] * (a.ndim - 2)).expand_as(a)

        np.testing.assert_allclose(
            mean.estimate(layer), hand_estimate(model, x, layer, k, base), rtol=1e-6, atol=1e-6
        )


def test_estimate_from_an_existing_capture_and_verify_later(resnet, image):
    # Live mode has a capture with every option on; the window verifies later.
    cap = actviz.capture(resnet, image, ["layer3", "layer4"])
    est = estimate_from_capture(resnet, cap)
    direct = effects(resnet, image, ["layer3", "layer4"], method="exact", channels=3, batch=2)
    for layer in ("layer3", "layer4"):
        np.testing.assert_allclose(est.estimate(layer), direct.estimate(layer), atol=1e-9)
    checked = verify(resnet, est, 3, batch=2)
    assert est.method == "estimate" and not est["layer3"].verified.any()  # unchanged
    for layer in ("layer3", "layer4"):
        np.testing.assert_allclose(
            checked.exact(layer), direct.exact(layer), atol=1e-6, equal_nan=True
        )
    # Verifying more keeps what was verified.
    more = verify(resnet, checked, {"layer4": [0, 1]}, batch=4)
    assert more["layer4"].verified.sum() == len(
        {0, 1} | {r.channel for r in checked.top("layer4", 3)}
    )
    assert more["layer3"].verified.sum() == 3


def test_a_capture_with_what_if_edits_is_verified_with_the_same_edits(resnet, image):
    # The window's capture may carry edits: estimates and exact values are the edited network's.
    k = top_class(resnet, image)
    edits = {"layer2.0.conv1": ablate([0, 1, 2]), "layer1": actviz.edits.scale([4], 3.0)}
    cap = actviz.capture(resnet, image, ["layer3"], target=k, edits=edits)
    eff = verify(resnet, estimate_from_capture(resnet, cap, target=k), 3, batch=3)
    for row in eff.top("layer3", 3):
        both = dict(edits, layer3=ablate([row.channel]))
        clean = actviz.capture(resnet, image, ["layer3"], target=k, edits=edits, gradients=False)
        cut = actviz.capture(resnet, image, ["layer3"], target=k, edits=both, gradients=False)
        assert row.exact == pytest.approx(cut.target_value - clean.target_value, abs=1e-5)
    plain = effects(resnet, image, ["layer3"], target=k)
    assert np.abs(plain.estimate("layer3") - eff.estimate("layer3")).max() > 1e-4


# -------------------------------------------------------------------------------- exact


def test_exact_zero_baseline_equals_single_ablations_on_reused_inplace_relu(resnet, image):
    k = top_class(resnet, image)
    before = model_state(resnet)
    eff = effects(resnet, image, RESNET_LAYERS, method="exact", channels=3, batch=4)
    assert_same_state(before, model_state(resnet))
    assert eff.forwards == math.ceil(3 * len(RESNET_LAYERS) / 4)  # layers mixed in a batch
    for layer in RESNET_LAYERS:
        rows = eff.top(layer, 3)
        assert all(r.exact is not None for r in rows)
        channels = [r.channel for r in rows]
        want = loop_exact(resnet, image, layer, channels, k, lambda c: ablate([c]))
        np.testing.assert_allclose([r.exact for r in rows], want, atol=1e-5)
    # The default picks the 16 largest |estimate| of each layer.
    default = effects(resnet, image, ["layer4"], method="exact", batch=16)
    assert default["layer4"].verified.sum() == 16 and default.forwards == 1
    top = {r.channel for r in default.top("layer4", 16)}
    assert set(np.flatnonzero(default["layer4"].verified)) == top


def test_exact_scan_mean_baseline_equals_single_edits_on_the_demo():
    model = load_demo_model()
    rng = np.random.default_rng(3)
    from actviz.io.models.demo_model import demo_transform

    images = torch.stack([demo_transform(generate_image(c, rng)) for c in range(6)])
    layers = ["features.block3", "features.block4.relu"]
    scan = actviz.scan(model, images, layers, k=2, cache=False, num_workers=0)
    x, _ = demo_sample_tensor()
    k = top_class(model, x)
    eff = effects(model, x, layers, baseline=scan, method="exact", channels=4, batch=3)
    assert eff.baseline == "channel mean over 6 scanned images"
    for layer in layers:
        mean = torch.tensor(scan.stats(layer).mean, dtype=torch.float32)

        def set_mean(c, mean=mean):
            def fn(out):
                out = out.clone()
                out[:, c] = mean[c]
                return out

            return custom(fn)

        rows = eff.top(layer, 4)
        want = loop_exact(model, x, layer, [r.channel for r in rows], k, set_mean)
        np.testing.assert_allclose([r.exact for r in rows], want, atol=1e-5)

        def base(_call, a, mean=mean):
            return mean.double().view(1, -1, 1, 1).expand_as(a)

        np.testing.assert_allclose(
            eff.estimate(layer), hand_estimate(model, x, layer, k, base), rtol=1e-6, atol=1e-6
        )


def test_exact_patch_baseline_equals_single_patches(resnet, image):
    torch.manual_seed(5)
    other = torch.randn(1, 3, 64, 64)
    layers = ["layer1.0.relu", "layer3"]
    source = actviz.capture(resnet, other, layers, gradients=False)
    k = top_class(resnet, image)
    eff = effects(resnet, image, layers, baseline=source, method="exact", channels=4, batch=3)
    assert eff.baseline == "patched from another run"
    for layer in layers:
        rows = eff.top(layer, 4)
        want = loop_exact(
            resnet, image, layer, [r.channel for r in rows], k, lambda c: patch(source, [c])
        )
        np.testing.assert_allclose([r.exact for r in rows], want, atol=1e-5)

        def base(call, a, layer=layer):
            return source.calls(layer)[call].tensor.double()

        np.testing.assert_allclose(
            eff.estimate(layer), hand_estimate(resnet, image, layer, k, base), rtol=1e-6, atol=1e-6
        )


def test_batches_share_the_modules_before_their_first_edit(resnet, image):
    # A single-image input: the stem runs once per pass, the edited layer onwards 4 times.
    rows = {"conv1": [], "fc": []}
    handles = [
        getattr(resnet, name).register_forward_hook(
            lambda _m, _a, out, name=name: rows[name].append(out.shape[0])
        )
        for name in rows
    ]
    try:
        eff = effects(resnet, image, ["layer3"], method="exact", channels=8, batch=4)
    finally:
        for h in handles:
            h.remove()
    assert rows["conv1"] == [1, 1, 1] and rows["fc"] == [1, 4, 4]  # capture, then 2 passes
    assert eff.forwards == 2


class ReadsBatch(nn.Module):
    """Reads the batch size before ``conv`` and reshapes with it after: no shared prefix."""

    def __init__(self, keep_rows: bool) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 3)
        self.keep_rows = keep_rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        h = torch.relu(self.conv(x))
        if self.keep_rows:  # silently one row: caught by the output's shape
            return self.fc(h.reshape(n, -1, 4 * 6 * 6)).sum(dim=1)
        return self.fc(h.reshape(n, -1))  # (1, 4 * 144): fc fails


@pytest.mark.parametrize("keep_rows", [False, True])
def test_a_model_that_breaks_the_shared_prefix_is_run_with_the_input_repeated(keep_rows):
    torch.manual_seed(6)
    model = ReadsBatch(keep_rows).eval()
    x = torch.randn(1, 3, 8, 8)
    eff = effects(model, x, ["conv"], target=2, method="exact", channels="all", batch=4)
    want = loop_exact(model, x, "conv", range(4), 2, lambda c: ablate([c]))
    np.testing.assert_allclose(eff.exact("conv"), want, atol=1e-6)
    assert eff.forwards == 2  # the failed shared pass and its rerun
    assert not model.conv._forward_hooks and not model._forward_hooks


class SeqNet(nn.Module):
    """(N, T, D) activations: channels in the last dimension; ``act`` runs twice."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(5, 8)
        self.act = nn.GELU()
        self.mix = nn.Linear(8, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.embed(x))
        h = self.act(self.mix(h)) + h
        return self.head(h.mean(dim=1))


def test_sequences_use_the_last_dimension_and_batches_of_several_rows():
    torch.manual_seed(2)
    model = SeqNet().eval()
    x = torch.randn(2, 6, 5)  # two rows: each exact sample is both rows repeated
    target = 1
    eff = effects(
        model, x, ["embed", "act"], target=target, method="exact", channels="all", batch=3
    )
    assert eff["embed"].channel_dim == 2 and eff["embed"].channels == 8
    assert eff["act"].calls == 2
    for layer in ("embed", "act"):
        cap = actviz.capture(model, x, [layer], target=target)
        want = sum(
            (-(r.tensor.double()) * r.grad.double()).sum(dim=(0, 1)) for r in cap.calls(layer)
        )
        np.testing.assert_allclose(eff.estimate(layer), want.numpy(), rtol=1e-6, atol=1e-6)
        exact = loop_exact(model, x, layer, range(8), target, lambda c: ablate([c]))
        np.testing.assert_allclose(eff.exact(layer), exact, atol=1e-5)
        assert eff.rank_correlation(layer) > 0.5

    # A callable target is read on each sample's two rows.
    def prob(out):
        return torch.softmax(out, dim=1)[:, 2].sum()

    eff = effects(model, x, ["mix"], target=prob, method="exact", channels="all", batch=3)
    exact = loop_exact(model, x, "mix", range(8), prob, lambda c: ablate([c]))
    np.testing.assert_allclose(eff.exact("mix"), exact, atol=1e-6)


@pytest.mark.parametrize(
    ("make", "inputs", "layers"),
    [
        (
            "tiny_gpt2",
            {"input_ids": torch.tensor([[1, 5, 7, 3, 9, 2]])},
            ["transformer.h.0.ln_2", "transformer.h.1.attn"],  # attn: a tuple output
        ),
        ("tiny_vit", torch.randn(1, 3, 32, 32), ["blocks.0.norm1", "blocks.1.mlp.fc1"]),
    ],
)
def test_transformers_exact_equals_single_ablations(make, inputs, layers):
    from tests.display import seq_models

    model = getattr(seq_models, make)()
    before = model_state(model)
    eff = effects(model, inputs, layers, method="exact", channels=3, batch=4)
    assert_same_state(before, model_state(model))
    clean = actviz.capture(model, inputs, layers[:1], gradients=False).target_index
    for layer in layers:
        rows = eff.top(layer, 3)
        assert eff[layer].channel_dim == 2  # (N, T, D): the last dimension
        want = loop_exact(model, inputs, layer, [r.channel for r in rows], clean, ablate)
        np.testing.assert_allclose([r.exact for r in rows], want, atol=1e-5)


def test_model_in_train_mode_with_grads_is_left_untouched():
    torch.manual_seed(4)
    model = load_demo_model().train()
    model.features.block1.eval()  # mixed modes come back module by module
    x, _ = demo_sample_tensor()
    model(x).sum().backward()  # existing .grad must survive
    model.fc.weight.requires_grad_(False)
    before = model_state(model)
    effects(model, x, ["features.block1", "features.block4.relu"], method="exact", channels=3)
    assert_same_state(before, model_state(model))


def test_cancel_leaves_no_hooks(resnet, image):
    before = model_state(resnet)
    with pytest.raises(CaptureCancelled):
        effects(resnet, image, ["layer4"], method="exact", should_stop=lambda: True)
    seen = []
    with pytest.raises(CaptureCancelled):
        effects(
            resnet,
            image,
            ["layer4"],
            method="exact",
            channels=8,
            batch=2,
            should_stop=lambda: len(seen) >= 2,
            progress=lambda done, total: seen.append((done, total)),
        )
    assert seen == [(2, 8), (4, 8)]
    assert_same_state(before, model_state(resnet))


# -------------------------------------------------------------------------------- results


def test_results_are_frozen_ranked_and_serialisable(resnet, image):
    eff = effects(resnet, image, ["layer4"], method="exact", channels=6, batch=6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        eff.method = "x"  # type: ignore[misc]
    with pytest.raises(ValueError):
        eff["layer4"].estimate[0] = 1.0
    with pytest.raises(TypeError):
        eff.results["x"] = None  # type: ignore[index]
    top = eff.top("layer4", 10)
    mags = [abs(r.estimate) for r in top]
    assert mags == sorted(mags, reverse=True) and len(top) == 10
    assert eff.top_channels("layer4", 3) == tuple(r.channel for r in top[:3])
    assert [r.exact is not None for r in top] == [True] * 6 + [False] * 4
    by_exact = eff.top("layer4", 6, by="exact")
    assert [abs(r.exact) for r in by_exact] == sorted((abs(r.exact) for r in top[:6]), reverse=True)
    table = eff.table()
    assert len(table) == 512 and table[7].channel == 7 and table[7].layer == "layer4"
    assert sum(r.exact is not None for r in table) == 6
    rows = [r for r in table if r.exact is not None]
    assert eff.rank_correlation("layer4") == pytest.approx(
        spearman([r.estimate for r in rows], [r.exact for r in rows])
    )
    data = json.loads(json.dumps(eff.to_dict(top=5)))
    assert data["method"] == "exact" and len(data["layers"]["layer4"]["estimate"]) == 512
    assert len(data["layers"]["layer4"]["exact"]) == 6 and len(data["layers"]["layer4"]["top"]) == 5
    assert isinstance(eff, Effects)


def test_spearman_matches_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # Ties take average ranks: ranks (0.5, 0.5, 2, 3) against (0, 1, 2, 3).
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486832980505138)
    assert math.isnan(spearman([1.0], [2.0]))
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_bad_arguments_are_refused(resnet, image):
    with pytest.raises(ValueError, match="method"):
        effects(resnet, image, ["layer4"], method="fast")
    with pytest.raises(ValueError, match="unknown layer"):
        effects(resnet, image, ["layer9"])
    with pytest.raises(TypeError, match="baseline"):
        effects(resnet, image, ["layer4"], baseline=3.0)
    with pytest.raises(ValueError, match="channel means"):
        effects(resnet, image, ["layer4"], baseline={"layer4": np.zeros(3)})
    with pytest.raises(ValueError, match="out of range"):
        effects(resnet, image, ["layer4"], method="exact", channels=[512])
