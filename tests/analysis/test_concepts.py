"""actviz.concepts: training recovers known directions, is deterministic, keeps to its memory
budget; the SAELens folder format round-trips and reads folders written by others; concept
maps, the concept edit and the concept scan on real (tiny) models."""

from __future__ import annotations

import json
import weakref

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import actviz
from actviz.analysis.concepts.hooks import HookPoint, resolve_hook
from actviz.analysis.concepts.tensorfile import read_tensors, write_tensors
from actviz.analysis.concepts.vectors import Reservoir


def sparse_data(n: int, d: int, m: int, active: int, seed: int = 0):
    """``n`` vectors, each a positive combination of ``active`` of ``m`` unit directions."""
    g = torch.Generator().manual_seed(seed)
    dirs = F.normalize(torch.randn(m, d, generator=g), dim=1)
    idx = torch.rand(n, m, generator=g).argsort(dim=1)[:, :active]
    codes = torch.zeros(n, m).scatter_(1, idx, 0.5 + 2 * torch.rand(n, active, generator=g))
    return codes @ dirs, dirs


def test_training_recovers_each_known_direction():
    x, dirs = sparse_data(16000, 16, 16, 2)
    c = actviz.concepts.train(x, n_concepts=32, k=2, epochs=6, batch_size=256, lr=2e-3)
    cos = F.normalize(c.W_dec, dim=1) @ dirs.T  # (concepts, true directions)
    assert cos.max(0).values.min() >= 0.95, cos.max(0).values
    # Decoder rows are unit norm; the held-out split is scored and small.
    torch.testing.assert_close(c.W_dec.norm(dim=1), torch.ones(32), atol=1e-5, rtol=0)
    assert c.info["held_out"] == 16000 // 20 and c.info["fvu_on"] == "held-out"
    assert 0 <= c.heldout_fvu < 0.1
    assert c.l0 == pytest.approx(2.0, abs=0.01)
    assert 0.0 <= c.dead_fraction < 1.0
    assert c.fvu(x[:2000]) < 0.1


def test_same_seed_same_dictionary_bitwise_other_seed_differs():
    x, _ = sparse_data(3000, 8, 12, 2, seed=1)
    kw = dict(n_concepts=16, k=2, epochs=2, batch_size=128)
    a = actviz.concepts.train(x, seed=3, **kw)
    b = actviz.concepts.train(x, seed=3, **kw)
    other = actviz.concepts.train(x, seed=4, **kw)
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert not torch.equal(a.W_dec, other.W_dec)


@pytest.mark.parametrize("architecture", ["batchtopk", "relu"])
def test_other_architectures_train_and_encode(architecture):
    x, _ = sparse_data(4000, 8, 8, 2, seed=2)
    c = actviz.concepts.train(
        x, n_concepts=16, k=2, epochs=3, batch_size=128, architecture=architecture, l1=0.05
    )
    assert c.architecture == ("jumprelu" if architecture == "batchtopk" else "standard")
    assert c.heldout_fvu < 0.5
    z = c.encode(x[:100])
    assert z.shape == (100, 16) and bool((z >= 0).all())
    if architecture == "batchtopk":
        assert float(c.threshold[0]) > 0 and c.l0 < 8


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_streamed_source_keeps_to_the_memory_budget():
    d, rows, batches = 256, 1000, 300  # 300 MB of vectors streamed
    budget = 1 << 20
    alive: list[int] = [0]
    peak = [0]

    def stream():
        for i in range(batches):
            t = torch.randn(rows, d, generator=torch.Generator().manual_seed(i))
            alive[0] += 1
            peak[0] = max(peak[0], alive[0])
            weakref.finalize(t, lambda: alive.__setitem__(0, alive[0] - 1))
            yield t

    before = _rss()
    c = actviz.concepts.train(stream(), n_concepts=64, k=4, epochs=1, memory_budget=budget)
    grown = _rss() - before
    info = c.info
    assert info["vectors_seen"] == rows * batches
    assert info["kept"] + info["held_out"] <= budget // (4 * d)
    assert info["kept"] > 0 and info["held_out"] > 0
    assert info["buffer_bytes"] <= budget
    assert peak[0] <= 2  # one batch at a time (and the next being made)
    assert grown < 100 << 20, f"RSS grew {grown / 2**20:.0f} MiB for a 1 MiB budget"


