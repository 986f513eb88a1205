"""What-if edits: each kind exact against a plain forward hook making the same change."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

import actviz
from actviz.edits import Edit, EditError, ablate, clamp, custom, keep, normalize_edits, patch, scale
from tests.conftest import assert_no_hooks
from tests.core.model_state import assert_same, snapshot

TARGET = 3
RECORD = ["layer1.0.bn1", "layer1.0.relu", "layer1.1.conv1", "layer2.0.bn2", "fc"]


@pytest.fixture(scope="module")
def resnet():
    """ResNet-18, random init, eval, with its in-place ReLUs."""
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    assert model.layer1[0].relu.inplace
    return model


@pytest.fixture(scope="module")
def x():
    torch.manual_seed(1)
    return torch.randn(2, 3, 16, 16)


def reference(model, x, changes, record=RECORD, target=TARGET):
    """The edited network through plain hooks: ``changes[name]`` is ``f(output, call)``; the
    recorded layers keep their (edited) output and its gradient; grads via autograd.grad."""
    modules = dict(model.named_modules())
    counts: dict[str, int] = {}
    saved: dict[str, list[dict]] = {n: [] for n in record}
    handles = []

    def edit_hook(name):
        def hook(_m, _i, out):
            k = counts.get(name, 0)
            counts[name] = k + 1
            return changes[name](out, k)

        return hook

    def rec_hook(name):
        def hook(_m, _i, out):
            holder = {"value": out.detach().clone()}
            if out.requires_grad:
                out.register_hook(lambda g, h=holder: h.__setitem__("grad", g))
            saved[name].append(holder)

        return hook

    try:
        for name in changes:
            handles.append(modules[name].register_forward_hook(edit_hook(name)))
        for name in record:
            handles.append(modules[name].register_forward_hook(rec_hook(name)))
        xi = x.clone().requires_grad_(True)
        out = model(xi)
        (gx,) = torch.autograd.grad(out[:, target].sum(), [xi])
    finally:
        for h in handles:
            h.remove()
    return out.detach(), gx, saved


def assert_matches(cap, ref, record=RECORD):
    out, gx, saved = ref
    torch.testing.assert_close(cap.output, out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cap.input_grads, gx, rtol=1e-6, atol=1e-6)
    for name in record:
        calls = cap.calls(name)
        assert len(calls) == len(saved[name]) > 0, name
        for rec, want in zip(calls, saved[name], strict=True):
            torch.testing.assert_close(rec.tensor, want["value"], rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(rec.grad, want["grad"], rtol=1e-6, atol=1e-6)


def _sliced(fn):
    """A reference change on channels ``ch`` of dim 1 written with slicing, on a copy."""

    def change(out, _k):
        out = out.clone()
        fn(out)
        return out

    return change


def _keep_ref(ch):
    def change(out, _k):
        new = torch.zeros_like(out)
        new[:, ch] = out[:, ch]
        return new

    return change


CH = [3, 7, 60]


@pytest.fixture(scope="module")
def source(resnet):
    torch.manual_seed(2)
    return actviz.capture(resnet, torch.randn(2, 3, 16, 16), ["layer1.0.bn1", "layer1.0.relu"])


@pytest.fixture(scope="module")
def plain(resnet, x):
    return actviz.capture(resnet, x, RECORD, target=TARGET)


def _cases(source):
    src = source["layer1.0.bn1"].tensor

    def patch_all(out, _k):
        out = out.clone()
        out[...] = src
        return out

    def patch_ch(out, _k):
        out = out.clone()
        out[:, CH] = src[:, CH]
        return out

    def scale_ch(o):
        o[:, CH] = o[:, CH] * 0.25

    def ablate_ch(o):
        o[:, CH] = 0

    def clamp_ch(o):
        o[:, CH] = o[:, CH].clamp(-0.1, 0.2)

    def halve(out):
        return out * 0.5 + 1.0

    return {
        "ablate": (ablate(CH), _sliced(ablate_ch)),
        "scale": (scale(CH, 0.25), _sliced(scale_ch)),
        "scale_all": (scale(None, -2.0), lambda o, _k: o * -2.0),
        "keep": (keep(CH), _keep_ref(CH)),
        "clamp": (clamp(-0.1, 0.2, channels=CH), _sliced(clamp_ch)),
        "clamp_all": (clamp(min=0.05), lambda o, _k: o.clamp(min=0.05)),
        "patch": (patch(source), patch_all),
        "patch_channels": (patch(source, CH), patch_ch),
        "custom": (halve, lambda o, _k: halve(o)),
    }


@pytest.mark.parametrize(
    "kind",
    [
        "ablate",
        "scale",
        "scale_all",
        "keep",
        "clamp",
        "clamp_all",
        "patch",
        "patch_channels",
        "custom",
    ],
)
def test_each_edit_exact_against_forward_hook(resnet, x, source, plain, kind):
    # layer1.0.bn1's output is overwritten in place by the block's ReLU in the real model.
    edit, change = _cases(source)[kind]
    before = snapshot(resnet)
    cap = actviz.capture(resnet, x, RECORD, target=TARGET, edits={"layer1.0.bn1": edit})
    assert_same(resnet, before)
    ref = reference(resnet, x, {"layer1.0.bn1": change})
    assert_matches(cap, ref)
    # the edit really changed the network, and the edited layer's record shows the change
    assert not torch.allclose(plain.output, cap.output)
    assert not torch.equal(plain["layer1.0.bn1"].tensor, cap["layer1.0.bn1"].tensor)
    assert list(cap.edits) == ["layer1.0.bn1"] and cap.edits["layer1.0.bn1"][0].kind == (
        "custom" if kind == "custom" else kind.split("_")[0]
    )


def test_ablate_gives_zero_channels_and_zero_gradient_upstream(resnet, x):
    cap = actviz.capture(
        resnet, x, ["layer1.0.conv1", "layer1.0.bn1"], edits={"layer1.0.bn1": ablate([5])}
    )
    assert torch.count_nonzero(cap["layer1.0.bn1"].tensor[:, 5]) == 0
    assert torch.count_nonzero(cap["layer1.0.bn1"].tensor[:, 4]) > 0
    # bn1 is per-channel, so conv1's channel 5 no longer reaches the target: exactly zero
    grad = cap["layer1.0.conv1"].grad
    assert grad is not None and torch.count_nonzero(grad[:, 5]) == 0
    assert torch.count_nonzero(grad[:, 4]) > 0


def test_reused_module_every_call_and_one_call(resnet, x):
    # BasicBlock calls its ReLU twice (after bn1, and after the residual sum)
    def ref_ablate(call):
        def change(out, k):
            if call is not None and k != call:
                return out
            out = out.clone()
            out[:, CH] = 0
            return out

        return change

    for call in (None, 1):
        cap = actviz.capture(
            resnet, x, RECORD, target=TARGET, edits={"layer1.0.relu": ablate(CH, call=call)}
        )
        assert_matches(cap, reference(resnet, x, {"layer1.0.relu": ref_ablate(call)}))
        zero = [torch.count_nonzero(r.tensor[:, CH]) == 0 for r in cap.calls("layer1.0.relu")]
        assert zero == ([True, True] if call is None else [False, True])
    assert_no_hooks(resnet)


def test_in_place_module_before_the_recorded_layers(resnet, x):
    # the stem's ReLU runs in place (it precedes every recorded layer): its edit still
    # changes what the max-pool sees
    def change(out, _k):
        return out * 3.0

    # and the stem's bn1 output, edited, is then overwritten in place by that ReLU
    record = ["layer1.0.conv1", "fc"]
    edits = {"bn1": ablate([2, 9]), "relu": scale(None, 3.0), "fc": scale(2, 0.5)}
    cap = actviz.capture(resnet, x, record, target=TARGET, edits=edits)

    def fc_change(out, _k):
        out = out.clone()
        out[:, 2] = out[:, 2] * 0.5
        return out

    def bn_change(out, _k):
        out = out.clone()
        out[:, [2, 9]] = 0
        return out

    changes = {"bn1": bn_change, "relu": change, "fc": fc_change}
    assert_matches(cap, reference(resnet, x, changes, record), record)


def test_recorded_edited_output_written_in_place_later(resnet, x):
    # layer2.0.bn2's output gets ``out += identity`` in place: its record must still hold the
    # edited value the block added (the recorder copies it on a second pass)
    def change(out, _k):
        out = out.clone()
        out[:, CH] = out[:, CH] * -1.5
        return out

    cap = actviz.capture(resnet, x, RECORD, target=TARGET, edits={"layer2.0.bn2": scale(CH, -1.5)})
    assert_matches(cap, reference(resnet, x, {"layer2.0.bn2": change}))


def test_several_edits_on_one_layer_apply_in_order(resnet, x):
    edits = {"layer1.0.bn1": [scale(CH, 2.0), clamp(max=0.5), ablate(0)]}
    cap = actviz.capture(resnet, x, RECORD, target=TARGET, edits=edits)

    def change(out, _k):
        out = out.clone()
        out[:, CH] = out[:, CH] * 2.0
        out = out.clamp(max=0.5)
        out[:, 0] = 0
        return out

    assert_matches(cap, reference(resnet, x, {"layer1.0.bn1": change}))


def test_no_edits_and_disabled_edits_change_nothing(resnet, x, plain):
    off = Edit("ablate", channels=(1,), enabled=False)
    for edits in ({}, {"layer1.0.bn1": [off]}):
        cap = actviz.capture(resnet, x, RECORD, target=TARGET, edits=edits)
        assert cap.edits == {} and plain.edits == {}
        assert torch.equal(cap.output, plain.output)
        for name in RECORD:
            for a, b in zip(cap.calls(name), plain.calls(name), strict=True):
                assert torch.equal(a.tensor, b.tensor) and torch.equal(a.grad, b.grad)


def test_edits_that_never_apply_are_reported(resnet, x):
    cap = actviz.capture(
        resnet, x, ["fc"], gradients=False, edits={"layer1.0.bn1": ablate(1, call=1)}
    )
    assert cap.warnings == [
        "edit 'ablate ch 1 (call 1)' on layer 'layer1.0.bn1' was not applied: the module ran 1 "
        "time(s) during this forward pass"
    ]


def test_forward_only_capture_applies_edits(resnet, x):
    cap = actviz.capture(
        resnet, x, ["layer1.0.bn1"], gradients=False, edits={"layer1.0.bn1": keep(2)}
    )
    t = cap["layer1.0.bn1"].tensor
    assert torch.count_nonzero(t[:, 3:]) == 0 and torch.count_nonzero(t[:, 2]) > 0


class Seq(nn.Module):
    """(N, T, D) through Linear layers, and (N, C, L) through a Conv1d."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 6)
        self.conv = nn.Conv1d(5, 3, 1)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        h = self.proj(x)  # (N, 5, 6)
        c = self.conv(h)  # (N, 3, 6): channels in dim 1
        return self.head(h + c.sum(1, keepdim=True))


