"""The per-token norm bars' axis stays readable in a narrow panel: its labels never run into
each other (a BERT block's |grad| norms of ~0.004 read "0.00.02.004" at 1280x720)."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QRectF
from PySide6.QtGui import QImage, QPainter

pytest.importorskip("transformers")

from tests.display.seq_models import tiny_bert  # noqa: E402

TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
IDS = torch.tensor([[2, 5, 17, 33, 9, 5, 21, 3]])


def _axis_label_rects(axis) -> list[tuple[QRectF, str]]:
    """The rectangles and texts the axis draws its tick labels in."""
    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    assert specs is not None
    return [(QRectF(rect), text) for rect, _flags, text in specs[2] if text]


def test_token_norm_bars_have_labels_that_do_not_overlap(actviz_window):
    win = actviz_window(size=(1280, 720))
    w = win.window
    w.script.set_model(tiny_bert(), layers=["bert.encoder.layer.0", "classifier"])
    w.session.set_input(
        {"input_ids": IDS, "attention_mask": torch.ones_like(IDS)}, kind="text", tokens=TOKENS
    )
    win.run_and_wait()
    win.open_dock("Edits")  # narrower panels, as with the Live dock open
    win.open_dock("Live")  # narrower still: a strip ~45 px wide
    win.settle()
    panel = win.reveal("bert.encoder.layer.0")
    for canvas in (panel.token_canvas, panel.token_grad_canvas):
        axis = canvas.bars_plot.getAxis("bottom")
        rects = _axis_label_rects(axis)
        texts = [text for _rect, text in rects]
        assert len(rects) >= 1, texts  # the scale is read: a round value under the bars
        for i, (a, ta) in enumerate(rects):
            for b, tb in rects[i + 1 :]:
                assert not a.adjusted(-2, 0, 2, 0).intersects(b), (ta, tb, texts)
