"""Session files: round trips bit for bit, edits and pins, and every way a file can be refused."""

from __future__ import annotations

import io
import json
import pickle
import zipfile

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.core.edit_kinds import ablate, clamp, custom, keep, patch, scale
from actviz.io.errors import ActvizError
from actviz.workspace.session_file import (
    FORMAT_VERSION,
    InputSource,
    ModelSource,
    PinState,
    SessionFileError,
    SessionState,
    edits_from_json,
    edits_to_json,
    file_sha256,
    load_state,
    model_source_of,
    pin_capture_bytes,
    save_state,
    saved_size,
    unsaved_warnings,
    verify_model_source,
)
from tests.helpers import rewrite_zip


class Branchy(nn.Module):
    """Conv maps, a reused module (two calls), a tuple output, a bfloat16 buffer path."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        h = self.act(self.conv(x))
        h = self.act(h - 0.1)  # act runs twice
        return self.fc(torch.flatten(self.pool(h), 1))


@pytest.fixture(scope="module")
def run():
    torch.manual_seed(0)
    model = Branchy().eval()
    x = torch.rand(1, 3, 8, 8)
    layers = ["conv", "act", "fc"]
    cap = actviz.capture(model, x, layers, target=2)
    other = actviz.capture(model, torch.rand(1, 3, 8, 8), layers)
    return model, x, cap, other


def _full_state(run, **changes):
    model, x, cap, other = run
    pin = PinState("run B", 123.5, other)
    image = (np.arange(8 * 8 * 3) % 256).astype(np.uint8).reshape(8, 8, 3)
    base = SessionState(
        model=ModelSource("resnet18", kind="torchvision", name="resnet18 (random init)"),
        input=InputSource(
            value=x, source="/data/cat.png", kind="image", image=image, description="cat"
        ),
        ticked=("conv", "act", "fc"),
        target=2,
        colormap="magma",
        normalize="shared",
        gradcam_layer="conv",
        channel_pages={"conv": 2},
        page_channels={"conv": 2},
        channel_view={"layer": "conv", "channel": 3},
        edits={
            "conv": (ablate([1, 3]), scale(0, 0.5, call=0)),
            "act": (keep([0, 2]), clamp(-1.0, 2.5, channels=[1])),
            "fc": (patch(other, [0, 4]),),
        },
        pins=(pin,),
        comparison={"a": "current", "b": "run B", "tol": 1e-4},
        scan_key="abc123",
        layout=bytes(range(256)) * 3,
        capture=cap,
        settings={"live": {"fps": 12}},
    )
    return base if not changes else SessionState(**{**vars(base), **changes})


def _same_structure(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)  # bit for bit (NaN-free here)
        return
    assert type(a) is type(b)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            _same_structure(u, v)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same_structure(a[k], b[k])
    else:
        assert a == b


def _same_capture_in_full(a, b):
    assert a.names == b.names
    for name in a.names:
        assert len(a.records[name]) == len(b.records[name])
        for ra, rb in zip(a.records[name], b.records[name], strict=True):
            assert (ra.name, ra.call_index, ra.module_type) == (
                rb.name,
                rb.call_index,
                rb.module_type,
            )
            _same_structure(ra.output, rb.output)
            _same_structure(ra.grad_output, rb.grad_output)
            _same_structure(ra.grad_inputs, rb.grad_inputs)
            _same_structure(ra.inputs, rb.inputs)
    _same_structure(a.output, b.output)
    _same_structure(a.input_grads, b.input_grads)
    assert (a.target_value, a.target_index, a.target_description) == (
        b.target_value,
        b.target_index,
        b.target_description,
    )
    assert (a.nbytes, a.elapsed_s, a.gradients, a.mode) == (
        b.nbytes,
        b.elapsed_s,
        b.gradients,
        b.mode,
    )


def test_round_trip_bit_for_bit(run, tmp_path):
    state = _full_state(run)
    path = tmp_path / "s.actviz"
    assert save_state(state, path) == []
    back = load_state(path)
    _same_capture_in_full(state.capture, back.capture)
    _same_capture_in_full(state.pins[0].capture, back.pins[0].capture)
    _same_structure(state.input.value, back.input.value)
    assert (
        np.array_equal(back.input.image, state.input.image) and back.input.image.dtype == np.uint8
    )
    for name in ("model", "ticked", "target", "colormap", "normalize", "gradcam_layer", "sample"):
        assert getattr(back, name) == getattr(state, name), name
    assert back.channel_pages == {"conv": 2} and back.page_channels == {"conv": 2}
    assert back.channel_view == {"layer": "conv", "channel": 3}
    assert back.comparison == state.comparison and back.scan_key == "abc123"
    assert back.layout == state.layout and back.settings == {"live": {"fps": 12}}
    assert back.pins[0].label == "run B" and back.pins[0].pinned_at == 123.5
    assert (back.input.source, back.input.kind, back.input.description) == (
        "/data/cat.png",
        "image",
        "cat",
    )
    assert back.format_version == FORMAT_VERSION and back.torch_version == torch.__version__
    assert back.actviz_version == actviz.__version__ and back.warnings == ()
    # the edits: same kinds and values; the patch's source is the pin's loaded capture
    assert [e.describe() for e in back.edits["conv"]] == [
        "ablate ch 1, 3",
        "scale ch 0 x0.5 (call 0)",
    ]
    assert [e.describe() for e in back.edits["act"]] == ["keep ch 0, 2", "clamp ch 1 to [-1, 2.5]"]
    (p,) = back.edits["fc"]
    assert p.kind == "patch" and p.channels == (0, 4) and p.source is back.pins[0].capture


def test_restored_capture_rebuilds_the_same_result(run, tmp_path):
    """Edits read back apply as before: the same edited capture, bit for bit."""
    model, x, cap, other = run
    state = _full_state(run)
    save_state(state, tmp_path / "s.actviz")
    back = load_state(tmp_path / "s.actviz")
    layers = ["conv", "act", "fc"]
    before = actviz.capture(model, x, layers, edits=dict(state.edits), target=2)
    after = actviz.capture(model, back.input.value, layers, edits=dict(back.edits), target=2)
    assert torch.equal(before["fc"].output, after["fc"].output)
    assert torch.equal(before.input_grads, after.input_grads)
    # and the saved capture prepares to the same arrays the window would show
    from actviz.display.prepare import prepare
    from actviz.display.prepared import DisplaySpec

    spec = DisplaySpec(layers=tuple(layers), normalize="shared")
    a, b = prepare(cap, spec), prepare(back.capture, spec)
    for name in layers:
        assert np.array_equal(a.layers[name].view.data, b.layers[name].view.data)
        assert np.array_equal(a.layers[name].grad_view.data, b.layers[name].grad_view.data)
    assert np.array_equal(a.layers["conv"].mosaic.indices, b.layers["conv"].mosaic.indices)
    assert np.array_equal(a.saliency, b.saliency)
    assert a.predictions == b.predictions


def test_structures_and_dtypes(tmp_path):
    value = {
        "ids": torch.arange(6, dtype=torch.int64).reshape(1, 6),
        "mask": torch.ones(1, 6, dtype=torch.bool),
        "half": (
            torch.rand(2, 3).to(torch.bfloat16),
            [torch.rand(2).half(), None, 3, "x", float("inf")],
        ),
    }
    state = SessionState(
        input=InputSource(
            value=value, source="text:hello there", kind="text", tokens=("hello", " there")
        )
    )
    save_state(state, tmp_path / "t.actviz")
    back = load_state(tmp_path / "t.actviz")
    _same_structure(value["ids"], back.input.value["ids"])
    _same_structure(value["mask"], back.input.value["mask"])
    _same_structure(value["half"][0], back.input.value["half"][0])
    lst = back.input.value["half"][1]
    assert (
        isinstance(lst, list)
        and torch.equal(lst[0], value["half"][1][0])
        and lst[0].dtype == torch.float16
    )
    assert lst[1:] == [None, 3, "x", float("inf")]
    assert back.input.text == "hello there" and back.input.tokens == ("hello", " there")


def test_custom_and_orphan_patch_edits_are_warned_and_left_out(run, tmp_path):
    model, x, cap, other = run
    stray = actviz.capture(model, x, ["fc"])
    state = _full_state(
        run,
        edits={"conv": (ablate(1), custom(lambda t: t * 2)), "fc": (patch(stray),)},
    )
    warnings = unsaved_warnings(state)
    assert len(warnings) == 2
    assert "Python code" in warnings[0] and "'conv'" in warnings[0]
    assert "not a pinned result" in warnings[1]
    assert save_state(state, tmp_path / "s.actviz") == warnings
    back = load_state(tmp_path / "s.actviz")
    assert list(back.edits) == ["conv"] and [e.kind for e in back.edits["conv"]] == ["ablate"]
    # without the pins' captures the patch from run B cannot be kept either
    state = _full_state(run)
    assert len(unsaved_warnings(state, pin_captures=False)) == 1
    save_state(state, tmp_path / "light.actviz", pin_captures=False)
    back = load_state(tmp_path / "light.actviz")
    assert back.pins[0].capture is None and "fc" not in back.edits


def test_edits_json_round_trip_disabled_and_dim():
    from actviz.core.edit_kinds import Edit

    edits = {
        "a": (Edit("scale", channels=[2], factor=-1.5, dim=2, enabled=False),),
        "b": (clamp(max=0.0),),
    }
    rows, warnings = edits_to_json(edits)
    assert warnings == [] and json.loads(json.dumps(rows)) == rows
    back, warnings = edits_from_json(rows)
    assert warnings == [] and back == edits  # Edit equality compares every field
    with pytest.raises(SessionFileError, match="cannot be read"):
        edits_from_json([{"layer": "a", "kind": "scale"}])  # no factor
    with pytest.raises(SessionFileError, match="cannot be in a session"):
        edits_from_json([{"layer": "a", "kind": "custom"}])


def test_size_before_saving(run, tmp_path):
    state = _full_state(run)
    size = saved_size(state)
    extra = pin_capture_bytes(state)
    assert extra > run[3].nbytes * 0.9  # the pinned capture's arrays
    save_state(state, tmp_path / "s.actviz")
    on_disk = (tmp_path / "s.actviz").stat().st_size
    # the zip compresses (and adds its headers): the estimate is an upper bound, and close
    assert 0.2 * size < on_disk < size
    # measured, not written: the .npz members' own sizes match the count
    import actviz.workspace.session_file as sf

    _, measured, _ = sf._members(state, True, measure=True)
    with zipfile.ZipFile(tmp_path / "s.actviz") as zf:
        for name, store in measured.items():
            real = zf.getinfo(name).file_size  # uncompressed
            assert abs(real - store.nbytes) < 0.05 * real + 500, name
    print(f"session file: {on_disk} bytes on disk, {size} estimated, pin captures {extra}")


def test_atomic_save_keeps_the_old_file(run, tmp_path, monkeypatch):
    path = tmp_path / "s.actviz"
    save_state(_full_state(run), path)
    before = path.read_bytes()
    import actviz.workspace.session_file as sf

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(sf.os, "replace", boom)
    with pytest.raises(SessionFileError, match="disk full"):
        save_state(_full_state(run, target=3), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.actviz"]  # no temporary left
    monkeypatch.undo()
    with pytest.raises(SessionFileError, match="not plain JSON data"):
        save_state(_full_state(run, settings={"x": object()}), path)
    with pytest.raises(SessionFileError, match="not plain JSON data"):
        save_state(_full_state(run, comparison={"tol": float("nan")}), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["s.actviz"]


@pytest.fixture()
def saved(run, tmp_path):
    path = tmp_path / "good.actviz"
    save_state(_full_state(run), path)
    return path


def _manifest(members):
    return json.loads(members["manifest.json"])


def test_future_and_unknown_versions_are_refused(saved, tmp_path):
    def future(m):
        d = _manifest(m)
        d["format"] = FORMAT_VERSION + 1
        m["manifest.json"] = json.dumps(d)

    rewrite_zip(saved, tmp_path / "f.actviz", future)
    with pytest.raises(SessionFileError, match="newer actviz") as err:
        load_state(tmp_path / "f.actviz")
    assert "\n" not in str(err.value) and isinstance(err.value, ActvizError)

    def unknown(m):
        d = _manifest(m)
        d["format"] = "one"
        m["manifest.json"] = json.dumps(d)

    rewrite_zip(saved, tmp_path / "u.actviz", unknown)
    with pytest.raises(SessionFileError, match="unknown session format 'one'"):
        load_state(tmp_path / "u.actviz")


def test_pickles_are_refused(saved, tmp_path):
    evil = pickle.dumps({"x": 1})

    def extra_member(m):
        m["payload.pkl"] = evil

    rewrite_zip(saved, tmp_path / "p1.actviz", extra_member)
    with pytest.raises(SessionFileError, match="payload.pkl is a pickle member"):
        load_state(tmp_path / "p1.actviz")

    def pickle_as_npz(m):
        m["capture.npz"] = evil

    rewrite_zip(saved, tmp_path / "p2.actviz", pickle_as_npz)
    with pytest.raises(SessionFileError, match="capture.npz holds a pickle"):
        load_state(tmp_path / "p2.actviz")

    def object_array(m):
        buf = io.BytesIO()
        np.savez(buf, a0=np.array([{"x": 1}], dtype=object))
        m["input.npz"] = buf.getvalue()

    rewrite_zip(saved, tmp_path / "p3.actviz", object_array)
    with pytest.raises(SessionFileError, match="input.npz holds a pickle"):
        load_state(tmp_path / "p3.actviz")

    def unknown_member(m):
        m["notes.txt"] = b"hello"

    rewrite_zip(saved, tmp_path / "p4.actviz", unknown_member)
    with pytest.raises(SessionFileError, match="notes.txt is unknown member"):
        load_state(tmp_path / "p4.actviz")


def test_damaged_and_incomplete_files_are_refused(saved, tmp_path):
    data = saved.read_bytes()
    (tmp_path / "cut.actviz").write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionFileError, match="damaged session file"):
        load_state(tmp_path / "cut.actviz")
    # a flipped byte inside a member: the zip's checksum catches it
    with zipfile.ZipFile(saved) as zf:
        info = zf.getinfo("manifest.json")
        start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 5
    flipped = bytearray(data)
    flipped[start] ^= 0xFF
    (tmp_path / "flip.actviz").write_bytes(bytes(flipped))
    with pytest.raises(SessionFileError, match="damaged"):
        load_state(tmp_path / "flip.actviz")

    def missing(m):
        del m["pin0.npz"]

    rewrite_zip(saved, tmp_path / "m.actviz", missing)
    with pytest.raises(SessionFileError, match="pin0.npz is missing"):
        load_state(tmp_path / "m.actviz")

    def missing_key(m):
        d = _manifest(m)
        del d["ticked"]
        m["manifest.json"] = json.dumps(d)

    rewrite_zip(saved, tmp_path / "k.actviz", missing_key)
    with pytest.raises(SessionFileError, match="'ticked' is missing"):
        load_state(tmp_path / "k.actviz")

    def missing_array(m):
        buf = io.BytesIO()
        np.savez(buf, zz=np.zeros(2))
        m["input.npz"] = buf.getvalue()

    rewrite_zip(saved, tmp_path / "a.actviz", missing_array)
    with pytest.raises(SessionFileError, match="damaged session file"):
        load_state(tmp_path / "a.actviz")
    (tmp_path / "plain.actviz").write_text("hello")
    with pytest.raises(SessionFileError, match="not an actviz session file"):
        load_state(tmp_path / "plain.actviz")
    with pytest.raises(SessionFileError, match="no such session file"):
        load_state(tmp_path / "nowhere.actviz")
    with zipfile.ZipFile(tmp_path / "other.actviz", "w") as zf:
        zf.writestr("manifest.json", json.dumps({"kind": "something else"}))
    with pytest.raises(SessionFileError, match="not an actviz session file"):
        load_state(tmp_path / "other.actviz")


def test_checkpoint_check(tmp_path):
    ckpt = tmp_path / "weights.pt"
    torch.save(nn.Linear(3, 2).state_dict(), ckpt)

    class Loaded:  # what open_model returns, the fields model_source_of reads
        source, kind, name = str(ckpt), "state_dict", "weights.pt"

    src = model_source_of(Loaded(), arch="file.py:Net")
    assert src.sha256 == file_sha256(ckpt) and src.size == ckpt.stat().st_size
    import hashlib

    assert src.sha256 == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    state = SessionState(model=src)
    save_state(state, tmp_path / "s.actviz")
    state = load_state(tmp_path / "s.actviz")
    assert state.model == src and verify_model_source(state).ok
    torch.save(nn.Linear(3, 2).state_dict(), ckpt)  # other weights, same place
    check = verify_model_source(state)
    assert check.status == "changed" and str(ckpt) in check.message and "\n" not in check.message
    ckpt.rename(tmp_path / "moved.pt")
    check = verify_model_source(state)
    assert check.status == "missing" and check.message.endswith("not there any more")
    # located elsewhere: checked there
    assert verify_model_source(state, tmp_path / "moved.pt").status == "changed"
    # a name (torchvision) has nothing to check
    assert verify_model_source(SessionState(model=ModelSource("resnet18", kind="torchvision"))).ok


def test_public_module_saves_states_and_windows(run, tmp_path):
    import actviz.session

    state = _full_state(run)

    class Window:  # anything whose session can describe itself
        class session:  # noqa: N801
            @staticmethod
            def session_state():
                return state

    assert actviz.session.save(Window(), tmp_path / "w.actviz") == []
    assert actviz.session.load(tmp_path / "w.actviz").ticked == state.ticked
    actviz.session.save(state, tmp_path / "s.actviz", pin_captures=False)
    assert actviz.session.load(tmp_path / "s.actviz").pins[0].capture is None
    with pytest.raises(TypeError, match="cannot save a session from int"):
        actviz.session.save(3, tmp_path / "x.actviz")
    assert not (tmp_path / "x.actviz").exists()


def test_random_init_model_reopens_with_its_weights(tmp_path):
    from actviz.io.models.loading import open_model
    from actviz.workspace.session_file import open_model_source, weights_to_keep
    from tests.io.conftest import TINY_SOURCE

    (tmp_path / "tiny.py").write_text(TINY_SOURCE)
    spec = f"{tmp_path / 'tiny.py'}:TinyNet"
    loaded = open_model(spec, trust=True)
    kept = weights_to_keep(loaded)
    assert kept is not None and set(kept) == set(loaded.model.state_dict())
    x = torch.rand(1, 3, 8, 8)
    want = loaded.model(x)
    state = SessionState(
        model=model_source_of(loaded, trust=True),
        model_weights=kept,
        categories=("a", "b", "c", "d"),
    )
    save_state(state, tmp_path / "s.actviz")
    back = load_state(tmp_path / "s.actviz")
    assert back.categories == ("a", "b", "c", "d")
    assert back.model.sha256 is None and back.model.kind == "code"
    again = open_model_source(back)
    assert torch.equal(again.model(x), want)  # a fresh random init would differ
    for name, t in back.model_weights.items():
        assert torch.equal(t, kept[name]) and t.dtype == kept[name].dtype


def test_captures_keep_the_edits_they_ran_with(run, tmp_path):
    model, x, cap, other = run
    edits = {"conv": (ablate([0]), custom(lambda t: t)), "fc": (patch(other, [1]),)}
    edited = actviz.capture(model, x, ["conv", "act", "fc"], edits=edits, target=2)
    state = _full_state(run, capture=edited, edits={"conv": (ablate([0]),)})
    warnings = unsaved_warnings(state)
    assert len(warnings) == 1 and warnings[0].startswith("the current run: edit 'custom")
    assert save_state(state, tmp_path / "s.actviz") == warnings
    back = load_state(tmp_path / "s.actviz")
    assert [e.describe() for e in back.capture.edits["conv"]] == ["ablate ch 0"]
    (p,) = back.capture.edits["fc"]
    assert p.source is back.pins[0].capture and p.channels == (1,)
    _same_capture_in_full(edited, back.capture)


def test_a_saved_trust_flag_does_not_open_a_pickle(tmp_path):
    from actviz.io.errors import UntrustedFileError
    from actviz.io.models.loading import open_model
    from actviz.workspace.session_file import open_model_source

    torch.save(nn.Sequential(nn.Linear(3, 2)), tmp_path / "full.pt")  # a whole pickled module
    loaded = open_model(tmp_path / "full.pt", trust=True)
    src = model_source_of(loaded, trust=True)
    assert src.kind == "pickle" and src.trust and src.sha256 is not None
    save_state(SessionState(model=src), tmp_path / "s.actviz")
    back = load_state(tmp_path / "s.actviz")
    with pytest.raises(UntrustedFileError):
        open_model_source(back)  # the user is asked again; the file cannot say yes for them
    x = torch.rand(1, 3)
    assert torch.equal(open_model_source(back, trust=True).model(x), loaded.model(x))