def test_channels_of_sequences_are_the_last_dimension():
    torch.manual_seed(0)
    model = Seq()
    x = torch.randn(2, 5, 4)
    cap = actviz.capture(
        model, x, ["proj", "conv"], edits={"proj": ablate([1, 5]), "conv": ablate(2)}
    )
    h = cap["proj"].tensor
    assert h.shape == (2, 5, 6)
    assert torch.count_nonzero(h[..., [1, 5]]) == 0 and torch.count_nonzero(h[..., 0]) > 0
    c = cap["conv"].tensor
    assert torch.count_nonzero(c[:, 2]) == 0 and torch.count_nonzero(c[:, 1]) > 0
    with torch.no_grad():
        ref_h = model.proj(x)
        ref_h[..., [1, 5]] = 0
        ref_c = model.conv(ref_h)
        ref_c[:, 2] = 0
        want = model.head(ref_h + ref_c.sum(1, keepdim=True))
    torch.testing.assert_close(cap.output, want, rtol=1e-6, atol=1e-6)
    # an explicit dim: the sequence positions instead
    cap = actviz.capture(model, x, ["proj"], edits={"proj": Edit("ablate", channels=(0,), dim=1)})
    assert torch.count_nonzero(cap["proj"].tensor[:, 0]) == 0


