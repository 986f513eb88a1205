"""Opening another model never runs an input it cannot take.

The demo (an image model), a tiny Hugging Face GPT-2 (text), a timm ViT (fixed 224x224 size)
and back: each switch ends with painted maps and no error in the banner; an input that does
not fit is replaced by the model's natural default and comes back with a model that takes it.
"""

from __future__ import annotations

import pytest

from actviz.io.input_files import DEFAULT_PROMPT, input_misfit, natural_input_source

pytest.importorskip("transformers")
pytest.importorskip("timm")

from tests.io.hf_tiny import save_tiny_gpt2  # noqa: E402

LOAD_MS = 120_000


def _open_and_check(win, source: str, **kwargs) -> None:
    """Open ``source`` and wait until the window ran it and painted its result."""
    w = win.window
    with win.expect_run(LOAD_MS):
        assert w.files.open_model_source(source, **kwargs)
    win.wait_idle(LOAD_MS)
    assert not [m for m in win.banner_messages() if "rror" in m or "Could not" in m]
    assert w.session.result is not None and w.session.result.layers, "no layer was shown"
    shown = [name for name in w.session.result.layers if name in w.host.layer_panels]
    assert shown, "no panel"


def test_a_text_model_after_an_image_gets_a_prompt_and_the_image_comes_back(
    actviz_window, tmp_path
):
    gpt2 = save_tiny_gpt2(tmp_path / "gpt2")
    win = actviz_window(auto_run=True)
    w = win.window
    with win.expect_run(LOAD_MS):
        w.files.load_demo()
    win.wait_idle(LOAD_MS)
    image_source = w.session.input.source
    assert image_source.endswith(".png")

    _open_and_check(win, str(gpt2))
    assert w.session.input.source == "text:" + DEFAULT_PROMPT
    assert any("does not fit" in m for m in win.banner_messages())
    # The user's own text then replaces the stand-in: the note about it goes.
    with win.expect_run(LOAD_MS):
        assert w.files.open_input_source("text:the cat sat on the mat", wait=True)
    win.wait_idle(LOAD_MS)
    assert not any("does not fit" in m for m in win.banner_messages())
    assert w.session.input.source == "text:the cat sat on the mat"

    _open_and_check(win, "timm:vit_tiny_patch16_224", weights="none")
    # The text did not fit the ViT: the image comes back (read with the ViT's transforms).
    assert w.session.input.source == image_source
    assert tuple(w.session.input.value.shape) == (1, 3, 224, 224)

    _open_and_check(win, "demo")
    assert w.session.input.source == image_source

    _open_and_check(win, str(gpt2))
    assert w.session.input.source.startswith("text:")
    _open_and_check(win, "demo")
    assert w.session.input.source == image_source


def test_fit_rules_on_real_models():
    import timm
    import torch
    import torchvision

    from actviz.io.models.demo_model import demo_samples

    resnet = torchvision.models.resnet18()
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False)
    image = torch.randn(1, 3, 64, 64)
    assert input_misfit(None, image, model=resnet) is None
    assert input_misfit(None, torch.randn(1, 1, 64, 64), model=resnet) == (
        "it takes 3-channel 4-D inputs, not 1x1x64x64"
    )
    assert input_misfit(None, image, model=vit) == "it takes 224x224 images"
    assert input_misfit(None, torch.randn(1, 3, 224, 224), model=vit) is None
    ids = {"input_ids": torch.tensor([[1, 2, 3]])}
    assert input_misfit(None, ids, "text:a b c", model=resnet) == "it does not read text"
    # A bare module with no convolution may take token ids: nothing tells it cannot.
    embed = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 2))
    assert input_misfit(None, ids["input_ids"], model=embed) is None
    samples = demo_samples()
    assert natural_input_source(None, samples, model=resnet) == str(samples[0])
    assert natural_input_source(None, (), model=vit) == "random:1x3x224x224"
    assert natural_input_source(None, (), model=torch.nn.Linear(3, 4)) is None
