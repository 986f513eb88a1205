"""The atlas's thumbnails are read and decoded off the GUI thread (#37: no file I/O on it): a
selection shows its strip at once, and each picture arrives, of the right image, when decoded."""

from __future__ import annotations

import threading

import numpy as np
from PIL import Image

from actviz.ui.atlas import feature as thumbs
from tests.ui.atlas.atlas_windows import scanned_demo


def test_a_selection_strip_gets_its_pictures_decoded_off_the_gui_thread(
    qtbot, actviz_window, tmp_path, monkeypatch
):
    win, atlas_ui = scanned_demo(actviz_window, tmp_path)
    decoded_on: list[str] = []
    decode = thumbs.decode_thumb

    def watched(path, side):
        decoded_on.append(threading.current_thread().name)
        return decode(path, side)

    monkeypatch.setattr(thumbs, "decode_thumb", watched)
    strip = atlas_ui.view.selection_strip
    rows = [0, 7]  # one bright reddish image, one dark bluish one
    atlas_ui.select_rows(rows)
    # The strip is there at once, its pictures still to come.
    assert strip.count() == 2 and all(strip.item(i).icon().isNull() for i in range(2))
    qtbot.waitUntil(
        lambda: not any(strip.item(i).icon().isNull() for i in range(2)), timeout=10_000
    )
    assert len(decoded_on) == 2 and threading.main_thread().name not in decoded_on
    for i, row in enumerate(rows):
        icon = strip.item(i).icon().pixmap(72, 72).toImage()
        centre = icon.pixelColor(icon.width() // 2, icon.height() // 2)
        with Image.open(atlas_ui.source(row)) as im:
            want = np.asarray(im.convert("RGB"))[12, 12].astype(int)
        got = np.array([centre.red(), centre.green(), centre.blue()])
        assert np.abs(got - want).max() <= 24, (row, got, want)
    # Selected again: from the cache, no second decode.
    atlas_ui.select_rows(rows)
    assert not any(strip.item(i).icon().isNull() for i in range(2)) and len(decoded_on) == 2