def test_channels_last_outputs_edit_their_last_dimension():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model(
        "swin_tiny_patch4_window7_224", pretrained=False, img_size=56, embed_dim=16,
        depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1), window_size=7,
    ).eval()  # fmt: skip
    x = torch.randn(1, 3, 56, 56)
    block = "layers.0.blocks.0"
    plain = actviz.capture(model, x, [block], gradients=False)[block].tensor
    assert plain.shape == (1, 14, 14, 16)  # (N, H, W, C)
    cap = actviz.capture(model, x, [block], edits={block: ablate([1, 3])})
    out = cap[block].tensor
    assert torch.count_nonzero(out[..., [1, 3]]) == 0
    keep_mask = torch.ones(16, dtype=torch.bool)
    keep_mask[[1, 3]] = False
    assert torch.equal(out[..., keep_mask], plain[..., keep_mask])
    assert torch.count_nonzero(out[:, [1, 3]]) > 0  # rows 1 and 3 of H untouched
    # dim= overrides the module's axis: rows of H this time
    rows = actviz.capture(
        model, x, [block], gradients=False,
        edits={block: Edit("ablate", channels=(1, 3), dim=1)},
    )[block].tensor  # fmt: skip
    assert torch.count_nonzero(rows[:, [1, 3]]) == 0 and torch.count_nonzero(rows[..., 1]) > 0


