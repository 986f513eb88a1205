"""Attention probabilities as labelled T x T maps, by module and head (or their mean)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6 import QtWidgets
from PySide6.QtCore import QSignalBlocker

from actviz.display.attention import AttentionMaps
from actviz.display.token_maps import SequenceLayout, token_labels
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.overlay import MiddleElidedComboBox
from actviz.ui.tokens.token_canvas import LabelledHeatCanvas

#: The head selector's first entry.
MEAN = "mean of heads"


class AttentionPanel(PanelBase):
    """Attention maps of one run (see the module docstring)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Attention", parent)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(style.caption_label("layer"))
        # "transformer…h.11.attn": the block number stays when the name is cut.
        self.layer_combo = MiddleElidedComboBox()
        style.fit_combo(self.layer_combo, 14)
        row.addWidget(self.layer_combo, 2)
        row.addWidget(style.caption_label("head"))
        self.head_combo = QtWidgets.QComboBox()
        row.addWidget(self.head_combo, 1)
        self.content.addLayout(row)
        self.canvas = LabelledHeatCanvas(x_label="key (attended to)", colorbar=True)
        self.canvas.plot.getAxis("left").setLabel("query", color=style.MUTED_TEXT)
        self.content.addWidget(self.canvas, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        self.maps: AttentionMaps | None = None
        self.labels: list[str] = []
        self.sample = 0
        self.tokens: tuple[str, ...] | None = None
        self.layout_info: SequenceLayout | None = None
        self.layer_combo.currentIndexChanged.connect(self._on_layer_changed)
        self.head_combo.currentIndexChanged.connect(self._show)
        self.canvas.hovered.connect(self._on_canvas_hovered)
        self.clear()

    def set_attention(
        self,
        maps: AttentionMaps | None,
        tokens: Sequence[str] | None = None,
        *,
        layout: SequenceLayout | None = None,
        sample: int = 0,
    ) -> None:
        """Show ``maps`` (None: empty) labelled with ``tokens`` or ``layout``; choices kept."""
        if maps is None or not maps.layers:
            self.clear()
            return
        self.maps, self.sample = maps, sample
        self.tokens = tuple(tokens) if tokens is not None else None
        self.layout_info = layout
        layer, head = self.layer_combo.currentText(), self.head_combo.currentIndex()
        with QSignalBlocker(self.layer_combo):
            self.layer_combo.clear()
            self.layer_combo.addItems(list(maps.layers))
            self.layer_combo.setCurrentIndex(max(0, self.layer_combo.findText(layer)))
        self._fill_heads(head)
        self._show()

    def current_layer(self) -> str | None:
        return self.layer_combo.currentText() or None

    def current_head(self) -> int | None:
        """The head shown, None for the mean over heads."""
        index = self.head_combo.currentIndex()
        return None if index <= 0 else index - 1

    def set_head(self, head: int | None) -> None:
        """Show head ``head`` (None: the mean)."""
        self.head_combo.setCurrentIndex(0 if head is None else head + 1)

    def set_layer(self, name: str) -> None:
        self.layer_combo.setCurrentIndex(self.layer_combo.findText(name))

    def shown_map(self) -> np.ndarray | None:
        """The ``(T, T)`` map on screen."""
        return self.canvas.heat

    def _fill_heads(self, keep: int) -> None:
        name = self.current_layer()
        if self.maps is None or name is None:
            return
        heads = self.maps.heads(name, self.sample).shape[0]
        with QSignalBlocker(self.head_combo):
            self.head_combo.clear()
            self.head_combo.addItems([MEAN, *[f"head {h}" for h in range(heads)]])
            self.head_combo.setCurrentIndex(keep if 0 <= keep <= heads else 0)

    def _on_layer_changed(self, _index: int) -> None:
        self._fill_heads(self.head_combo.currentIndex())
        self._show()

    def _show(self, *_args: object) -> None:
        name = self.current_layer()
        if self.maps is None or name is None:
            return
        head, maps, sample = self.current_head(), self.maps, self.sample
        data = maps.mean(name, sample) if head is None else maps.heads(name, sample)[head]
        self.labels = token_labels(data.shape[-1], self.tokens, self.layout_info)
        rows = token_labels(data.shape[0], self.tokens, self.layout_info)
        self.canvas.set_heat(
            data, rows, col_labels=self.labels, symmetric=False, levels=(0.0, float(data.max()))
        )
        which = "mean over heads" if head is None else f"head {head}"
        self.set_title(f"Attention · {name} · {which}")
        self.status_label.setText(f"{data.shape[0]} queries x {data.shape[1]} keys")

    def _on_canvas_hovered(self, row: int, col: int) -> None:
        heat = self.canvas.heat
        if heat is None or row < 0:
            return
        self.status_label.setText(
            f"query {row} {self.canvas.row_labels[row]!r} -> key {col} {self.labels[col]!r}: "
            f"{float(heat[row, col]):.4f}"
        )

    def clear(self) -> None:
        self.maps = None
        for combo in (self.layer_combo, self.head_combo):
            with QSignalBlocker(combo):
                combo.clear()
        self.canvas.clear_heat()
        self.set_title("Attention")
        self.status_label.setText(
            "Attention maps appear for Hugging Face and timm transformers after a run."
        )