class TinyConv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.conv(x)))


def test_training_from_data_streams_positions_through_the_model():
    net = TinyConv()
    images = torch.rand(60, 3, 12, 12, generator=torch.Generator().manual_seed(0))
    budget = 40 * 12 * 12 * 8 * 4  # room for 40 images' vectors of 60
    c = actviz.concepts.train(
        images, "act", model=net, n_concepts=16, k=2, epochs=2, batch_size=256,
        memory_budget=budget, data_batch_size=8,
    )  # fmt: skip
    assert c.hook_name == "act" and c.d_in == 8
    assert c.info["images"] == 60 and c.info["vectors_seen"] == 60 * 144
    # Images 19, 39 and 59 (every 20th) are held out, in their share of the budget.
    assert c.info["held_out"] == min(3 * 144, budget // 20 // 32) == 288
    assert c.info["kept"] == (budget - budget // 20) // 32 < 57 * 144
    assert net.training and net.conv.training  # the model's flags as they were
    assert not net.act._forward_hooks


def test_reservoir_is_uniform_and_replays_with_its_seed():
    counts = torch.zeros(2000)
    for seed in range(30):
        r = Reservoir(100 * 4, torch.Generator().manual_seed(seed))
        for lo in range(0, 2000, 70):
            r.offer(torch.arange(lo, min(lo + 70, 2000), dtype=torch.float32)[:, None])
        assert len(r) == 100 and r.seen == 2000
        counts[r.vectors()[:, 0].long()] += 1
    # Each of 2000 vectors kept with probability 1/20: early and late ones alike.
    assert abs(counts[:1000].sum() - counts[1000:].sum()) < 0.25 * counts.sum()
    a = Reservoir(400, torch.Generator().manual_seed(1))
    b = Reservoir(400, torch.Generator().manual_seed(1))
    for r in (a, b):
        for lo in range(0, 500, 33):
            r.offer(torch.arange(lo, min(lo + 33, 500), dtype=torch.float32)[:, None])
    assert torch.equal(a.vectors(), b.vectors())


def test_save_load_round_trip_is_exact(tmp_path):
    x, _ = sparse_data(2000, 8, 8, 2, seed=5)
    c = actviz.concepts.train(x, "layer3", n_concepts=16, k=3, epochs=1, batch_size=128)
    folder = c.save(tmp_path / "dict")
    cfg = json.loads((folder / "cfg.json").read_text())
    assert cfg["d_in"] == 8 and cfg["d_sae"] == 16 and cfg["architecture"] == "topk"
    assert cfg["k"] == 3 and cfg["hook_name"] == "layer3" and cfg["apply_b_dec_to_input"]
    back = actviz.concepts.load(folder)
    for name in ("W_enc", "W_dec", "b_enc", "b_dec"):
        assert torch.equal(getattr(back, name), getattr(c, name)), name
    assert (back.architecture, back.k, back.hook_name) == ("topk", 3, "layer3")
    assert (back.heldout_fvu, back.l0, back.dead_fraction) == (c.heldout_fvu, c.l0, c.dead_fraction)
    assert back.info == json.loads(json.dumps(c.info))
    assert torch.equal(back.encode(x[:50]), c.encode(x[:50]))


def test_our_weights_file_reads_with_the_safetensors_package(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    tensors = {"a": torch.randn(3, 5), "h": torch.randn(4).half(), "i": torch.arange(6)}
    write_tensors(tmp_path / "w.safetensors", tensors, {"format": "pt"})
    theirs = st.load_file(str(tmp_path / "w.safetensors"))
    for name, t in tensors.items():
        assert torch.equal(theirs[name], t)
    st.save_file({"b": torch.randn(2, 2).to(torch.bfloat16)}, str(tmp_path / "x.safetensors"))
    ours, _ = read_tensors(tmp_path / "x.safetensors")
    assert torch.equal(ours["b"], st.load_file(str(tmp_path / "x.safetensors"))["b"])


def _reference_encode(cfg: dict, w: dict, x: torch.Tensor) -> torch.Tensor:
    """SAELens's encode, written out: standard, topk and jumprelu."""
    sae_in = x - w["b_dec"] * cfg.get("apply_b_dec_to_input", True)
    pre = sae_in @ w["W_enc"] + w["b_enc"]
    arch = cfg.get("architecture", "standard")
    if arch == "topk" or cfg.get("activation_fn_str") == "topk":
        k = cfg.get("k") or cfg["activation_fn_kwargs"]["k"]
        top = torch.topk(pre, k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
    if arch == "jumprelu":
        th = w["threshold"] if "threshold" in w else torch.exp(w["log_threshold"])
        return torch.relu(pre) * (pre > th).to(pre.dtype)
    return torch.relu(pre)


@pytest.mark.parametrize(
    "cfg,extra",
    [
        ({"architecture": "standard", "apply_b_dec_to_input": True}, {}),
        ({"architecture": "standard", "apply_b_dec_to_input": False}, {}),
        # SAELens 5 wrote topk as an activation function with its k in the kwargs.
        ({"activation_fn_str": "topk", "activation_fn_kwargs": {"k": 5}}, {}),
        (
            {"architecture": "topk", "k": 7, "metadata": {"hook_name": "blocks.1.hook_resid_post"}},
            {},
        ),
        ({"architecture": "jumprelu"}, {"threshold": 0.3}),
        ({"architecture": "jumprelu"}, {"log_threshold": -1.0}),
    ],
)
def test_saelens_folders_load_and_encode_like_the_reference(tmp_path, cfg, extra):
    st = pytest.importorskip("safetensors.torch")
    d_in, d_sae = 12, 40
    g = torch.Generator().manual_seed(0)
    w = {
        "W_enc": torch.randn(d_in, d_sae, generator=g) * 0.3,
        "W_dec": torch.randn(d_sae, d_in, generator=g) * 0.3,
        "b_enc": torch.randn(d_sae, generator=g) * 0.1,
        "b_dec": torch.randn(d_in, generator=g) * 0.1,
    }
    for name, value in extra.items():
        w[name] = torch.full((d_sae,), value) + 0.05 * torch.rand(d_sae, generator=g)
    full = {"d_in": d_in, "d_sae": d_sae, "hook_name": "blocks.3.hook_resid_pre",
            "dtype": "float32", "normalize_activations": "none", **cfg}  # fmt: skip
    if "metadata" in cfg:
        del full["hook_name"]
    folder = tmp_path / "sae"
    folder.mkdir()
    (folder / "cfg.json").write_text(json.dumps(full))
    st.save_file(w, str(folder / "sae_weights.safetensors"))
    c = actviz.concepts.load(folder)
    x = torch.randn(64, d_in, generator=g)
    want = _reference_encode(full, w, x)
    torch.testing.assert_close(c.encode(x), want, atol=1e-6, rtol=1e-6)
    assert int((want > 0).sum()) > 0
    torch.testing.assert_close(c.decode(want), want @ w["W_dec"] + w["b_dec"])
    assert c.hook_name == (cfg.get("metadata") or {}).get("hook_name", "blocks.3.hook_resid_pre")


def test_unsupported_folders_are_refused_in_one_line(tmp_path):
    c = actviz.concepts.Concepts(torch.zeros(4, 6), torch.zeros(6, 4), torch.zeros(6),
                                 torch.zeros(4), architecture="standard")  # fmt: skip
    c.save(tmp_path / "a")
    cfg = json.loads((tmp_path / "a" / "cfg.json").read_text())
    cfg["architecture"] = "gated"
    (tmp_path / "a" / "cfg.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="gated"):
        actviz.concepts.load(tmp_path / "a")
    with pytest.raises(FileNotFoundError, match="cfg.json"):
        actviz.concepts.load(tmp_path)


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(x)


class GPT2Like(nn.Module):
    def __init__(self, d: int = 6) -> None:
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.h = nn.ModuleList(Block(d) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.transformer.h:
            x = b(x)
        return x


def test_hook_names_map_to_a_blocks_input_or_output():
    gpt = GPT2Like()
    assert resolve_hook(gpt, "blocks.1.hook_resid_pre") == HookPoint("transformer.h.1", "input")
    assert resolve_hook(gpt, "blocks.2.hook_resid_post") == HookPoint("transformer.h.2", "output")
    assert resolve_hook(gpt, "transformer.h.0.fc") == HookPoint("transformer.h.0.fc", "output")
    llama = nn.Module()
    llama.model = nn.Module()
    llama.model.layers = nn.ModuleList(nn.Identity() for _ in range(2))
    assert resolve_hook(llama, "blocks.1.hook_resid_pre") == HookPoint("model.layers.1", "input")
    with pytest.raises(ValueError, match="no block"):
        resolve_hook(gpt, "blocks.7.hook_resid_pre")
    with pytest.raises(ValueError, match="did you mean"):
        resolve_hook(gpt, "transformer.h.0.fcc")


def _dictionary(d: int, n: int, seed: int = 0, k: int = 3) -> actviz.concepts.Concepts:
    g = torch.Generator().manual_seed(seed)
    w_dec = F.normalize(torch.randn(n, d, generator=g), dim=1)
    return actviz.concepts.Concepts(
        w_dec.T.clone(), w_dec, torch.zeros(n), 0.1 * torch.randn(d, generator=g),
        architecture="topk", k=k, hook_name="act",
    )  # fmt: skip


def test_concept_maps_of_a_conv_layer_and_of_tokens():
    net = TinyConv()
    x = torch.rand(2, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    c = _dictionary(8, 20)
    cap = actviz.capture(net, x, ["act"], gradients=False)
    maps = c.maps(cap, "act", index=1)
    assert maps.shape == (20, 10, 10)
    out = cap["act"].tensor[1]  # (8, 10, 10)
    want = c.encode(out.permute(1, 2, 0)).permute(2, 0, 1)
    torch.testing.assert_close(maps, want)
    assert int((maps > 0).sum(0).max()) <= 3  # k = 3 per position
    gpt = GPT2Like()
    tokens = torch.randn(1, 5, 6)
    cap = actviz.capture(gpt, tokens, ["transformer.h.0", "transformer.h.1"], gradients=False)
    c6 = _dictionary(6, 9)
    object.__setattr__(c6, "hook_name", "blocks.1.hook_resid_pre")
    by_hook = c6.maps(cap, model=gpt)  # block 1's input: block 0's output
    assert by_hook.shape == (9, 5)
    torch.testing.assert_close(by_hook, c6.maps(cap, "transformer.h.0"))


@pytest.mark.parametrize("architecture", ["topk", "standard", "jumprelu"])
def test_concept_maps_equal_encode_with_and_without_onednn(architecture, monkeypatch):
    import importlib

    dictionary = importlib.import_module("actviz.analysis.concepts.dictionary")
    g = torch.Generator().manual_seed(3)
    w_dec = F.normalize(torch.randn(40, 8, generator=g), dim=1)
    c = actviz.concepts.Concepts(
        w_dec.T.clone(), w_dec, 0.1 * torch.randn(40, generator=g), 0.2 * torch.randn(8, generator=g),
        architecture=architecture, k=5 if architecture == "topk" else None,
        threshold=torch.full((40,), 0.3) if architecture == "jumprelu" else None,
    )  # fmt: skip
    cap = actviz.capture(TinyConv(), torch.rand(2, 3, 9, 9, generator=g), ["act"], gradients=False)
    want = c.encode(cap["act"].tensor[1].permute(1, 2, 0)).permute(2, 0, 1)
    fast = c.maps(cap, "act", index=1)
    monkeypatch.setitem(dictionary._ONEDNN, "ok", False)  # torch's addmm instead of oneDNN's
    slow = c.maps(cap, "act", index=1)
    assert fast.shape == slow.shape == (40, 9, 9)
    torch.testing.assert_close(fast, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(slow, want, atol=1e-5, rtol=0)
    assert 0 < int((fast > 0).sum()) < fast.numel()  # some fire, some do not
    # The peaks that order a panel's tiles: each concept's largest value over its map.
    maps, peaks = c.maps_and_peaks(cap, "act", index=1)
    assert torch.equal(maps, slow)
    torch.testing.assert_close(peaks, want.reshape(40, -1).amax(1), atol=1e-5, rtol=0)
    assert torch.equal(peaks, maps.reshape(40, -1).amax(1))


@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_concept_edit_equals_a_hand_written_hook(scale):
    from actviz.io.models.demo_model import demo_sample_tensor, load_demo_model

    net = load_demo_model()
    x, _ = demo_sample_tensor()
    layer = "features.block2"
    c = _dictionary(32, 64, seed=2, k=4)
    chosen = [3, 17, 40]
    cap = actviz.capture(
        net, x, [layer], edits={layer: actviz.edits.concept(c, chosen, scale=scale)},
        gradients=False,
    )  # fmt: skip

    def hook(_m, _a, out):
        v = out.movedim(1, -1)
        z = c.encode(v)
        part = z[..., chosen] @ c.W_dec[chosen]
        return (v - (1 - scale) * part).movedim(-1, 1)

    module = dict(net.named_modules())[layer]
    handle = module.register_forward_hook(hook)
    try:
        with torch.no_grad():
            want = net(x)
    finally:
        handle.remove()
    with torch.no_grad():
        plain = net(x)
    torch.testing.assert_close(cap.output, want, atol=1e-5, rtol=0)
    assert float((plain - want).abs().max()) > 1e-3  # the concepts were active
    assert not module._forward_hooks
    described = actviz.edits.concept(c, chosen, scale=scale).describe()
    assert described.startswith("remove concept 3" if scale == 0 else "scale concept 3")
    # With gradients the edit is part of the graph: a capture still runs and records grads.
    cap = actviz.capture(net, x, [layer], edits={layer: actviz.edits.concept(c, [3])})
    assert cap[layer].grad is not None


def test_concept_edit_errors():
    c = _dictionary(8, 10)
    with pytest.raises(actviz.edits.EditError, match="out of range"):
        actviz.edits.concept(c, [10])
    with pytest.raises(actviz.edits.EditError, match="dictionary"):
        actviz.edits.concept(object(), [1])
    net = TinyConv()
    wrong = _dictionary(5, 10)
    with pytest.raises(actviz.edits.EditError, match="reads vectors of 5"):
        actviz.capture(net, torch.rand(1, 3, 6, 6), ["act"],
                       edits={"act": actviz.edits.concept(wrong, [1])})  # fmt: skip


def test_concept_scan_top_images_rates_and_cache(tmp_path):
    net = TinyConv()
    images = torch.rand(24, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    c = _dictionary(8, 12, seed=4, k=2)
    s = actviz.concepts.scan_concepts(net, images, c, "act", k=4, batch_size=5)
    assert s.count == 24 and s.values.shape == (12, 4) and s.spatial == (8, 8)
    assert not s.from_cache and s.cache_path is not None
    with torch.no_grad():
        z = c.encode(net.act(net.conv(images)).permute(0, 2, 3, 1))  # (24, 8, 8, 12)
    best = z.amax(dim=(1, 2))  # (24, 12) per image and concept
    for concept in range(12):
        top = s.top(concept)
        want = best[:, concept].sort(descending=True).values[: len(top)]
        np.testing.assert_allclose([e.value for e in top], want.numpy(), rtol=1e-5)
        if top:
            y, x = top[0].location
            assert float(z[top[0].index, y, x, concept]) == pytest.approx(top[0].value)
    np.testing.assert_allclose(s.image_rate, (best > 0).float().mean(0).numpy())
    np.testing.assert_allclose(s.position_rate, (z > 0).float().mean(dim=(0, 1, 2)).numpy())
    again = actviz.concepts.scan_concepts(net, images, c, "act", k=4)
    assert again.from_cache and np.array_equal(again.values, s.values)
    shown = actviz.concepts.top_heatmaps(net, c, s, int(s.order()[0]), data=images)
    entry, picture, heat = shown[0]
    assert picture.shape == (8, 8, 3) and heat.shape == (8, 8)
    assert 0.0 <= heat.min() and heat.max() <= 1.0 and heat.max() > 0.5


def test_training_can_be_cancelled_while_collecting_and_while_training():
    net = TinyConv()
    images = torch.rand(40, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    calls = [0]

    def stop_at(n):
        def should_stop():
            calls[0] += 1
            return calls[0] > n

        return should_stop

    with pytest.raises(actviz.concepts.TrainCancelled, match="collecting"):
        actviz.concepts.train(images, "act", model=net, n_concepts=8, k=2, data_batch_size=4,
                              should_stop=stop_at(3))  # fmt: skip
    assert not net.act._forward_hooks
    calls[0] = 0
    x, _ = sparse_data(2000, 8, 8, 2)
    with pytest.raises(actviz.concepts.TrainCancelled, match="step 5"):
        actviz.concepts.train(x, n_concepts=8, k=2, batch_size=64, should_stop=stop_at(5))