@pytest.mark.parametrize(
    ("module", "shape", "dim"),
    [
        (nn.LayerNorm(8), (2, 5, 5, 8), 3),  # over the last dim of (N, H, W, C)
        (nn.LayerNorm(8), (2, 8, 4, 8), 3),  # H == C: LayerNorm's last dim by definition
        (nn.Linear(4, 6), (2, 3, 3, 6), 3),  # Linear on a 4-D input
        (nn.Conv2d(3, 6, 1), (2, 6, 5, 5), 1),
        (nn.Conv1d(3, 6, 1), (2, 6, 5), 1),
        (nn.Sequential(nn.Conv2d(3, 6, 1), nn.ReLU()), (2, 6, 5, 5), 1),
        (nn.Sequential(nn.Linear(3, 6), nn.GELU()), (2, 4, 4, 6), 3),  # its last layer tells
        (nn.Identity(), (2, 5, 7), 2),  # a sequence by its shape
        (nn.Identity(), (2, 5, 7, 7), 1),
        (None, (2, 5), 1),
    ],
)
def test_channel_dim_from_the_module_and_the_output(module, shape, dim):
    out = torch.zeros(shape)
    assert actviz.edits.channel_dim(module, out) == dim
    assert actviz.edits.channel_dim(None, len(shape)) == (2 if len(shape) == 3 else 1)


# ------------------------------------------------------------------------------- errors


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.act = nn.ReLU()
        self.runs = 0

    def forward(self, x):
        self.runs += 1
        return self.act(self.conv(x)).mean((2, 3))


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ({"conv2": ablate(0)}, "unknown layer 'conv2'; did you mean 'conv'"),
        ({"conv": ablate(4)}, "channel 4 is out of range; Conv2d has 4 channels (0..3)"),
        ({"conv": scale([1, 9], 2.0)}, "channel 9 is out of range"),
        ({"conv": "ablate"}, "must be an Edit"),
    ],
)
def test_errors_before_the_forward_runs(edits, message):
    model = Counting()
    with pytest.raises(EditError, match=message.replace("(", r"\(").replace(")", r"\)")):
        actviz.capture(model, torch.randn(1, 1, 6, 6), edits=edits)
    assert model.runs == 0
    assert_no_hooks(model)


def test_patch_source_errors_before_the_forward(resnet, x, source):
    before = snapshot(resnet)
    with pytest.raises(EditError, match="did not record that layer"):
        actviz.capture(resnet, x, ["fc"], edits={"layer2.0.bn2": patch(source)})
    with pytest.raises(EditError, match="recorded only 1 call"):
        actviz.capture(resnet, x, ["fc"], edits={"layer1.0.bn1": patch(source, call=1)})
    assert_same(resnet, before)


