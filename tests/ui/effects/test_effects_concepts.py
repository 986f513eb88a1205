"""The "Channels that matter" dock on a layer whose panel shows concepts (issue 41, item 3):
its bars are the layer's concepts ranked by the engine's estimates, Verify adds the exact
effects (equal to a hand-written hook removing the concept), a bar's click opens the Concept
dock, "Ablate top k" removes the top concepts, and showing channels again ranks channels."""

from __future__ import annotations

import numpy as np
import torch
from PySide6.QtCore import QPoint, Qt

from actviz.analysis.concepts.ranking import concept_estimate_from_capture
from actviz.analysis.effects.channel_effects import estimate_from_capture
from actviz.ui.effects.view import BarRow
from tests.helpers import frame
from tests.ui.concepts.concepts_windows import LAYER, concepts_opened


def _removed(model, c, concepts):
    """The output with ``concepts`` of conv2 removed by a forward hook written here."""
    idx = list(concepts)

    def hook(_m, _args, out):
        x = out.movedim(1, -1)
        z = c.encode(x)[..., idx]
        return (x - z @ c.W_dec[idx]).movedim(-1, 1)

    handle = model.conv2.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(frame(0))
    finally:
        handle.remove()


def test_a_panel_showing_concepts_is_ranked_by_its_concepts(actviz_window, tmp_path):
    win, model, concepts_feature, _c, _folder = concepts_opened(actviz_window, tmp_path)
    c = win.session.concepts[LAYER].concepts
    feature = win.effects.feature
    win.open_dock("Channels that matter")
    win.effects.wait_estimates()
    cap = win.window.session.result.capture
    eff = feature.effects
    assert eff.layers == ("conv1", LAYER)
    want = concept_estimate_from_capture(model, cap, c, LAYER)
    np.testing.assert_array_equal(eff.estimate(LAYER), want.estimate(LAYER))
    assert eff[LAYER].channels == c.d_sae == 12
    np.testing.assert_array_equal(
        eff.estimate("conv1"), estimate_from_capture(model, cap, ["conv1"]).estimate("conv1")
    )
    section = feature.view.sections[LAYER]
    k = feature.view.top
    rows = [BarRow(r.channel, r.estimate, None) for r in want.top(LAYER, k) if r.has_effect]
    assert len(rows) >= 2 and list(section.bars.rows) == rows
    assert section.bars.unit == "concept" and feature.view.sections["conv1"].bars.unit == "channel"
    assert section.info.text().startswith("12 concepts")
    assert f"{LAYER} · concept {rows[0].channel}\n" in section.bars.hover_text(0)
    assert "click: open the concept" in section.bars.hover_text(0)
    assert "remove the top" in section.ablate_button.toolTip()
    captions = [caption for caption, _ in feature.report_part()["figures"]()]
    assert captions == ["Channels that matter: conv1", f"Concepts that matter: {LAYER}"]
    from actviz.analysis.effects.effect_results import chart_title

    assert chart_title(feature.effects, LAYER) == f"{LAYER}: effect of removing each concept"
    assert chart_title(feature.effects, "conv1").startswith("conv1: effect of setting each channel")

    # Verify: the exact effect of each top concept is the hand-written removal's.
    with win.qtbot.waitSignal(feature.view.verify_requested):
        win.qtbot.mouseClick(feature.view.verify_button, Qt.MouseButton.LeftButton)
    win.qtbot.waitUntil(lambda: not feature.is_busy(), timeout=30_000)
    eff = feature.effects
    assert eff.method == "exact"
    t = cap.target_index
    verified = np.flatnonzero(eff[LAYER].verified)
    assert len(verified) == min(16, c.d_sae)
    for i in verified:
        by_hand = float(_removed(model, c, [int(i)])[0, t]) - float(cap.target_value)
        assert abs(eff[LAYER].exact[i] - by_hand) < 1e-5, i
    assert all(r.exact is not None for r in section.bars.rows)

    # A bar's click opens that concept in the Concept dock.
    first = section.bars.rows[0].channel
    win.qtbot.mouseClick(section.bars, Qt.MouseButton.LeftButton, pos=QPoint(150, 4 + 10))
    win.qtbot.waitUntil(lambda: concepts_feature.view.shown == (LAYER, first), timeout=30_000)

    # Ablate top 2: the two concepts removed, the re-run equals the hand-written hook.
    feature.view.top_spin.setValue(2)
    top = list(eff.top_channels(LAYER, 2))
    with win.expect_run():
        win.qtbot.mouseClick(section.ablate_button, Qt.MouseButton.LeftButton)
    entries = list(win.session.edits)
    assert [(e.layer, e.edit.kind) for e in entries] == [(LAYER, "concept")]
    assert sorted(entries[0].edit.channels) == sorted(top) and entries[0].edit.factor == 0
    assert entries[0].note == "top 2 concepts by effect, ablated"
    torch.testing.assert_close(win.window.session.result.capture.output, _removed(model, c, top))

    # Channels again: the layer is ranked by its 6 channels.
    concepts_feature.set_shown(LAYER, False)
    win.wait_idle()
    win.effects.wait_estimates()
    assert feature.effects[LAYER].channels == 6
    assert feature.view.sections[LAYER].bars.unit == "channel"
    assert feature.view.sections[LAYER].info.text().startswith("6 channels")
