"""A layer panel showing a token sequence as token x feature maps (built on first use);
``set_tokens(None)`` returns to the ordinary panel."""

from __future__ import annotations

import numpy as np
from PySide6 import QtWidgets

from actviz.display.layer_views import LayerView
from actviz.display.mosaic import Mosaic
from actviz.display.token_maps import TokenView
from actviz.ui.panels import style
from actviz.ui.panels.feature_map import LayerPanel
from actviz.ui.tokens.token_canvas import LabelledHeatCanvas

#: Least height of a panel showing tokens (room for a dozen readable token labels).
MIN_TOKEN_PANEL_HEIGHT = 300


class TokenLayerPanel(LayerPanel):
    """A :class:`LayerPanel` that can show a token view (see the module docstring)."""

    def __init__(self, name: str, parent: QtWidgets.QWidget | None = None, **kwargs) -> None:
        super().__init__(name, parent, **kwargs)
        self.token_view: TokenView | None = None
        self.token_box: QtWidgets.QWidget | None = None
        self.token_canvas: LabelledHeatCanvas | None = None
        self.token_grad_canvas: LabelledHeatCanvas | None = None
        #: Edited minus unedited ``(T, D)`` while the difference view shows, else None.
        self.difference_heat: np.ndarray | None = None

    def _build_token_box(self) -> None:
        box = QtWidgets.QWidget()
        row = style.bare_box(box, spacing=6)
        self.token_canvas = LabelledHeatCanvas(x_label="feature", bars_label="norm")
        self.token_canvas.hovered.connect(lambda r, c: self._on_token_hovered(r, c, False))
        row.addWidget(self.token_canvas, 1)
        self.content.insertWidget(0, box, 1)
        self.token_box = box

    def prepare_tokens(self, view: TokenView | None) -> bool:
        """Build one token plot ``view`` needs (one a pass); False when all are there."""
        if view is None or self.token_grad_canvas is not None:
            return False
        if self.token_box is None:
            self._build_token_box()
            self.token_box.setVisible(False)  # type: ignore[union-attr]  # until set_tokens
            return True
        self.token_grad_canvas = canvas = LabelledHeatCanvas(
            x_label="feature", bars_label="|grad| norm", bar_color=style.BAR_GRADIENT
        )
        canvas.hovered.connect(lambda r, c: self._on_token_hovered(r, c, True))
        canvas.setVisible(False)  # until set_tokens shows a gradient
        self.token_box.layout().addWidget(canvas, 1)  # type: ignore[union-attr]
        return True

    def _slots_stretch(self, stretch: int) -> None:
        # The hidden mosaic row would keep its stretch and half the panel.
        for i in range(self.content.count()):
            row = self.content.itemAt(i).layout()
            if row is not None and row.indexOf(self.activation_slot) >= 0:
                self.content.setStretch(i, stretch)

    def set_tokens(self, view: TokenView | None) -> None:
        """Show ``view`` instead of the mosaic slots (None: the ordinary panel)."""
        self.token_view = view
        self.difference_heat = None
        if view is None:
            if self.token_box is not None:
                self.token_box.setVisible(False)
                self._slots_stretch(1)
                self.activation_slot.setVisible(True)
                self._update_gradient_visibility()
            return
        while self.prepare_tokens(view):  # the plots not built yet
            pass
        assert self.token_canvas is not None and self.token_grad_canvas is not None
        self.activation_slot.setVisible(False)
        self.gradient_slot.setVisible(False)
        self.token_box.setVisible(True)  # type: ignore[union-attr]
        self._slots_stretch(0)
        self.token_canvas.set_heat(view.heat, view.tokens, bars=view.norms)
        if view.grad_heat is not None:
            self.token_grad_canvas.set_heat(
                view.grad_heat, view.tokens, bars=view.grad_norms, symmetric=False, gradient=True
            )
        self._update_gradient_visibility()
        self.set_minimum_panel_height(MIN_TOKEN_PANEL_HEIGHT)
        self.status_label.setText(self._token_description())

    def set_difference(
        self, view: LayerView, mosaic: Mosaic | None, colormap: str | None = None
    ) -> None:
        """As :meth:`LayerPanel.set_difference`; a token view shows it in its own heat map."""
        super().set_difference(view, mosaic, colormap)
        tv = self.token_view
        if tv is None or self.token_canvas is None or view.kind != "heatmap":
            return
        data = np.asarray(view.data, dtype=np.float32)
        if data.shape != tv.heat.shape:
            return
        self.difference_heat = data
        norms = np.linalg.norm(data.astype(np.float64), axis=1).astype(np.float32)
        self.token_canvas.set_heat(data, tv.tokens, bars=norms, symmetric=True)
        self.status_label.setText(self._token_description())

    def _token_description(self) -> str:
        view = self.token_view
        if view is None:
            return ""
        t, d = view.shape[1], view.shape[2]
        batch = f" (sample {view.sample} of {view.shape[0]})" if view.shape[0] > 1 else ""
        edited = "edited − unedited: " if self.difference_heat is not None else ""
        return f"{edited}{t} tokens x {d} features{batch}"

    def _on_token_hovered(self, row: int, col: int, gradient: bool) -> None:
        view = self.token_view
        if view is None:
            return
        diff = self.difference_heat
        if row < 0:
            text = ""
        elif diff is not None and not gradient:
            text = (
                f"token {row} {view.tokens[row]!r}, feature {col}: "
                f"edited − unedited {float(diff[row, col]):.4g}"
            )
        else:
            text = view.describe(row, col, gradient=gradient)
        self.status_label.setText(text or self._token_description())

    def _update_gradient_visibility(self) -> None:
        view = getattr(self, "token_view", None)  # None while LayerPanel.__init__ runs
        if view is None:
            super()._update_gradient_visibility()
            return
        # Never shown first by the base class: a shown widget lays out all visible ancestors.
        self.gradient_slot.setHidden(True)
        if self.token_grad_canvas is not None:
            self.token_grad_canvas.setVisible(
                self._gradients_visible and view.grad_heat is not None
            )

    def _show_description(self) -> None:
        if getattr(self, "token_view", None) is not None:
            self.status_label.setText(self._token_description())
        else:
            super()._show_description()

    def clear(self) -> None:
        self.set_tokens(None)
        super().clear()
