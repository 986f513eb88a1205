"""Feature visualisation on real models: the demo CNN, a random-init ResNet-18, a tiny timm ViT.

Small images and few steps so each test takes seconds; the thresholds are the issue's
(10 standard deviations above noise, above every bundled sample).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.analysis.visualize.feature_vis import VisualizeSettings, layer_channels, visualize
from actviz.analysis.visualize.image_param import ImageParam, RobustTransforms, sample_seed
from actviz.analysis.visualize.visualization import VisualizeError
from actviz.core.records import CaptureCancelled
from actviz.io.models.demo_model import demo_sample_tensor, demo_samples, load_demo_model


def _channel_means(model: nn.Module, layer: str, x: torch.Tensor) -> torch.Tensor:
    taken = {}
    module = dict(model.named_modules())[layer]
    handle = module.register_forward_hook(lambda m, i, o: taken.__setitem__("a", o.detach()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        handle.remove()
    return taken["a"].mean((2, 3))


def _beats_noise_and_samples(model: nn.Module, layer: str, channels: list[int], **kw) -> None:
    vis = visualize(model, layer, channels, **kw)
    size = vis.images.shape[-1]
    images = torch.from_numpy(np.array(vis.images))
    # The final images fed as they are: the same values as .activations.
    acts = _channel_means(model, layer, images)
    mine = acts[torch.arange(len(channels)), torch.tensor(channels)]
    np.testing.assert_allclose(mine.numpy(), vis.activations, rtol=1e-4, atol=1e-5)
    noise = torch.rand(32, 3, size, size, generator=torch.Generator().manual_seed(1))
    n = _channel_means(model, layer, noise)[:, channels]
    samples = torch.cat([demo_sample_tensor(p.stem)[0] for p in demo_samples()])
    samples = nn.functional.interpolate(samples, size=(size, size), mode="bilinear")
    best = _channel_means(model, layer, samples)[:, channels].max(0).values
    for j, c in enumerate(channels):
        assert mine[j] > n[:, j].mean() + 10 * n[:, j].std(), (c, mine[j], n[:, j])
        assert mine[j] > best[j], (c, mine[j], best[j])


def test_demo_channels_beat_noise_by_ten_sigma_and_every_sample(demo):
    _beats_noise_and_samples(demo, "features.block4", [0, 2, 15], steps=40, size=64)


def test_random_resnet18_channels_beat_noise_and_samples(resnet):
    # A random network's channels are not robust to jitter, scale and rotation (with them the
    # images barely move its objective, Lucent's method's no more); the standard transforms
    # are exercised on the trained demo model above.
    _beats_noise_and_samples(resnet, "layer3", [0, 1, 3], steps=40, size=48, transforms="none")


def test_objective_rises_over_the_steps(demo):
    vis = visualize(demo, "features.block3", [5, 12], steps=30, size=48)
    assert vis.objective.shape == (30, 2)
    first, last = vis.objective[:5].mean(0), vis.objective[-5:].mean(0)
    assert np.all(last > first + 0.2), (first, last)
    assert vis.images.shape == (2, 3, 48, 48) and vis.images.dtype == np.float32
    assert vis.images.min() >= 0.0 and vis.images.max() <= 1.0


def test_same_seed_same_image_bit_for_bit_and_another_seed_differs(demo):
    a = visualize(demo, "features.block2", [1, 3], steps=6, size=32, seed=7)
    # The same settings as one value, a keyword overriding a field: the same call.
    b = visualize(demo, "features.block2", [1, 3], VisualizeSettings(steps=6, size=32), seed=7)
    c = visualize(demo, "features.block2", [1, 3], steps=6, size=32, seed=8)
    assert dict(a.settings) == dict(b.settings) and np.array_equal(a.images, b.images)
    assert np.array_equal(a.objective, b.objective)
    assert np.array_equal(a.activations, b.activations)
    assert not np.array_equal(a.images, c.images)


def test_settings_are_one_frozen_value_that_compares_equal_when_coerced_alike(demo):
    s = VisualizeSettings(steps=np.int64(6), size=32, mean=[0.5] * 3, std=[0.25] * 3)
    assert s == VisualizeSettings(steps=6, size=(32, 32), mean=(0.5,) * 3, std=(0.25,) * 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.steps = 7
    with pytest.raises(VisualizeError, match="steps must be at least 1"):
        VisualizeSettings(steps=0)
    with pytest.raises(TypeError, match="stepz"):
        visualize(demo, "features.block2", [1], stepz=6)


def test_batched_channels_equal_one_at_a_time(demo):
    channels = [4, 9, 12]
    both = visualize(demo, "features.block3", channels, steps=6, size=32)
    for j, c in enumerate(channels):
        alone = visualize(demo, "features.block3", [c], steps=6, size=32)
        # Equal up to rounding: a batched convolution may round differently, and over many
        # steps the optimisation can amplify that (the starts and transforms are identical).
        np.testing.assert_allclose(alone.images[0], both.images[j], atol=1e-4)
        np.testing.assert_allclose(alone.objective[:, 0], both.objective[:, j], atol=1e-5)
    chunked = visualize(demo, "features.block3", channels, steps=6, size=32, batch=2)
    np.testing.assert_allclose(chunked.images, both.images, atol=1e-4)
    assert not np.allclose(both.images[0], both.images[1], atol=1e-2)


def _snapshot(model: nn.Module):
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grad": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        "inplace": [getattr(m, "inplace", None) for m in model.modules()],
    }


def _assert_same(model: nn.Module, before) -> None:
    after = _snapshot(model)
    for k, v in before["state"].items():
        assert torch.equal(after["state"][k], v), k
    assert after["training"] == before["training"]
    assert after["requires_grad"] == before["requires_grad"]
    assert after["inplace"] == before["inplace"]
    for g0, g1 in zip(before["grad"], after["grad"], strict=True):
        assert (g0 is None and g1 is None) or torch.equal(g0, g1)
    for m in model.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks


def test_model_left_as_found_after_success_cancel_and_error():
    model = load_demo_model()
    model.train()  # training mode, BN statistics that a train-mode forward would move
    model.features.block1.eval()
    model.fc.weight.requires_grad_(False)
    model.features.block2.conv.weight.grad = torch.full_like(model.features.block2.conv.weight, 3.0)
    before = _snapshot(model)
    assert model.features.block4.relu.inplace  # switched out of place during the run only

    visualize(model, "features.block4", [0, 1], steps=3, size=32)
    _assert_same(model, before)

    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(CaptureCancelled):
        visualize(model, "features.block4", [0, 1], steps=50, size=32, should_stop=stop)
    assert len(calls) == 3
    _assert_same(model, before)

    def broken(act: torch.Tensor) -> torch.Tensor:
        if len(calls) > 4:
            raise RuntimeError("objective failed")
        calls.append(1)
        return act.mean()

    with pytest.raises(RuntimeError, match="objective failed"):
        visualize(model, "features.block3", None, objective=broken, steps=10, size=32)
    _assert_same(model, before)


def test_cache_is_hit_on_reopen_and_missed_when_settings_or_weights_change(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = load_demo_model()
    first = visualize(model, "features.block4", [0, 3], steps=4, size=32, cache=True)
    assert first.from_cache == (False, False)
    again = visualize(model, "features.block4", [3, 0, 5], steps=4, size=32, cache=True)
    assert again.from_cache == (True, True, False)
    assert np.array_equal(again.images[1], first.images[0])
    assert np.array_equal(again.objective[:, 0], first.objective[:, 1])
    assert again.activations[0] == first.activations[1]
    assert list((tmp_path / "cache" / "actviz" / "visualize").rglob("*.npz"))
    other = visualize(model, "features.block4", [0], steps=5, size=32, cache=True)
    assert other.from_cache == (False,)
    with torch.no_grad():
        model.fc.bias.add_(1.0)  # other weights: another key
    changed = visualize(model, "features.block4", [0], steps=4, size=32, cache=True)
    assert changed.from_cache == (False,)


def test_progress_is_reported_every_step_of_every_chunk(demo):
    seen = []
    visualize(
        demo,
        "features.block2",
        [0, 1, 2],
        steps=3,
        size=32,
        batch=2,
        progress=lambda d, t: seen.append((d, t)),
    )
    assert seen == [(i, 6) for i in range(1, 7)]


def test_objectives_neuron_layer_direction_negative_target_and_callable(demo):
    kw = {"steps": 20, "size": 32}
    up = visualize(demo, "features.block4", [2], **kw)
    # A convolution's output can go negative: minimised, it does.
    high = visualize(demo, "features.block3.conv", [2], **kw)
    low = visualize(demo, "features.block3.conv", [2], negative=True, **kw)
    assert low.settings["objective"] == "-channel"
    assert low.objective[-3:].mean() > low.objective[:3].mean()
    assert -low.activations[0] < min(0.0, high.activations[0])
    neuron = visualize(demo, "features.block4", [2], objective="neuron", **kw)
    assert neuron.objective[-5:].mean() > neuron.objective[:3].mean()
    layer = visualize(demo, "features.block4", [0, 1], objective="layer", **kw)
    assert layer.images.shape[0] == 2 and not np.array_equal(layer.images[0], layer.images[1])
    assert np.all(layer.objective[-3:].mean(0) > layer.objective[:3].mean(0))
    direction = torch.zeros(64)
    direction[2] = 1.0
    along = visualize(demo, "features.block4", [2], objective=direction, **kw)
    # Along channel 2 alone: the same objective as the channel, up to the mean over positions.
    np.testing.assert_allclose(along.activations, up.activations, rtol=1e-4)
    logit = visualize(demo, None, target=4, **kw)
    assert logit.channels == (4,) and logit.layer == ""
    assert logit.objective[-3:].mean() > logit.objective[:3].mean() + 1.0
    custom = visualize(demo, "features.block4", [2], objective=lambda a: a[:, 2].mean((1, 2)), **kw)
    np.testing.assert_allclose(custom.activations, up.activations, rtol=1e-4)


def test_token_layer_of_a_vit_uses_the_last_dimension():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2).eval()
    assert layer_channels(vit, "blocks.1") == 192
    vis = visualize(vit, "blocks.1", [0, 100], steps=10, size=32)
    assert vis.settings["input_size"] == [32, 32]  # the padded image does not fit: its own size
    assert np.all(vis.objective[-3:].mean(0) > vis.objective[:3].mean(0))
    with pytest.raises(VisualizeError, match="192 channels"):
        visualize(vit, "blocks.1", [192], steps=1, size=32)


def test_what_is_not_an_image_model_is_a_clear_error(demo):
    with pytest.raises(VisualizeError, match="1-D"):
        visualize(nn.Sequential(nn.Conv1d(3, 4, 3)), "0", [0], steps=1, size=16)
    with pytest.raises(VisualizeError, match="1 input channels"):
        visualize(nn.Sequential(nn.Conv2d(1, 4, 3)), "0", [0], steps=1, size=16)
    mlp = nn.Sequential(nn.Linear(10, 4))
    with pytest.raises(VisualizeError, match="did not run"):
        visualize(mlp, "0", [0], steps=1, size=16)

    class Text:
        model = nn.Embedding(10, 4)
        name = "tiny-lm"
        tokenizer = object()
        processor = None

    with pytest.raises(VisualizeError, match="reads text"):
        visualize(Text(), "", [0])
    with pytest.raises(VisualizeError, match="did you mean"):
        visualize(demo, "features.blok4", [0], steps=1)
    with pytest.raises(VisualizeError, match="64 channels"):
        visualize(demo, "features.block4", [64], steps=1, size=16)
    with pytest.raises(VisualizeError, match="8 classes"):
        visualize(demo, None, target=8, steps=1, size=16)
    with pytest.raises(VisualizeError, match="layer=None"):
        visualize(demo, "fc", target=1, steps=1, size=16)


def test_the_results_are_read_only(demo):
    vis = visualize(demo, "features.block2", [0], steps=1, size=16)
    with pytest.raises(ValueError):
        vis.images[0, 0, 0, 0] = 1.0
    with pytest.raises(TypeError):
        vis.settings["steps"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError):
        vis.layer = "x"  # type: ignore[misc]
    assert actviz.visualize is visualize


def test_a_sample_draws_from_its_own_seed_whatever_shares_its_batch():
    seeds = [sample_seed(0, k) for k in (3, 8)]
    both = ImageParam(seeds, (16, 16)).tensor.detach()
    alone = ImageParam(seeds[1:], (16, 16)).tensor.detach()
    assert torch.equal(both[1], alone[0])
    t_both = RobustTransforms(seeds, 5, (16, 16), None).thetas
    t_alone = RobustTransforms(seeds[1:], 5, (16, 16), None).thetas
    assert torch.equal(t_both[:, 1], t_alone[:, 0])


def test_transforms_without_movement_give_the_image_back():
    img = torch.rand(2, 3, 20, 20)
    none = RobustTransforms([1, 2], 3, (20, 20), None, transforms="none")
    assert torch.equal(none(img, 0), img)
    # "standard" at step 0 keeps the image's pixels inside the grey padding.
    std = RobustTransforms([1], 3, (20, 20), None)
    out = std(img[:1], 0)
    assert out.shape == (1, 3, 44, 44)
    assert torch.allclose(out[..., :2, :], torch.full_like(out[..., :2, :], 0.5))


def test_cli_writes_a_png_per_channel_a_contact_sheet_and_json(tmp_path, capsys):
    from actviz.cli import main

    out = tmp_path / "vis"
    code = main(
        [
            "visualize",
            "--model",
            "demo",
            "--layer",
            "features.block4",
            "--channels",
            "0-2,7",
            "--steps",
            "3",
            "--size",
            "24",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "features.block4_0.png",
        "features.block4_1.png",
        "features.block4_2.png",
        "features.block4_7.png",
        "features.block4_sheet.png",
        "visualize.json",
    ]
    meta = json.loads((out / "visualize.json").read_text())
    assert meta["channels"] == [0, 1, 2, 7] and meta["model"] == "demo"
    assert len(meta["objective"]["7"]) == 3 and len(meta["activations"]) == 4
    assert meta["settings"]["steps"] == 3
    from PIL import Image

    with Image.open(out / "features.block4_0.png") as im:
        assert im.size == (24, 24)
    with Image.open(out / "features.block4_sheet.png") as im:
        assert im.size[0] > 2 * 64 and im.size[1] > 2 * 64  # a 2 x 2 grid of numbered tiles
    assert "final activation" in capsys.readouterr().out


def test_cli_channels_parse_and_refuse_nonsense():
    from actviz.cli.visualize_command import parse_channels

    assert parse_channels("0-3,7,2,9-10") == [0, 1, 2, 3, 7, 9, 10]
    for bad in ("a", "3-1", ",", "-2"):
        with pytest.raises(ValueError):
            parse_channels(bad)


def test_only_cached_returns_what_the_cache_holds_without_running(tmp_path, monkeypatch, demo):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    none = visualize(
        demo, "features.block4", [1, 2], steps=3, size=24, cache=True, only_cached=True
    )
    assert none.channels == () and none.images.shape == (0, 3, 24, 24)
    visualize(demo, "features.block4", [2], steps=3, size=24, cache=True)
    calls = []
    some = visualize(
        demo,
        "features.block4",
        [1, 2],
        steps=3,
        size=24,
        cache=True,
        only_cached=True,
        progress=lambda d, t: calls.append(d),
    )
    assert some.channels == (2,) and some.from_cache == (True,) and calls == []


def test_redirected_relu_starts_channels_silent_on_grey(demo):
    # These channels answer only to the padding's edge at the start: the image's plain
    # gradient is exactly zero, and without redirection it stays grey.
    kw = {"steps": 40, "size": 64}
    plain = visualize(demo, "features.block3", [6, 15], redirect_relu=False, **kw)
    redirected = visualize(demo, "features.block3", [6, 15], **kw)
    assert np.ptp(plain.images) < 0.05
    assert np.all(plain.objective[-1] < 0.01)
    assert np.all(redirected.objective[-1] > 10 * plain.objective[-1])


def test_bench_measures_every_figure_on_a_tiny_model():
    from actviz.bench import visualize_bench

    model = load_demo_model()
    r = visualize_bench.measure(
        model,
        "features.block2",
        size=24,
        steps=2,
        objective_steps=2,
        pairs=1,
        mean_std=((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
        upsample=False,
    )
    for key in ("vis_time_ratio", "vis_batch8_ratio", "vis_objective_ratio"):
        assert np.isfinite(r[key]) and r[key] > 0, (key, r)
    assert r["reference_ms"] > 0 and r["batch8_ms"] > 0
    # The batch figure on a device (the CPU here; CUDA where the bench finds one).
    ratio, one_ms, eight_ms = visualize_bench.batch8_ratio(
        model, "features.block2", 24, 2, 1, "cpu", ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    )
    assert np.isfinite(ratio) and ratio > 0 and one_ms > 0 and eight_ms > 0
    for m in model.modules():
        assert not m._forward_hooks


def test_reference_follows_lucents_method_and_raises_its_objective():
    from actviz.bench.visualize_bench import final_objective, lucent_reference

    model = load_demo_model()
    ms = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    start = lucent_reference(model, "features.block4", 2, 32, 1, mean_std=ms, upsample=False)
    end = lucent_reference(model, "features.block4", 2, 32, 30, mean_std=ms, upsample=False)
    assert end.shape == (1, 3, 32, 32) and 0.0 <= float(end.min()) and float(end.max()) <= 1.0
    before = final_objective(model, "features.block4", [2], start, ms)
    after = final_objective(model, "features.block4", [2], end, ms)
    assert after[0] > before[0] + 0.1


def test_runs_inside_no_grad_and_inference_mode(demo):
    plain = visualize(demo, "features.block4", [1], steps=3, size=24)
    with torch.inference_mode():
        inside = visualize(demo, "features.block4", [1], steps=3, size=24)
    with torch.no_grad():
        also = visualize(demo, "features.block4", [1], steps=3, size=24)
    assert np.array_equal(plain.images, inside.images)
    assert np.array_equal(plain.images, also.images)
    norm = {"mean": (0.4, 0.4, 0.4), "std": (0.3, 0.3, 0.3), "steps": 2, "size": 24}
    with torch.inference_mode():
        normalised = visualize(demo, "features.block4", [1], **norm)
    assert normalised.settings["mean"] == [0.4, 0.4, 0.4]
    assert not np.array_equal(
        normalised.images, visualize(demo, "features.block4", [1], steps=2, size=24).images
    )


def test_hugging_face_vit_token_layer_and_logit():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=5,
    )
    model = transformers.ViTForImageClassification(cfg).eval()
    layer = next(
        n for n, _ in model.named_modules() if n.endswith("layer.1") or n.endswith("layers.1")
    )
    assert layer_channels(model, layer) == 32
    # Random weights: no transforms (see the random ResNet-18 test).
    kw = {"steps": 8, "size": 32, "transforms": "none"}
    vis = visualize(model, layer, [0, 3], **kw)
    assert vis.settings["input_size"] is None  # the image itself fits
    padded = visualize(model, layer, [0], steps=1, size=32)
    assert padded.settings["input_size"] == [32, 32]  # the config's image_size
    assert np.all(vis.objective[-1] > vis.objective[0])
    logits = visualize(model, None, target=[1, 4], **kw)
    assert logits.channels == (1, 4) and np.all(logits.objective[-1] > logits.objective[0])


def test_select_merge_and_reproduce_give_the_same_pictures(demo):
    from actviz.analysis.visualize.picture_files import reproduce
    from actviz.analysis.visualize.visualization import merge_visualizations

    vis = visualize(demo, "features.block3", [0, 1, 2, 5], steps=3, size=24, seed=4)
    picked = vis.select([5, 1])
    assert picked.channels == (5, 1) and picked.objective.shape == (3, 2)
    np.testing.assert_array_equal(picked.images[0], vis.images[3])
    assert picked.activations[1] == vis.activations[1]
    with pytest.raises(ValueError):
        vis.select([7])
    merged = merge_visualizations([vis.select([2, 5]), vis.select([0, 1])])
    np.testing.assert_array_equal(merged.select([0, 1, 2, 5]).images, vis.images)
    with pytest.raises(VisualizeError, match="two of"):
        merge_visualizations([vis, vis.select([0])])
    other = visualize(demo, "features.block3", [3], steps=4, size=24)
    with pytest.raises(VisualizeError, match="other settings"):
        merge_visualizations([vis, other])
    # What reproduce() says makes the same pictures again, bit for bit; the CLI line too.
    how = reproduce(vis, "demo")
    again = visualize(demo, "features.block3", [2, 5], **how["kwargs"])
    np.testing.assert_array_equal(again.images, vis.select([2, 5]).images)
    assert how["cli"].startswith("actviz visualize --model demo --layer features.block3")
    assert "--channels 0-2,5" in how["cli"] and "--seed 4" in how["cli"]
    assert "cli" not in reproduce(vis)  # no source: no command line
    neg = reproduce(visualize(demo, "features.block3", [0], steps=1, size=16, negative=True))
    assert neg["kwargs"]["objective"] == "channel" and neg["kwargs"]["negative"] is True
