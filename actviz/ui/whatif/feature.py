"""What-if: the tile menu, the Edits dock (each edit's box, value and remove button), the Clamp…
dialog, before/after and the difference view. Edits ride on every run (``session.edits``), which
brings back the unedited ``result.baseline``."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6 import QtWidgets
from PySide6.QtCore import QMargins, QObject, QSize, Qt, Signal
from PySide6.QtWidgets import QInputDialog, QMenu, QWidget

from actviz.ui.host import FeatureBase, WindowHost, channels_text
from actviz.ui.panels import style
from actviz.ui.panels.deferred import held_layouts
from actviz.ui.panels.prediction import PredictionChangeView, format_change
from actviz.workspace.edits_board import EditEntry, StaleEditError, edit_value

if TYPE_CHECKING:  # pragma: no cover
    from actviz.display.difference import PredictionChange
    from actviz.display.prepared import PreparedLayer, RunResult
    from actviz.ui.panels.feature_map import LayerPanel

TOP_K = 5  #: Classes of each run in the before/after table.
PREFERRED_WIDTH = 250  #: Preferred width of the Edits dock (it shares the right side with Live).
#: Rows built in one event-loop turn: until this long, at most this many (a row is ~0.4 ms).
ROWS_BUDGET_S, ROWS_PER_TURN = 0.015, 30


class EditRow(QtWidgets.QWidget):
    """One edit: ``[x] layer · ablate ch 3   [value]  [remove]``."""

    def __init__(self, entry: EditEntry, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.key, self.signature = entry.key, self.signature_of(entry)
        layout = QtWidgets.QHBoxLayout(self, spacing=4, contentsMargins=QMargins(0, 1, 0, 1))
        self.enabled_box = QtWidgets.QCheckBox(checked=entry.edit.enabled)
        self.enabled_box.setToolTip("Apply this edit (unticked: listed, not applied)")
        layout.addWidget(self.enabled_box)
        # The layer name gives way (in the middle) before the edit itself does.
        self.label = style.ElidedLabel(keep_after=": ")
        # Asks for its whole text (the dock's width follows), shortened only below it.
        preferred = QtWidgets.QSizePolicy.Policy.Preferred
        self.label.setSizePolicy(preferred, preferred)
        self.label.setText(entry.describe())
        self.label.setToolTip(entry.describe())
        layout.addWidget(self.label, 1)
        self.value_box: QtWidgets.QDoubleSpinBox | None = None
        if (value := edit_value(entry.edit)) is not None:
            self.value_box = box = QtWidgets.QDoubleSpinBox(
                decimals=3, minimum=-1e6, maximum=1e6, singleStep=0.1, value=value, maximumWidth=80
            )
            box.setKeyboardTracking(False)  # one change per finished value, not per keystroke
            box.setToolTip("Factor the channels are multiplied by")
            layout.addWidget(box)
        self.remove_button = QtWidgets.QToolButton(
            text="✕", autoRaise=True, toolTip="Remove this edit"
        )
        layout.addWidget(self.remove_button)

    @staticmethod
    def signature_of(entry: EditEntry) -> tuple:
        """What the row shows of ``entry``: a row is reused while this stays the same."""
        return entry.describe(), entry.edit.enabled, edit_value(entry.edit)


class _RowsArea(QtWidgets.QScrollArea):
    """A scroll area as large as its rows ask now (Qt keeps the hint its widget had when set),
    at most 24 lines tall."""

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt name
        hint, rows, frame = super().sizeHint(), self.widget().sizeHint(), 2 * self.frameWidth()
        width = rows.width() + self.verticalScrollBar().sizeHint().width() + frame
        tallest = 24 * self.fontMetrics().height()
        return QSize(max(hint.width(), width), min(rows.height() + frame, tallest))


class EditsDock(QtWidgets.QDockWidget):
    """The "Edits" dock: ``enabled_changed(key, on)``, ``value_changed(key, value)``,
    ``remove_requested(key)``, ``clear_requested``; ``rows_built`` once every row is there."""

    enabled_changed = Signal(int, bool)
    value_changed = Signal(int, float)
    remove_requested = Signal(int)
    clear_requested = Signal()
    rows_built = Signal()

    def __init__(self, parent: QWidget | None, defer: Callable[..., None]) -> None:
        super().__init__("Edits", parent, objectName="editsDock")  # restoreState finds it by name
        body = QtWidgets.QWidget()
        outer = QtWidgets.QVBoxLayout(body, spacing=4, contentsMargins=QMargins(6, 4, 6, 4))
        self.hint = style.caption_label(
            "Right-click a tile of a layer to ablate, scale, keep only or patch its channel "
            "(Ctrl/Shift+click picks several).",
            wrap=True,
        )
        outer.addWidget(self.hint)
        self.rows_box = QtWidgets.QWidget()
        self.rows_layout = style.bare_box(self.rows_box, spacing=0, vertical=True)
        self.rows_area = style.scroll_area(self.rows_box, cls=_RowsArea)
        self.rows_area.setMinimumHeight(60)
        # Not expanding: a dock below (Live) takes the column's spare height, not blank rows.
        grow, keep = QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Preferred
        self.rows_area.setSizePolicy(grow, keep)
        outer.addWidget(self.rows_area)
        #: Before -> after of the top class (or why there is none).
        self.summary = QtWidgets.QLabel(wordWrap=True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        outer.addWidget(self.summary)
        #: The last run's error with these edits (bad channel, shape mismatch...).
        self.error_label = QtWidgets.QLabel(
            wordWrap=True, styleSheet=f"color: {style.BAR_BAD};", visible=False
        )
        outer.addWidget(self.error_label)
        self.clear_button = QtWidgets.QPushButton("Clear all")
        self.clear_button.setToolTip("Remove every edit and show the unedited run")
        self.clear_button.clicked.connect(self.clear_requested)
        outer.addWidget(self.clear_button, 0, Qt.AlignmentFlag.AlignRight)
        self.setWidget(body)
        #: The rows placed, in order; the entries still to place, with the rows kept for them.
        self.rows: list[EditRow] = []
        self._to_place: deque[EditEntry] = deque()
        self._kept: dict[int, EditRow] = {}
        # Rows wait for a later turn as display steps (``defer``): the window settles after them.
        self._defer, self._deferred = defer, False
        self.set_entries(())

    def set_entries(self, entries: Sequence[EditEntry]) -> None:
        """Show exactly ``entries``; a row whose edit reads the same is kept (boards grow long)."""
        old, self._kept = (*self.rows, *self._kept.values()), {}
        wanted = {e.key: EditRow.signature_of(e) for e in entries}
        for row in old:
            if wanted.get(row.key) == row.signature:
                self._kept[row.key] = row
            else:  # gone, or reads otherwise now: replaced
                row.setParent(None)
                row.deleteLater()
        while self.rows_layout.count():  # the rows and the stretch after them
            self.rows_layout.takeAt(0)
        self.rows_layout.addStretch(1)
        self.rows, self._to_place = [], deque(entries)
        self.clear_button.setEnabled(bool(entries))
        self.hint.setVisible(not entries)
        if not entries:
            self.set_summary("")
            self.set_error("")
        self._place_rows()

    def _place_rows(self, step: bool = False) -> None:
        """Place the rows to come in order, building new ones for ``ROWS_BUDGET_S`` (the rest on
        the next turns; rows kept wait hidden); ``rows_built`` after the last."""
        self._deferred &= not step  # (the step waiting runs)
        if step and not self._to_place:
            return  # set_entries placed them all since
        built, end, budget = 0, time.perf_counter() + ROWS_BUDGET_S, ROWS_PER_TURN
        with held_layouts(self.rows_layout):  # laid out once, not as each row is shown
            while self._to_place and built < budget and (not built or time.perf_counter() < end):
                entry = self._to_place.popleft()
                if (row := self._kept.pop(entry.key, None)) is None:
                    row, built = self._new_row(entry), built + 1
                self.rows_layout.insertWidget(len(self.rows), row)
                self.rows.append(row)
                if row.isHidden():
                    row.show()
        for row in self._kept.values():
            row.hide()
        if not self._to_place:
            self.rows_area.updateGeometry()  # the dock's hint follows its rows
            self.rows_built.emit()
        elif not self._deferred:
            self._deferred = True
            self._defer(lambda: self._place_rows(step=True), stale_ok=True)

    def _new_row(self, entry: EditEntry) -> EditRow:
        row, key = EditRow(entry), entry.key
        row.enabled_box.toggled.connect(lambda on: self.enabled_changed.emit(key, on))
        if row.value_box is not None:
            row.value_box.valueChanged.connect(
                lambda value: self.value_changed.emit(key, float(value))
            )
        row.remove_button.clicked.connect(lambda _=False: self.remove_requested.emit(key))
        return row

    def set_summary(self, text: str) -> None:
        _set_note(self.summary, text)

    def set_error(self, text: str) -> None:
        _set_note(self.error_label, text)


def _set_note(label: QtWidgets.QLabel, text: str) -> None:
    """A label shown only when it says something (untouched when unchanged)."""
    if label.text() != text:
        label.setText(text)
    if label.isHidden() == bool(text):
        label.setVisible(bool(text))


class RangeDialog(QtWidgets.QDialog):
    """Ask for ``[min, max]`` (an empty field: no bound; one at least)."""

    def __init__(self, parent: QtWidgets.QWidget | None, prompt: str) -> None:
        # At least 380 px wide: the prompt names the layer, on one or two lines, not four.
        super().__init__(parent, windowTitle="Clamp channels", minimumWidth=380)
        form = QtWidgets.QFormLayout(self)
        form.addRow(QtWidgets.QLabel(prompt, wordWrap=True))
        self.min_edit = QtWidgets.QLineEdit("0", placeholderText="no bound")
        self.max_edit = QtWidgets.QLineEdit(placeholderText="no bound")
        form.addRow("Lowest", self.min_edit)
        form.addRow("Highest", self.max_edit)
        self.message_label = QtWidgets.QLabel(
            wordWrap=True, styleSheet=f"color: {style.ERROR_TEXT};"
        )
        form.addRow(self.message_label)
        std = QtWidgets.QDialogButtonBox.StandardButton
        buttons = QtWidgets.QDialogButtonBox(std.Ok | std.Cancel)
        buttons.accepted.connect(self._on_ok)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.ok_button = buttons.button(std.Ok)
        self._values: tuple[float | None, float | None] | None = None

    def values(self) -> tuple[float | None, float | None] | str:
        """``(min, max)`` as typed, or why they cannot be used (a sentence)."""
        bounds = []
        for what, edit in (("Lowest", self.min_edit), ("Highest", self.max_edit)):
            text = edit.text().strip()
            try:
                value = float(text) if text else None
            except ValueError:
                value = math.nan
            if value is not None and not math.isfinite(value):  # (inf, nan: no bound to use)
                return f"{what}: {text!r} is not a number."
            bounds.append(value)
        low, high = bounds
        if low is None and high is None:
            return "Give a lowest or a highest value (or both)."
        if low is not None and high is not None and low > high:
            return f"The lowest value ({low:g}) is above the highest ({high:g})."
        return low, high

    def chosen(self) -> tuple[float | None, float | None] | None:
        """The accepted range (None until OK was pressed with a valid one)."""
        return self._values

    def _on_ok(self) -> None:
        if isinstance(values := self.values(), str):
            self.message_label.setText(values)
            return
        self._values = values
        self.accept()


def ask_range(parent: QtWidgets.QWidget, prompt: str) -> tuple[float | None, float | None] | None:
    """Ask for a clamp range (modal); None when cancelled."""
    dialog = RangeDialog(parent, prompt)
    try:
        return dialog.chosen() if dialog.exec() == QtWidgets.QDialog.DialogCode.Accepted else None
    finally:
        dialog.deleteLater()


def ask_factor(parent: QWidget, prompt: str) -> float | None:
    """Ask for a scale factor (default 0.5)."""
    value, ok = QInputDialog.getDouble(parent, "Scale channels", prompt, 0.5, -1e6, 1e6, 3)
    return float(value) if ok else None


class WhatIfController(FeatureBase, QObject):
    """Edits made from the window's tiles, listed in the Edits dock, shown before/after."""

    name = "whatif"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        #: ``(parent, prompt) -> factor`` / ``(min, max)``, None when cancelled (tests answer).
        self.ask_factor, self.ask_range = ask_factor, ask_range
        self.menu: QMenu | None = None  #: The tile menu shown last (tests trigger its actions).
        self._diff_cache: dict[tuple, PreparedLayer] = {}

        self.dock = EditsDock(host.dialog_parent(), host.defer_display)
        # As wide as its rows ask (empty, its hint line), once they are all there.
        self.dock.rows_built.connect(lambda: self.host.fit_dock_width(self.dock))
        # Hidden until the first edit.
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=PREFERRED_WIDTH)
        # Run A is the edited run, B its unedited twin: shown before | after.
        self.change_view = PredictionChangeView(
            names=("after", "before"),
            tips=("probability with the edits", "probability without the edits"),
            reference_first=True,
            caption="Before → after the edits (Δp in points)",
            framed=False,
        )
        host.add_prediction_widget(self.change_view)

        self.dock.enabled_changed.connect(self.session.edits.set_enabled)
        self.dock.value_changed.connect(self._on_dock_value_changed)
        self.dock.remove_requested.connect(self._on_dock_remove_requested)
        self.dock.clear_requested.connect(self._on_dock_clear_requested)
        self.listen(self.session.edits_changed, self._on_edits_changed)
        self.listen(self.session.result_changed, self._on_result_changed)
        self.listen(self.session.model_changed, self._on_model_changed)
        host.panel_created.connect(self._on_panel_created)
        host.panel_shown.connect(self._on_panel_updated)
        host.channel_view.channel_changed.connect(self._on_channel_shown)
        for name, panel_ in host.layer_panels.items():
            self._on_panel_created(name, panel_)
        host.run_failed.connect(lambda text: len(self.session.edits) and self.dock.set_error(text))

    def reset_layout(self) -> None:
        """Put the Edits dock back on the right, at its width; shown while there are edits."""
        self.host.dock_back(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=PREFERRED_WIDTH)
        self.dock.setVisible(len(self.session.edits) > 0)

    def add_edit(self, layer: str, edit: Any, note: str = "", *, model: Any = None) -> bool:
        """Add ``edit`` on ``layer`` and re-run; ``model`` offered it (None: the one shown).
        False (said) when that model is no longer shown."""
        kwargs = {} if model is None else {"model": model}  # omitted: the model shown
        if (repeated := self.session.edits.repeats(layer, edit)) is not None:
            self.host.show_status(f"Already made: {repeated.describe()}.")
            return False
        try:
            self.session.edits.add(layer, edit, note, **kwargs)
        except StaleEditError as exc:
            self.host.show_warning(f"Edit not made: {exc}.")
            return False
        self.dock.show()
        self.dock.raise_()
        return True

    def clear_edits(self) -> None:
        """Remove every edit (the next run is the unedited one)."""
        self.session.edits.clear()

    def _on_dock_clear_requested(self) -> None:
        """Clear all: no edits left to list, so the dock goes (it comes back with the next)."""
        self.clear_edits()
        self.dock.hide()

    def _on_dock_value_changed(self, key: int, value: float) -> None:
        try:
            self.session.edits.set_value(key, value)
        except (KeyError, ValueError) as exc:
            self.host.show_error(f"Edit: {exc}")

    def _on_dock_remove_requested(self, key: int) -> None:
        with contextlib.suppress(KeyError):
            self.session.edits.remove(key)

    def _on_edits_changed(self) -> None:
        board = self.session.edits
        self.dock.set_error("")
        # Rebuilt after the signal that asked for it has returned (a row's own button).
        self.dock.set_entries(board.entries)
        if not len(board):
            for name, panel in self.host.layer_panels.items():
                shown = panel.difference_shown()
                panel.hide_difference_toggle()
                if shown:  # no edits, no difference: the plain activation, now
                    self.host.refresh_panel(name)
        self.host.schedule_run()

    def _on_panel_created(self, _name: str, panel: LayerPanel) -> None:
        panel.channels_context_requested.connect(
            lambda layer, channels, pos: self.pop_up(self.tile_menu(layer, channels), pos)
        )
        panel.difference_toggled.connect(lambda name, _on: self.host.refresh_panel(name))

    def tile_menu(self, layer: str, channels: Sequence[int]) -> QMenu:
        """The menu of a right click on ``channels`` of ``layer`` (built, not shown)."""
        from actviz.core import edit_kinds as E

        channels = tuple(int(c) for c in channels)
        what = channels_text(channels)
        menu = QMenu(self.host.dialog_parent(), toolTipsVisible=True)
        menu.addSection(f"{layer} · {what}")
        # Of this model: a switch while the menu is up must not edit the next model.
        model = self.session.model

        def adder(make: Callable[[], Any], note: str = "") -> Callable[[], None]:
            return lambda: self._add_made(layer, make, note, model)

        def asker(question: str, prompt: str, make: Callable[[Any], Any]) -> Callable[[], None]:
            """Ask the feature's ``question`` (read now: tests answer it), add ``make(answer)``."""

            def ask() -> None:
                answer = getattr(self, question)(self.host.dialog_parent(), prompt)
                if answer is not None:
                    self._add_made(layer, lambda: make(answer), "", model)

            return ask

        menu.addAction(f"Ablate {what}", adder(lambda: E.ablate(channels))).setToolTip(
            "Set these channels to zero during the forward"
        )
        scale = asker(
            "ask_factor", f"Multiply {what} of {layer} by:", lambda f: E.scale(channels, f)
        )
        menu.addAction(f"Scale {what}…", scale)
        menu.addAction(f"Keep only {what}", adder(lambda: E.keep(channels))).setToolTip(
            "Set every other channel of this layer to zero"
        )
        clamp = asker(
            "ask_range",
            f"Clamp {what} of {layer} to (empty: no bound):",
            lambda bounds: E.clamp(*bounds, channels=channels),
        )
        menu.addAction(f"Clamp {what}…", clamp).setToolTip(
            "Limit these channels to a range during the forward (e.g. only positive values)"
        )
        if not (pins := [p for p in self.session.pins if p.result.capture is not None]):
            action = menu.addAction("Patch from pin")
            action.setEnabled(False)
            action.setToolTip(
                "Pin a run first (Run > Pin this result, Ctrl+P): its values of these "
                "channels then replace this run's"
            )
        else:
            sub = menu.addMenu("Patch from pin")
            sub.setToolTipsVisible(True)
            for pin in pins:
                cap = pin.result.capture
                action = sub.addAction(
                    pin.label, adder(lambda cap=cap: E.patch(cap, channels=channels), pin.label)
                )
                if layer not in cap:
                    action.setEnabled(False)
                    action.setToolTip(f"this pinned run did not capture {layer}")
                else:
                    action.setToolTip(f"{what} of {layer} take their values in {pin.label}")
        self.host.fill_tile_menu(menu, layer, channels)  # other features' entries
        return menu

    def _add_made(
        self, layer: str, make: Callable[[], Any], note: str = "", model: Any = None
    ) -> None:
        try:
            edit = make()
        except (TypeError, ValueError) as exc:
            self.host.show_error(f"Could not make the edit: {exc}")
            return
        self.add_edit(layer, edit, note, model=model)

    def _on_model_changed(self) -> None:
        # The tile menu open was built for the previous model's panel: it goes with it.
        menu, self.menu = self.menu, None
        if menu is not None and shiboken6.isValid(menu):
            menu.close()
            menu.deleteLater()  # its actions hold the previous model

    def _on_result_changed(self) -> None:
        self._diff_cache.clear()
        result, change = self.session.result, None
        if result is None or result.baseline is None or result.capture is None:
            live = result is not None and self.session.edits.active() and result.origin
            why = "Live frames apply the edits (no unedited twin)." if live else ""
        else:
            self.dock.set_error("")
            change = self.prediction_change(result)
            why = f"No before/after predictions: {change.message}" if change.message else ""
        if change is None or not change.rows:  # not a classifier: the bars stay (no table)
            self.change_view.clear()
            self.host.set_prediction_bars_visible(True)
            self.dock.set_summary(why)
            return
        self.change_view.set_change(change)
        self.host.set_prediction_bars_visible(False)  # the table has "after" too
        self.dock.set_summary(_summary(change))

    def prediction_change(self, result: RunResult) -> PredictionChange:
        """The predictions of ``result`` (edited) against its unedited twin."""
        from actviz.display.difference import prediction_change

        before, after = result.baseline, result.capture
        assert before is not None and after is not None
        chosen = self.session.run_target  # else the class the unedited model answered
        target = before.target_index if chosen is None else chosen
        # A is the edited run, B the reference: changes are after minus before.
        return prediction_change(
            after.output,
            before.output,
            k=TOP_K,
            categories=self.session.categories,
            target=target,
            sample=result.spec.sample,
            tokenizer=getattr(result.spec, "tokenizer", None),  # a language model's tokens
        )

    def _on_channel_shown(self, name: str, _channel: int) -> None:
        """The channel view names the edits of the layer it shows, as the layer's badge."""
        if self._closed:
            return
        self.host.channel_view.set_edit_note(_edit_note(self.session.result, name) if name else "")

    def _on_panel_updated(self, _name: str, panel: LayerPanel, layer: PreparedLayer) -> None:
        if (result := self.session.result) is None:
            return
        panel.set_edit_badge(_edit_note(result, panel.name))
        if result.baseline is not None:
            panel.set_difference_available(
                True, "Show the edited activation minus the unedited one (diverging colours)"
            )
        elif len(self.session.edits):
            panel.set_difference_available(
                False, "No unedited run to subtract (live frames, or the edits are all off)"
            )
        else:
            panel.hide_difference_toggle()
            return
        if panel.difference_wanted() and result.baseline is not None:
            if (diff := self.difference_layer(result, layer)) is not None and diff.view is not None:
                panel.set_difference(diff.view, diff.mosaic, diff.stats.get("colormap"))

    def difference_layer(self, result: RunResult, layer: PreparedLayer) -> PreparedLayer | None:
        """``layer`` of ``result``, edited minus unedited, on the panel's page."""
        from actviz.display.difference import prepare_difference

        name = layer.name
        if result.capture is None or result.baseline is None or name not in result.baseline:
            return None
        first = layer.mosaic.first_channel if layer.mosaic is not None else 0
        page = layer.mosaic.page_size if layer.mosaic is not None else None
        order = layer.mosaic.order if layer.mosaic is not None else None  # sorted tiles
        key = (name, first, page, result.spec.normalize, order)
        if (cached := self._diff_cache.get(key)) is not None:
            return cached
        spec = dataclasses.replace(
            result.spec,
            layers=(name,),
            channel_pages={name: first},
            page_channels={name: page} if page else {},
            channel_orders={name: order} if order is not None else {},
        )
        try:
            diff = prepare_difference(result.capture, result.baseline, spec, layers=[name])
        except (ValueError, KeyError) as exc:
            self.host.show_error(f"Difference of {name}: {exc}")
            return None
        self._diff_cache[key] = diff[name]
        return diff[name]


def _edit_note(result: RunResult | None, layer: str) -> str:
    """The edits ``result``'s capture applied on ``layer``, described ("" for none)."""
    applied = getattr(result.capture if result is not None else None, "edits", None) or {}
    return "; ".join(e.describe() for e in applied.get(layer, ()))


def _summary(change: PredictionChange) -> str:
    """``Target class 2 (star): 83.1 % → 12.0 % (-71.1 pp)``: before → after, for the dock."""
    row = change.target if change.target is not None else next(iter(change.rows), None)
    if row is None:
        return ""
    label = f"class {row.index}"
    if row.name and row.name not in (str(row.index), label):
        label += f" ({row.name})"
    change = format_change(row.dp, percent=True)
    return f"Target {label}: {100 * row.p_b:.1f} % → {100 * row.p_a:.1f} % ({change} pp)"