def test_errors_when_the_module_runs_leave_the_model_as_found(resnet, x, source):
    before = snapshot(resnet)
    small = actviz.capture(resnet, torch.randn(2, 3, 8, 8), ["layer1.0.bn1"])
    with pytest.raises(
        EditError, match=r"shape mismatch: the source run's output is \(2, 64, 2, 2\)"
    ):
        actviz.capture(resnet, x, RECORD, edits={"layer1.0.bn1": patch(small)})
    assert_same(resnet, before)
    # a ReLU does not tell its channel count: checked on its first call, before any change
    with pytest.raises(EditError, match=r"channel 64 is out of range; the output \(2, 64, 4, 4\)"):
        actviz.capture(resnet, x, RECORD, edits={"layer1.0.relu": ablate(64)})
    assert_same(resnet, before)

    def broken(_out):
        raise RuntimeError("my edit failed")

    with pytest.raises(RuntimeError, match="my edit failed"):
        actviz.capture(resnet, x, RECORD, edits={"layer1.0.bn1": [ablate(1), broken]})
    assert_same(resnet, before)
    # and the next capture is the untouched network's
    torch.testing.assert_close(actviz.capture(resnet, x, ["fc"]).output, resnet(x).detach())


def test_bad_edits_are_refused_when_made():
    with pytest.raises(EditError, match="channel -1 is negative"):
        ablate(-1)
    with pytest.raises(EditError, match="integers"):
        ablate(["a"])
    with pytest.raises(EditError, match="no channels"):
        ablate([])
    with pytest.raises(EditError, match="finite factor"):
        scale(1, float("nan"))
    with pytest.raises(EditError, match="min, max or both"):
        clamp()
    with pytest.raises(EditError, match="min 2 is above max 1"):
        clamp(2, 1)
    with pytest.raises(EditError, match="source Capture"):
        patch(None)  # type: ignore[arg-type]
    with pytest.raises(EditError, match="call must be >= 0"):
        ablate(1, call=-1)
    with pytest.raises(EditError, match="unknown edit kind"):
        Edit("zero")
    with pytest.raises(EditError, match="must be a dict"):
        normalize_edits([ablate(1)])


def test_describe_equality_and_normalize():
    assert ablate([3, 7]).describe() == "ablate ch 3, 7"
    assert scale(5, 0.5).describe() == "scale ch 5 x0.5"
    assert keep(range(10)).describe() == "keep ch 0, 1, 2, 3, 4, 5, ... (+4)"
    assert clamp(max=1).describe() == "clamp all to [-inf, 1]"
    assert ablate(None, call=1).describe() == "ablate all (call 1)"
    assert Edit("ablate", channels=(1,), enabled=False).describe() == "ablate ch 1 (off)"

    def boost(o):
        return o * 2

    assert custom(boost).describe() == "custom boost"
    assert ablate([3, 7, 3]) == ablate((3, 7)) and ablate(3) != ablate(4)
    assert len({ablate(1), ablate(1), scale(1, 2.0)}) == 2
    norm = normalize_edits({"a": ablate(1), "b": [boost, scale(0, 2)], "c": []})
    assert list(norm) == ["a", "b"]
    assert norm["b"][0].kind == "custom" and norm["b"][0].fn is boost
    assert actviz.edits.ablate is ablate


class Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(6, 2, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        out, weights = self.attn(x, x, x)
        return self.head(out).sum(1) + weights.sum((1, 2))[:, None]


def test_tuple_output_edits_its_first_tensor():
    torch.manual_seed(0)
    model = Attn().eval()
    x = torch.randn(2, 4, 6)
    cap = actviz.capture(model, x, ["attn", "head"], target=1, edits={"attn": ablate([1, 4])})

    def change(out, _k):
        first = out[0].clone()
        first[..., [1, 4]] = 0
        return (first, out[1])

    ref_out, ref_gx, saved = reference(model, x, {"attn": change}, record=["head"], target=1)
    torch.testing.assert_close(cap.output, ref_out, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cap.input_grads, ref_gx, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(cap["head"].tensor, saved["head"][0]["value"], rtol=1e-6, atol=1e-6)
    rec = cap["attn"]
    assert torch.count_nonzero(rec.output[0][..., [1, 4]]) == 0
    assert rec.output[1].shape == (2, 4, 4)  # the attention weights as they were
