"""The window's sequence views, wired to the session: a *Text* tool bar while the model has a
tokenizer, an *Attention* tab while a result has attention maps or a logit lens, and an
*Attention rollout* overlay for vision transformers.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFrame, QLineEdit, QPushButton, QScrollArea, QSplitter, QToolBar

from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.panels.overlay import OverlayPanel
from actviz.ui.panels.style import PANEL_SPACING
from actviz.ui.tokens.attention_panel import AttentionPanel
from actviz.ui.tokens.lens_panel import LogitLensPanel

__all__ = ["TEXT_PREFIX", "TokenViews"]

TEXT_PREFIX = "text:"


class TokenViews(FeatureBase):
    """The text box, Attention tab and rollout of one window."""

    name = "tokens"

    def __init__(self, host: WindowHost) -> None:
        self.host = host
        self.session = host.session
        # Attention tab: maps | logit lens.
        self.attention_panel = AttentionPanel()
        self.lens_panel = LogitLensPanel()
        self.attention_tab = QSplitter(Qt.Orientation.Horizontal)
        self.attention_tab.setHandleWidth(PANEL_SPACING)
        self.attention_tab.setChildrenCollapsible(False)
        self.attention_tab.addWidget(self.attention_panel)
        self.attention_tab.addWidget(self.lens_panel)
        self.attention_tab.setSizes([3000, 2000])
        # A scroll area, like the Overview's page: the tab never sets the window's minimum size.
        self.attention_page = QScrollArea()
        self.attention_page.setObjectName("attentionPage")
        self.attention_page.setWidgetResizable(True)
        self.attention_page.setFrameShape(QFrame.Shape.NoFrame)
        self.attention_page.setWidget(self.attention_tab)
        host.add_tab(self.attention_page, "Attention")
        host.set_tab_visible(self.attention_page, False)
        # Rollout beside Grad-CAM (the Overview's top row).
        self.rollout_panel = OverlayPanel("Attention rollout")
        host.add_overview_widget(self.rollout_panel, row="top")
        self.rollout_panel.setVisible(False)
        self._shown_empty = True  # the panels are cleared and hidden
        # Text input.
        self.text_bar = QToolBar("Text input")
        self.text_bar.setObjectName("textInputBar")
        self.text_edit = QLineEdit()
        self.text_edit.setPlaceholderText("Text for the model: type and press Enter")
        self.text_edit.setClearButtonEnabled(True)
        self.text_button = QPushButton("Use text")
        self.text_bar.addWidget(self.text_edit)
        self.text_bar.addWidget(self.text_button)
        host.add_toolbar(self.text_bar, new_row=True)
        self.text_bar.setVisible(False)
        self.text_action = QAction("Type text...", host.dialog_parent())
        self.text_action.setToolTip("Type the input text of a model with a tokenizer")
        self.text_action.setEnabled(False)
        host.add_menu_action("File", self.text_action, before="Recent inputs", shortcut=False)
        self.text_action.triggered.connect(self.focus_text)
        self.text_edit.returnPressed.connect(self.submit_text)
        self.text_button.clicked.connect(self.submit_text)
        for event, slot in self._session_slots():
            event.connect(slot)

    def _session_slots(self) -> list[tuple[Any, Any]]:
        s = self.session
        return [
            (s.model_changed, self._on_session_model_changed),
            (s.input_changed, self._on_session_input_changed),
            (s.result_changed, self._on_session_result_changed),
        ]

    def shutdown(self) -> None:
        """Let go of the session: a Session that outlives its window must not keep it alive."""
        for event, slot in self._session_slots():
            event.disconnect(slot)

    def has_tokenizer(self) -> bool:
        return getattr(self.session.loaded_model, "tokenizer", None) is not None

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
        text = self.has_tokenizer()
        self.text_bar.setVisible(text)
        self.text_action.setEnabled(text)
        self.attention_panel.clear()
        self.lens_panel.clear()
        self.rollout_panel.clear()
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
        if empty and self._shown_empty:
            # Already cleared and hidden: not again per live frame.
            return
        self._shown_empty = empty
        spec = result.spec
        self.attention_panel.set_attention(
            result.attention, spec.tokens, layout=spec.layout, sample=spec.sample
        )
        self.lens_panel.set_lens(result.logit_lens)
        self.attention_panel.setVisible(result.attention is not None)
        self.lens_panel.setVisible(result.logit_lens is not None)
        self.host.set_tab_visible(
            self.attention_page, result.attention is not None or result.logit_lens is not None
        )
        if result.rollout is not None and result.image is not None:
            self.rollout_panel.setVisible(True)
            self.rollout_panel.set_image(result.image)
            self.rollout_panel.set_heat(result.rollout)
        else:
            self.rollout_panel.setVisible(False)
