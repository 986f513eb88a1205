"""Export of a text input: its saliency per token (|gradient x input embedding|) as a strip,
arrays, JSON and CSV, and a target named by its text and by how it was chosen."""

from __future__ import annotations

import csv
import json
import logging

import numpy as np
import pytest
import torch
from PIL import Image

import actviz
from actviz.display.attribution import TokenSaliency
from actviz.io.export.capture_export import export_capture, with_input_embedding
from actviz.io.export.typeset import heat_png

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.io.hf_tiny import gpt2_over, tiny_tokenizer  # noqa: E402

TEXT = "the cat sat on the"
LAYERS = ["transformer.wte", "transformer.h.1"]


@pytest.fixture(scope="module")
def gpt2():
    """A 2-block GPT-2 over the word-level tokenizer of tests/io/hf_tiny.py, and the ids of
    TEXT."""
    logging.getLogger("transformers").setLevel(logging.ERROR)
    tok = tiny_tokenizer(bert=False)
    model = gpt2_over(tok, n_positions=16)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    return model, tok, ids


def _expected(cap):
    emb, grad = cap["transformer.wte"].tensor, cap["transformer.wte"].grad
    return (emb.double() * grad.double()).sum(dim=-1).abs()[0].float().numpy()


def test_a_text_inputs_saliency_is_written_per_token(gpt2, tmp_path):
    model, tok, ids = gpt2
    cap = actviz.capture(model, {"input_ids": ids}, LAYERS)
    tokens = tok.convert_ids_to_tokens(ids[0].tolist())
    files = export_capture(cap, tmp_path, tokens=tokens, model=model, tokenizer=tok)
    names = {p.name for p in files}
    assert {"saliency.png", "saliency.npy", "token_saliency.json", "token_saliency.csv"} <= names
    want = _expected(cap)
    assert want.shape == (5,) and (want > 0).all()
    np.testing.assert_allclose(np.load(tmp_path / "saliency.npy"), want, rtol=1e-6)

    record = json.loads((tmp_path / "token_saliency.json").read_text())
    assert record["layer"] == "transformer.wte" and record["sample"] == 0
    assert [r["token"] for r in record["tokens"]] == ["the", "cat", "sat", "on", "the"]
    assert [r["index"] for r in record["tokens"]] == [0, 1, 2, 3, 4]
    np.testing.assert_allclose([r["saliency"] for r in record["tokens"]], want, rtol=1e-6)
    shares = [r["share"] for r in record["tokens"]]
    np.testing.assert_allclose(shares, want / want.max(), rtol=1e-6)
    assert max(shares) == 1.0

    with (tmp_path / "token_saliency.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["token"] for r in rows] == ["the", "cat", "sat", "on", "the"]
    np.testing.assert_allclose([float(r["saliency"]) for r in rows], want, rtol=1e-6)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["attribution"]["saliency"] == "saliency.png"
    assert summary["attribution"]["saliency_of"] == (
        "saliency per token: |gradient × input embedding| at transformer.wte"
    )
    assert summary["attribution"]["token_saliency"] == [
        "token_saliency.json",
        "token_saliency.csv",
    ]
    # The strip: one row per token, 14 px or more each, title above it.
    with Image.open(tmp_path / "saliency.png") as img:
        assert img.height >= 44 + 5 * 14 and img.width >= 360


def test_the_target_is_named_by_its_text_and_how_it_was_chosen(gpt2, tmp_path):
    model, tok, ids = gpt2
    with torch.no_grad():
        last = model(input_ids=ids).logits[0, -1]
    top = int(last.argmax())
    top_text = tok.decode([top])
    cap = actviz.capture(model, {"input_ids": ids}, LAYERS)
    export_capture(cap, tmp_path / "auto", model=model, tokenizer=tok)
    target = json.loads((tmp_path / "auto" / "summary.json").read_text())["target"]
    assert target == {
        "description": f"next-token logit at the last position (token {top})",
        "text": f"next-token logit at the last position (token {top} {top_text!r})",
        "kind": "token",
        "index": top,
        "label": top_text,
        "value": pytest.approx(float(last[top])),
        "chosen": "top prediction",
    }
    mat = tok.get_vocab()["mat"]
    assert mat != top
    picked = actviz.capture(model, {"input_ids": ids}, LAYERS, target=mat)
    export_capture(picked, tmp_path / "mat", model=model, tokenizer=tok)
    target = json.loads((tmp_path / "mat" / "summary.json").read_text())["target"]
    assert target["chosen"] == "picked" and target["index"] == mat
    assert target["label"] == "mat" and target["value"] == pytest.approx(float(last[mat]))
    assert target["text"] == f"logit of token {mat} 'mat' at the last position"
    # The top token named by the user is still a picked target.
    same = actviz.capture(model, {"input_ids": ids}, LAYERS, target=top)
    export_capture(same, tmp_path / "top", model=model, tokenizer=tok)
    target = json.loads((tmp_path / "top" / "summary.json").read_text())["target"]
    assert target["chosen"] == "picked" and target["index"] == top


def test_a_custom_target_and_a_classifiers_class_say_how_they_were_chosen(tmp_path):
    from tests.ui.tiny_models import TinyCNN

    torch.manual_seed(0)
    model = TinyCNN().eval()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    names = [f"c{i}" for i in range(10)]
    with torch.no_grad():
        out = model(x)[0]
    top = int(out.argmax())
    runs = {
        "auto": (None, "top prediction", top),
        "picked": (3, "picked", 3),
        "custom": (lambda o: o[0, 1] - o[0, 2], "custom", None),
    }
    for key, (target, chosen, index) in runs.items():
        cap = actviz.capture(model, x, ["fc"], target=target)
        export_capture(cap, tmp_path / key, categories=names)
        record = json.loads((tmp_path / key / "summary.json").read_text())["target"]
        assert record["chosen"] == chosen, key
        assert record["index"] == index and record["kind"] == "class"
        assert record["label"] == (None if index is None else f"c{index}")
    record = json.loads((tmp_path / "auto" / "summary.json").read_text())["target"]
    assert record["text"] == f"top-1 logit (class {top}): c{top}"
    assert record["value"] == pytest.approx(float(out[top]))
    no_grads = actviz.capture(model, x, ["fc"], gradients=False)
    export_capture(no_grads, tmp_path / "none")
    record = json.loads((tmp_path / "none" / "summary.json").read_text())["target"]
    assert record["chosen"] == "top prediction" and record["index"] == top


def test_the_windows_token_saliency_is_written_as_given(gpt2, tmp_path):
    """The window passes its result's saliency (it never hands the model to export)."""
    model, tok, ids = gpt2
    cap = actviz.capture(model, {"input_ids": ids}, LAYERS)
    values = np.array([0.5, 2.0, 0.0, 1.0, 0.25], dtype=np.float32)
    given = TokenSaliency(("a", "b", "c", "d", "e"), values, "transformer.wte")
    files = export_capture(cap, tmp_path, token_saliency=given)
    assert {"saliency.png", "token_saliency.csv"} <= {p.name for p in files}
    np.testing.assert_array_equal(np.load(tmp_path / "saliency.npy"), values)
    record = json.loads((tmp_path / "token_saliency.json").read_text())
    assert [r["share"] for r in record["tokens"]] == [0.25, 1.0, 0.0, 0.5, 0.125]
    # Without the model or a saliency given, there is none (not a wrong one).
    export_capture(cap, tmp_path / "bare")
    assert not (tmp_path / "bare" / "token_saliency.json").exists()
    assert (
        "saliency"
        not in json.loads((tmp_path / "bare" / "summary.json").read_text())["attribution"]
    )


def test_a_long_heat_map_title_is_never_cut():
    title = "bert.encoder.layer.11.attention.self.a_long_module_name · mean of 12 heads"
    img = heat_png(np.random.default_rng(0).random((3, 3)), ["a", "b", "c"], title=title)
    rgb = np.asarray(img.convert("RGB"))
    band = (rgb[:40] != 255).any(axis=2)  # the title and the range line
    cols = np.flatnonzero(band.any(axis=0))
    assert img.width > 360 and cols[-1] < img.width - 8


def test_the_input_embedding_is_captured_beside_the_layers_of_a_text_input(gpt2):
    model, _tok, ids = gpt2
    assert with_input_embedding(model, {"input_ids": ids}, ["transformer.h.1"]) == [
        "transformer.wte",
        "transformer.h.1",
    ]
    both = ["transformer.h.1", "transformer.wte"]
    assert with_input_embedding(model, {"input_ids": ids}, both) == both
    assert with_input_embedding(model, {"input_ids": ids}, None) is None
    assert with_input_embedding(model, torch.rand(1, 5, 16), ["transformer.h.1"]) == [
        "transformer.h.1"
    ]


def test_cli_export_of_text_writes_the_token_saliency_beside_the_layers_asked(
    tmp_path, capsys, monkeypatch
):
    from actviz.cli import main
    from tests.io.hf_tiny import save_tiny_gpt2

    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: None)
    folder = save_tiny_gpt2(tmp_path / "tiny-gpt2")
    out = tmp_path / "out"
    code = main(
        [
            "export", "--model", str(folder), "--input", "text:the cat sat",
            "--layers", "transformer.h.1", "--out", str(out),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = tmp_path / "r.html"
    code = main(
        [
            "report", "-m", str(folder), "-i", "text:the cat sat", "-l", "transformer.h.1",
            "-o", str(report),
        ]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    text = report.read_text()
    assert "saliency per token: |gradient × input embedding| at transformer.wte" in text
    assert 'data-panel="features:transformer.wte"' not in text  # captured, not shown
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["layers"]) == ["transformer.h.1"]  # the embedding: saliency only
    assert not (out / "transformer.wte_features.png").exists()
    record = json.loads((out / "token_saliency.json").read_text())
    assert [r["token"] for r in record["tokens"]] == ["the", "cat", "sat"]
    assert record["layer"] == "transformer.wte"
    assert record["target"] == summary["target"]["text"]
    assert summary["target"]["chosen"] == "top prediction"
    # The values are the capture's own: run again the same way.
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tok("the cat sat", return_tensors="pt")
    cap = actviz.capture(model, dict(ids), ["transformer.wte"])
    np.testing.assert_allclose([r["saliency"] for r in record["tokens"]], _expected(cap), rtol=1e-5)


def test_no_exported_picture_cuts_its_title(gpt2, tmp_path):
    """Every layer of a text model (long names: ``transformer.h.1.attn.c_attn``), its token
    maps, attention grids and saliency strip: each title ends before the picture's edge."""
    model, tok, ids = gpt2
    cap = actviz.capture(model, {"input_ids": ids}, None)
    tokens = tok.convert_ids_to_tokens(ids[0].tolist())
    files = export_capture(cap, tmp_path, tokens=tokens, model=model, tokenizer=tok)
    pictures = [p for p in files if p.suffix == ".png" and not p.name.endswith("_1x.png")]
    assert len(pictures) > 40
    for path in pictures:
        with Image.open(path) as img:
            rgb = np.asarray(img.convert("RGB"))
        ink = np.flatnonzero((rgb[:22] < 200).any(axis=2).any(axis=0))  # the title's band
        assert ink.size and ink[-1] < rgb.shape[1] - 6, path.name


def test_the_report_shows_the_exports_saliency_strip(gpt2, tmp_path):
    import base64
    import io
    import re

    from actviz.io.export.report import write_report

    model, tok, ids = gpt2
    cap = actviz.capture(model, {"input_ids": ids}, LAYERS)
    given = TokenSaliency(tuple("abcde"), np.arange(5, dtype=np.float32), "transformer.wte")
    export_capture(cap, tmp_path / "e", token_saliency=given)
    info = write_report(cap, tmp_path / "r.html", token_saliency=given)
    text = info.path.read_text()
    assert "saliency per token: |gradient × input embedding| at transformer.wte" in text
    [src] = re.findall(r'<img src="([^"]+)"[^>]*data-panel="saliency"', text)
    shown = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB")
    with Image.open(tmp_path / "e" / "saliency.png") as want:
        np.testing.assert_array_equal(np.asarray(shown), np.asarray(want.convert("RGB")))
