"""The window's sequence views: a *Text* tool bar, an *Attention* tab (attention maps by module
and head, the logit lens), and an *Attention rollout* overlay for vision transformers, each while
it applies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLineEdit, QPushButton, QSplitter, QToolBar

from actviz.display.attention import AttentionMaps
from actviz.display.logit_lens import LogitLens
from actviz.display.token_maps import SequenceLayout, token_labels
from actviz.ui.host import FeatureBase, WindowHost, refill_combo
from actviz.ui.panels import style
from actviz.ui.panels.base import PanelBase
from actviz.ui.panels.overlay import MiddleElidedComboBox, OverlayPanel
from actviz.ui.panels.style import PANEL_SPACING
from actviz.ui.tokens.token_panel import LabelledHeatCanvas

TEXT_PREFIX = "text:"
MEAN = "mean of heads"  #: The head selector's first entry.


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
        self.layer_combo.currentIndexChanged.connect(lambda _index: self._fill_heads())
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
        self.maps, self.sample, self.layout_info = maps, sample, layout
        self.tokens = tuple(tokens) if tokens is not None else None
        layer, head = self.layer_combo.currentText(), self.head_combo.currentIndex()
        refill_combo(self.layer_combo, maps.layers, layer)
        self._fill_heads(head)

    def current_layer(self) -> str | None:
        return self.layer_combo.currentText() or None

    def set_layer(self, name: str) -> None:
        self.layer_combo.setCurrentIndex(self.layer_combo.findText(name))

    def _fill_heads(self, keep: int | None = None) -> None:
        """The layer's heads (``keep``: the one chosen, default the head chosen now), shown."""
        if (name := self.current_layer()) is None or self.maps is None:
            return
        heads = self.maps.heads(name, self.sample).shape[0]
        keep = self.head_combo.currentIndex() if keep is None else keep
        refill_combo(self.head_combo, [MEAN, *[f"head {h}" for h in range(heads)]], keep)
        self._show()

    def _show(self, *_args: object) -> None:
        if (name := self.current_layer()) is None or self.maps is None:
            return
        # The head selector's first entry is the mean over heads.
        head, maps, sample = self.head_combo.currentIndex() - 1, self.maps, self.sample
        data = maps.mean(name, sample) if head < 0 else maps.heads(name, sample)[head]
        self.labels = token_labels(data.shape[-1], self.tokens, self.layout_info)
        rows = token_labels(data.shape[0], self.tokens, self.layout_info)
        self.canvas.set_heat(
            data, rows, col_labels=self.labels, symmetric=False, levels=(0.0, float(data.max()))
        )
        which = "mean over heads" if head < 0 else f"head {head}"
        self.set_title(f"Attention · {name} · {which}")
        self.status_label.setText(f"{data.shape[0]} queries x {data.shape[1]} keys")

    def _on_canvas_hovered(self, row: int, col: int) -> None:
        if (heat := self.canvas.heat) is None or row < 0:
            return
        self.status_label.setText(
            f"query {row} {self.canvas.row_labels[row]!r} -> key {col} {self.labels[col]!r}: "
            f"{float(heat[row, col]):.4f}"
        )

    def clear(self) -> None:
        self.maps = None
        for combo in (self.layer_combo, self.head_combo):
            refill_combo(combo, ())
        self.canvas.clear_heat()
        self.set_title("Attention")
        self.status_label.setText(
            "Attention maps appear for Hugging Face and timm transformers after a run."
        )


