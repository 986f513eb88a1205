"""The HTML report: valid HTML, no network URL, the export's pixels in every panel."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser

import numpy as np
import pytest
import torch
import torchvision
from PIL import Image

import actviz
from actviz.core.edit_kinds import ablate, scale
from actviz.io.export.capture_export import export_capture
from actviz.io.export.report import write_report


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str]] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []
        self.open: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if tag == "img":
            self.images.append(a)
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href", "srcset", "action", "data"):
            if key in a:
                self.links.append(a[key])
        if "id" in a:
            self.ids.add(a["id"])
        if tag not in ("img", "meta", "br", "hr", "link", "input"):
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, f"</{tag}> closes <{self.open[-1:]}>"
        self.open.pop()


def parse(text: str) -> _Collect:
    p = _Collect()
    p.feed(text)
    p.close()
    assert p.open == [], f"unclosed tags {p.open}"
    return p


def pixels(src: str) -> np.ndarray:
    head, data = src.split(",", 1)
    assert head == "data:image/png;base64"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))


@pytest.fixture(scope="module")
def run():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    x = torch.rand(1, 3, 64, 64)
    layers = ["conv1", "layer1.0.relu", "layer4", "avgpool", "fc"]
    edits = {"layer1.0.conv1": (ablate([1, 2]),), "layer4": (scale(None, 0.5),)}
    cap = actviz.capture(model, x, layers, target=3, edits=edits)
    baseline = actviz.capture(model, x, layers, target=3)
    image = (x[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8)
    return model, cap, baseline, image


def test_report_is_self_contained_with_the_exports_pixels(run, tmp_path):
    model, cap, baseline, image = run
    cats = [f"class{i}" for i in range(10)]
    kwargs = dict(
        image=image, categories=cats, model_name="resnet18", input_name="random.png", cmap="auto"
    )
    export_capture(cap, tmp_path / "export", **kwargs)
    comparison = actviz.compare(cap, baseline)
    info = write_report(
        cap,
        tmp_path / "report.html",
        model=model,
        baseline=baseline,
        comparison=comparison,
        comparison_label="Edited run against the unedited one.",
        figures=[("a figure", np.full((20, 30, 3), 200, np.uint8))],
        scan_sheets={"layer4": Image.new("RGB", (40, 30), (9, 99, 199))},
        **kwargs,
    )
    text = info.path.read_text(encoding="utf-8")
    print(f"report: {info.nbytes / 1024:.0f} KiB, {len(info.panels)} pictures")
    assert info.nbytes == len(text.encode())
    page = parse(text)
    # nothing is fetched: embedded pictures, in-page links, no script, a CSP forbidding requests
    assert page.scripts == 0 and "<link" not in text
    for url in page.links:
        # pictures, in-page links, and the files reproduce.py reads (saved, never fetched)
        assert url.startswith(
            ("data:image/png;base64,", "#", "data:application/octet-stream;base64,")
        ), url[:60]
        if url.startswith("#"):
            assert url[1:] in page.ids, url
    assert "http://" not in text and "https://" not in text
    assert "default-src 'none'" in text
    # one image per panel, and each is exactly the export's PNG
    shown = {img["data-panel"]: img["src"] for img in page.images}
    assert len(shown) == len(page.images) == len(info.panels)
    expected = {
        "input": "input.png",
        "saliency": "saliency.png",
        "gradcam": "gradcam.png",
        "figure:0": None,
        "scan:layer4": None,
    }
    for layer in cap.names:
        expected[f"features:{layer}"] = f"{layer}_features.png"
        expected[f"grad:{layer}"] = f"{layer}_grad.png"
    assert set(shown) == set(expected)
    for panel, name in expected.items():
        if name is None:
            continue
        want = np.asarray(Image.open(tmp_path / "export" / name).convert("RGB"))
        got = pixels(shown[panel])
        assert got.shape == want.shape and np.array_equal(got, want), panel
    assert np.array_equal(pixels(shown["figure:0"]), np.full((20, 30, 3), 200, np.uint8))
    assert (pixels(shown["scan:layer4"]) == (9, 99, 199)).all()
    # sections, the table of contents, collapsible layers
    for anchor in (
        "model",
        "input",
        "prediction",
        "attribution",
        "layers",
        "statistics",
        "comparison",
        "scan",
        "figures",
        "edits",
        "reproduce",
    ):
        assert anchor in page.ids and f'href="#{anchor}"' in text
    assert page.tags.count("details") == len(cap.names)
    # edits listed, prediction before/after, reproduce.py text
    assert "ablate ch 1, 2" in text and "scale all x0.5" in text
    assert "p before" in text and "p after" in text
    assert "actviz.capture(" in text and "actviz.edits" in text
    # the statistics table carries the real values
    mean = float(cap["conv1"].output.float().mean())
    assert f"{mean:.4g}" in text
    assert "11,689,512" not in text  # resnet18 with 10 classes has fewer parameters
    total = sum(p.numel() for p in model.parameters())
    assert f"{total:,}" in text


def test_report_without_model_image_or_gradients(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    cap = actviz.capture(model, torch.rand(2, 6), ["0", "1", "2"], gradients=False)
    info = write_report(cap, tmp_path / "r.html")
    page = parse(info.path.read_text())
    panels = [img["data-panel"] for img in page.images]
    assert panels == ["features:0", "features:1", "features:2"]
    assert "attribution" not in page.ids and "No edits" in info.path.read_text()


def test_report_of_a_window_result(run, tmp_path):
    from actviz.display.prepare import prepare
    from actviz.display.prepared import DisplaySpec
    from actviz.io.export.report import write_result_report

    model, cap, baseline, image = run
    spec = DisplaySpec(
        layers=("conv1", "layer4"), normalize="shared", image=image, colormap="magma"
    )
    result = prepare(cap, spec)
    info = write_result_report(result, tmp_path / "w.html", model_name="resnet18")
    panels = [p for p, _ in info.panels]
    assert panels == [
        "input",
        "saliency",
        "gradcam",
        "features:conv1",
        "grad:conv1",
        "features:layer4",
        "grad:layer4",
    ]
    export_capture(
        cap,
        tmp_path / "e",
        image=image,
        cmap="magma",
        normalize="shared",
        layers=["conv1", "layer4"],
    )
    page = parse(info.path.read_text())
    shown = {img["data-panel"]: img["src"] for img in page.images}
    want = np.asarray(Image.open(tmp_path / "e" / "conv1_features.png").convert("RGB"))
    assert np.array_equal(pixels(shown["features:conv1"]), want)


def test_report_of_a_token_model_holds_its_token_views(tmp_path):
    from tests.display.seq_models import tiny_gpt2

    model = tiny_gpt2()
    ids = torch.tensor([[3, 7, 1, 9, 4]])
    tokens = ["a", "b", "c", "d", "e"]
    cap = actviz.capture(model, {"input_ids": ids}, ["transformer.h.0", "transformer.ln_f"])
    export_capture(cap, tmp_path / "e", tokens=tokens, model=model)
    info = write_report(cap, tmp_path / "t.html", tokens=tokens, model=model)
    page = parse(info.path.read_text())
    shown = {img["data-panel"]: img["src"] for img in page.images}
    assert "sequence" in page.ids and "Logit lens" in info.path.read_text()
    for name in ("transformer.ln_f_tokens", "attention_transformer.h.0.attn"):
        want = np.asarray(Image.open(tmp_path / "e" / f"{name}.png").convert("RGB"))
        assert np.array_equal(pixels(shown[f"sequence:{name}"]), want), name