class LogitLensPanel(PanelBase):
    """The logit lens of one run: each block's top tokens at the chosen position (default last)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Logit lens", parent)
        row = QtWidgets.QHBoxLayout()
        row.addWidget(style.caption_label("position"))
        self.position_combo = QtWidgets.QComboBox()
        row.addWidget(self.position_combo, 1)
        self.content.addLayout(row)
        self.table = QtWidgets.QTableWidget(0, 0)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.content.addWidget(self.table, 1)
        self.status_label = style.readout_label()
        self.content.addWidget(self.status_label)
        self.lens: LogitLens | None = None
        self.position_combo.currentIndexChanged.connect(self._show)
        self.clear()

    def set_lens(self, lens: LogitLens | None) -> None:
        """Show ``lens`` (None: the empty panel); the position chosen stays when it exists."""
        if lens is None:
            self.clear()
            return
        self.lens = lens
        keep = self.position_combo.currentIndex()
        tokens = lens.tokens if lens.tokens and len(lens.tokens) == lens.positions else None
        last = lens.positions - 1
        texts = [f"{p}  {tokens[p]!r}" if tokens else str(p) for p in range(lens.positions)]
        refill_combo(self.position_combo, texts, keep if 0 <= keep <= last else last)
        self._show()

    def position(self) -> int:
        return self.position_combo.currentIndex()

    def _show(self, *_args: object) -> None:
        if (lens := self.lens) is None or self.position() < 0:
            return
        rows, k = lens.rows(self.position()), lens.ids.shape[2]
        self.table.clear()
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(k)
        self.table.setHorizontalHeaderLabels([f"top {j + 1}" for j in range(k)])
        self.table.setVerticalHeaderLabels([layer for layer, _ in rows])
        for i, (_layer, top) in enumerate(rows):
            for j, (token_id, text, prob) in enumerate(top):
                item = QtWidgets.QTableWidgetItem(f"{text!r} {prob:.3f}")
                item.setToolTip(f"token id {token_id}, p = {prob:.6f}")
                item.setData(QtCore.Qt.ItemDataRole.UserRole, token_id)
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.status_label.setText(
            f"each block's hidden state at position {self.position()} through the final norm "
            "and the unembedding"
        )

    def clear(self) -> None:
        self.lens = None
        refill_combo(self.position_combo, ())
        self.table.clear()
        self.table.setRowCount(0)
        self.table.setColumnCount(0)
        self.status_label.setText("The logit lens appears for decoder language models.")


class TokenViews(FeatureBase):
    """The text box, Attention tab and rollout of one window."""

    name = "tokens"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        self.attention_panel, self.lens_panel = AttentionPanel(), LogitLensPanel()
        self.attention_tab = QSplitter(Qt.Orientation.Horizontal, handleWidth=PANEL_SPACING)
        self.attention_tab.setChildrenCollapsible(False)
        self.attention_tab.addWidget(self.attention_panel)
        self.attention_tab.addWidget(self.lens_panel)
        self.attention_tab.setSizes([3000, 2000])
        # A scroll area, like the Overview's page: the tab never sets the window's minimum size.
        self.attention_page = style.scroll_area(
            self.attention_tab, name="attentionPage", frameless=True
        )
        host.add_tab(self.attention_page, "Attention")
        host.set_tab_visible(self.attention_page, False)
        self.rollout_panel = OverlayPanel("Attention rollout")
        host.add_overview_widget(self.rollout_panel, row="top")
        self.rollout_panel.setVisible(False)
        self._shown_empty = True  # the panels are cleared and hidden
        self.text_bar = QToolBar("Text input", objectName="textInputBar")
        self.text_edit = QLineEdit(placeholderText="Text for the model: type and press Enter")
        self.text_edit.setClearButtonEnabled(True)
        self.text_button = QPushButton("Use text")
        self.text_bar.addWidget(self.text_edit)
        self.text_bar.addWidget(self.text_button)
        host.add_toolbar(self.text_bar, new_row=True)
        self.text_bar.setVisible(False)
        self.text_action = QAction("Type text...", host.dialog_parent(), enabled=False)
        self.text_action.setToolTip("Type the input text of a model with a tokenizer")
        host.add_menu_action("File", self.text_action, before="Recent inputs", shortcut=False)
        self.text_action.triggered.connect(self.focus_text)
        self.text_edit.returnPressed.connect(self.submit_text)
        self.text_button.clicked.connect(self.submit_text)
        # Let go of at shutdown: a Session that outlives its window must not keep it alive.
        self.listen(self.session.model_changed, self._on_session_model_changed)
        self.listen(self.session.input_changed, self._on_session_input_changed)
        self.listen(self.session.result_changed, self._on_session_result_changed)

    def focus_text(self) -> None:
        self.text_bar.setVisible(True)
        self.text_edit.setFocus()
        self.text_edit.selectAll()

    def submit_text(self, text: str | None = None) -> bool:
        """Open ``text`` (default: the text box's) as the input; False when there is none."""
        text = self.text_edit.text() if not isinstance(text, str) else text
        if not text.strip():
            return False
        return self.host.open_input_source(TEXT_PREFIX + text, remember=False)

    def _on_session_model_changed(self) -> None:
        text = getattr(self.session.loaded_model, "tokenizer", None) is not None
        self.text_bar.setVisible(text)
        self.text_action.setEnabled(text)
        for panel in (self.attention_panel, self.lens_panel, self.rollout_panel):
            panel.clear()
        self.host.set_tab_visible(self.attention_page, False)
        self.rollout_panel.setVisible(False)
        self._shown_empty = True

    def _on_session_input_changed(self) -> None:
        # A text input opened elsewhere (command line, recent inputs) shows in the text box.
        source = self.session.input.source if self.session.input is not None else ""
        if source.startswith(TEXT_PREFIX) and self.text_edit.text() != source[len(TEXT_PREFIX) :]:
            self.text_edit.setText(source[len(TEXT_PREFIX) :])

    def _on_session_result_changed(self) -> None:
        result: Any = self.session.result
        if result is None:
            return
        empty = result.attention is None and result.logit_lens is None and result.rollout is None
        if empty and self._shown_empty:  # already cleared and hidden: not again per live frame
            return
        self._shown_empty = empty
        spec = result.spec
        self.attention_panel.set_attention(
            result.attention, spec.tokens, layout=spec.layout, sample=spec.sample
        )
        self.lens_panel.set_lens(result.logit_lens)
        maps, lens = result.attention is not None, result.logit_lens is not None
        self.attention_panel.setVisible(maps)
        self.lens_panel.setVisible(lens)
        self.host.set_tab_visible(self.attention_page, maps or lens)
        rollout = result.rollout is not None and result.image is not None
        self.rollout_panel.setVisible(rollout)
        if rollout:
            self.rollout_panel.set_image(result.image)
            self.rollout_panel.set_heat(result.rollout)
