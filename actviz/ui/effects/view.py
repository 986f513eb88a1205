"""The "Channels that matter" dock's widgets (no torch): controls and bars per layer."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from PySide6 import QtCore, QtGui, QtWidgets

from actviz.analysis.effects.effect_results import OPPOSES_RGB, SUPPORTS_RGB
from actviz.ui.host import StepsAndLine
from actviz.ui.panels.deferred import DeferredCall
from actviz.ui.panels.style import ProgressBar

#: Channels shown per layer unless the user chooses otherwise, and the most a section shows.
DEFAULT_TOP, MAX_TOP = 8, 64
ROW_HEIGHT = 20
#: The labels' width, and where the bars are concepts ("concept 1234").
LABEL_WIDTH, CONCEPT_LABEL_WIDTH = 56, 84
MARGIN = 4
#: Sections made per event-loop turn (about those a dock shows), so no turn holds the GUI long.
SECTIONS_PER_TURN = 2
_POLICY = QtWidgets.QSizePolicy.Policy


class BarRow(NamedTuple):
    """One bar of a section: a channel, its estimate and its exact effect (None: not verified)."""

    channel: int
    estimate: float
    exact: float | None


def _num(value: float) -> str:
    return f"{value:+.4g}" if math.isfinite(value) else "n/a"


def unit_label(unit: str, number: int, names: Mapping[int, str] | None = None) -> str:
    """``ch 3``, or for a concept ``concept 3`` (``concept 3 "wheel"`` when named)."""
    if unit != "concept":
        return f"ch {number}"
    name = (names or {}).get(int(number), "")
    return f'concept {number} "{name}"' if name else f"concept {number}"


def measured_text(eff: Any, measured: Mapping[str, Sequence[int]]) -> str:
    """What the dock says after "Measure the effect of ...": each unit's numbers in ``eff``."""
    from actviz.analysis.concepts.layer_effects import unit_name

    lines = []
    for layer, channels in measured.items():
        for c in channels:
            r = eff[layer].row(c)
            exact = f"{r.exact:+.4g}" if r.exact is not None else "n/a"
            label = unit_label(unit_name(eff, layer), c)
            lines.append(f"{layer} {label}: exact {exact} (estimate {r.estimate:+.4g})")
    return "\n".join(lines) + "\neffect = target with the channel replaced − target"


class EffectBars(QtWidgets.QWidget):
    """One layer's top channels as bars, largest ``|effect|`` first (``channel_clicked``)."""

    channel_clicked = QtCore.Signal(str, int)

    def __init__(self, layer: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent, mouseTracking=True)
        self.layer = layer
        self.rows: tuple[BarRow, ...] = ()
        #: What the bars are: ``"channel"`` or ``"concept"`` (a panel showing concepts).
        self.unit = "channel"
        self.names: Mapping[int, str] = {}  #: Names the user gave the concepts.
        self.setSizePolicy(_POLICY.Expanding, _POLICY.Fixed)

    def set_rows(
        self, rows: Sequence[BarRow], unit: str = "channel", names: Mapping[int, str] | None = None
    ) -> None:
        """Show these bars (in this order); ``unit``: what they are (their labels)."""
        self.rows = tuple(rows)
        self.unit, self.names = unit, dict(names or {})
        self.setFixedHeight(self.sizeHint().height())
        self.update()

    def scale(self) -> float:
        """The largest ``|value|`` drawn (the bars' full length)."""
        values = (v for r in self.rows for v in (r.estimate, r.exact) if v is not None)
        return max((abs(v) for v in values if math.isfinite(v)), default=0.0) or 1.0

    def row_at(self, y: float) -> int | None:
        """The index of the bar at height ``y`` (widget pixels), or None."""
        index = int((y - MARGIN) // ROW_HEIGHT)
        return index if 0 <= index < len(self.rows) and y >= MARGIN else None

    def hover_text(self, index: int) -> str:
        """The tooltip of bar ``index``: the unit, estimate, exact and the sign's meaning."""
        row = self.rows[index]
        name = unit_label(self.unit, row.channel, self.names)
        lines = [f"{self.layer} · {name}", f"estimate {_num(row.estimate)}"]
        if row.exact is not None:
            lines.append(f"exact {_num(row.exact)}")
        value = row.exact if row.exact is not None else row.estimate
        if value < 0:
            lines.append("supports the target (replacing it lowers the target)")
        elif value > 0:
            lines.append("works against the target (replacing it raises it)")
        lines.append(f"click: open the {self.unit}")
        return "\n".join(lines)

    def sizeHint(self) -> QtCore.QSize:  # noqa: N802 - Qt name
        return QtCore.QSize(240, max(1, len(self.rows)) * ROW_HEIGHT + 2 * MARGIN)

    def paintEvent(self, event: QtGui.QPaintEvent) -> None:  # noqa: N802 - Qt name
        painter = QtGui.QPainter(self)
        try:
            ink = self.palette().color(QtGui.QPalette.ColorRole.WindowText)
            left = LABEL_WIDTH if self.unit != "concept" else CONCEPT_LABEL_WIDTH
            width = max(10, self.width() - left - MARGIN)
            zero, half = left + width / 2, width / 2 - 2
            scale = self.scale()
            painter.setPen(QtGui.QPen(QtGui.QColor(160, 160, 160)))
            bottom = self.height() - MARGIN
            painter.drawLine(QtCore.QPointF(zero, MARGIN), QtCore.QPointF(zero, bottom))
            align = int(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
            for i, row in enumerate(self.rows):
                top = MARGIN + i * ROW_HEIGHT
                painter.setPen(ink)
                label = unit_label(self.unit, row.channel)
                painter.drawText(QtCore.QRectF(0, top, left - 4, ROW_HEIGHT), align, label)
                bars = [(row.estimate, False)]
                if row.exact is not None:
                    bars.append((row.exact, True))
                h = (ROW_HEIGHT - 4) / len(bars)
                for j, (value, exact) in enumerate(bars):
                    if not math.isfinite(value) or value == 0:
                        continue  # no bar, and no colour: zero neither supports nor opposes
                    length = half * abs(value) / scale
                    x = zero if value >= 0 else zero - length
                    rgb = SUPPORTS_RGB if value < 0 else OPPOSES_RGB
                    rgb = tuple(int(c * 0.6) for c in rgb) if exact else rgb  # exact: darker
                    rect = QtCore.QRectF(x, top + 2 + j * h, max(1.0, length), h - 1)
                    painter.fillRect(rect, QtGui.QColor(*rgb))
        finally:
            painter.end()

    def mouseMoveEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        index = self.row_at(event.position().y())
        text = self.hover_text(index) if index is not None else ""
        self.setToolTip(text)
        QtWidgets.QToolTip.showText(event.globalPosition().toPoint(), text, self)  # "": hidden
        super().mouseMoveEvent(event)

    def mousePressEvent(self, event: QtGui.QMouseEvent) -> None:  # noqa: N802 - Qt name
        index = self.row_at(event.position().y())
        if index is not None and event.button() == QtCore.Qt.MouseButton.LeftButton:
            self.channel_clicked.emit(self.layer, self.rows[index].channel)
            return
        super().mousePressEvent(event)


class EffectsSection(QtWidgets.QWidget):
    """One layer: its name, the rank correlation once verified, Ablate / Keep only, the bars."""

    ablate_requested = QtCore.Signal(str)
    keep_requested = QtCore.Signal(str)

    def __init__(self, layer: str, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.layer = layer
        layout = QtWidgets.QVBoxLayout(self, spacing=2, contentsMargins=QtCore.QMargins(0, 4, 0, 4))
        self.title = QtWidgets.QLabel()
        # A long module name may be cut rather than widen the dock.
        self.title.setSizePolicy(_POLICY.Ignored, _POLICY.Preferred)
        self.info = QtWidgets.QLabel(styleSheet="color: gray;", wordWrap=True)
        self.ablate_button = QtWidgets.QToolButton()
        self.ablate_button.clicked.connect(lambda: self.ablate_requested.emit(self.layer))
        self.keep_button = QtWidgets.QToolButton()
        self.keep_button.clicked.connect(lambda: self.keep_requested.emit(self.layer))
        layout.addWidget(self.title)
        layout.addWidget(self.info)
        buttons = QtWidgets.QHBoxLayout(spacing=4)
        buttons.addWidget(self.ablate_button)
        buttons.addWidget(self.keep_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        self.bars = EffectBars(layer)
        layout.addWidget(self.bars)
        self.set_layer(layer)

    def set_layer(self, layer: str) -> None:
        """Show layer ``layer`` (a section is reused for another layer, not re-made)."""
        self.layer = self.bars.layer = layer
        self.title.setText(f"<b>{layer or '(model)'}</b>")
        self.title.setToolTip(layer)

    def set_rows(
        self,
        rows: Sequence[BarRow],
        info: str,
        k: int,
        unit: str = "channel",
        names: Mapping[int, str] | None = None,
    ) -> None:
        """Show ``rows`` (``info`` by the name; buttons act on the top ``k`` ``unit``s)."""
        self.bars.set_rows(rows, unit, names)
        self.info.setText(info)
        self.ablate_button.setText(f"Ablate top {k}")
        self.keep_button.setText(f"Keep only top {k}")
        n = self.layer
        top, rest = f"the top {k} {unit}s of {n}", f"every {unit} of {n} but the top {k}"
        if unit == "concept":
            ablate, keep = f"remove {top} (x − z_i d_i)", f"remove {rest}"
        else:
            ablate, keep = f"set {top} to zero", f"set {rest} to zero"
        self.ablate_button.setToolTip(f"What-if: {ablate} and run again")
        self.keep_button.setToolTip(f"What-if: {keep} and run again")


class EffectsView(QtWidgets.QWidget, StepsAndLine):
    """The dock's content: controls, progress, a message and one section per layer."""

    # Verify or Cancel, not both: the row fits a narrow dock.
    hide_run_when_busy = hide_cancel_when_idle = True

    verify_requested = QtCore.Signal()
    cancel_requested = QtCore.Signal()
    top_changed = QtCore.Signal(int)
    mark_toggled = QtCore.Signal(bool)
    sort_toggled = QtCore.Signal(bool)
    channel_clicked = QtCore.Signal(str, int)
    ablate_requested = QtCore.Signal(str)
    keep_requested = QtCore.Signal(str)

    def __init__(self, verify_count: int, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self, contentsMargins=QtCore.QMargins(6, 6, 6, 6))
        controls = QtWidgets.QHBoxLayout()
        self.top_spin = QtWidgets.QSpinBox(minimum=1, maximum=MAX_TOP, value=DEFAULT_TOP)
        self.top_spin.setToolTip("Channels shown per layer (and ablated or kept by its buttons)")
        self.top_spin.valueChanged.connect(self.top_changed.emit)
        self.run_button = self.verify_button = QtWidgets.QPushButton(f"Verify top {verify_count}")
        self.verify_button.setToolTip(
            f"Measure the true effect of each layer's top {verify_count} channels by ablating "
            "them one at a time (in the background; Esc cancels)"
        )
        self.verify_button.clicked.connect(self.verify_requested.emit)
        self.cancel_button = QtWidgets.QPushButton("Cancel", visible=False)
        self.cancel_button.clicked.connect(self.cancel_requested.emit)
        for w in (QtWidgets.QLabel("Top"), self.top_spin, self.verify_button, self.cancel_button):
            controls.addWidget(w)
        controls.addStretch(1)
        outer.addLayout(controls)
        self.mark_check = QtWidgets.QCheckBox("Mark the top channels")
        self.mark_check.setToolTip(
            "Outline each layer's top channels on its mosaic and turn it to the page holding "
            "the first (a right click on one then edits them all)"
        )
        self.mark_check.toggled.connect(self.mark_toggled.emit)
        self.sort_check = QtWidgets.QCheckBox("Sort tiles by effect")
        self.sort_check.setToolTip(
            "Order each layer's tiles by |estimated effect|, largest first, so its first page "
            "holds the channels that matter (each tile keeps its channel number; the page "
            "read-out says 'by effect'). Unticked: the natural order and the page you were on"
        )
        self.sort_check.toggled.connect(self.sort_toggled.emit)
        for box in (self.mark_check, self.sort_check):  # as wide as their text: all of it clicks
            box.setSizePolicy(_POLICY.Maximum, box.sizePolicy().verticalPolicy())
            outer.addWidget(box)
        self.progress = ProgressBar(visible=False)
        outer.addWidget(self.progress)
        self.message = QtWidgets.QLabel(wordWrap=True)
        outer.addWidget(self.message)
        legend = QtWidgets.QLabel(
            f"<span style='color: rgb{SUPPORTS_RGB}'>■</span> supports the target · "
            f"<span style='color: rgb{OPPOSES_RGB}'>■</span> works against it · darker: exact",
            styleSheet="color: gray;",
            wordWrap=True,  # one line would set the dock's least width
        )
        outer.addWidget(legend)
        self.sections_box = QtWidgets.QVBoxLayout(spacing=0)
        outer.addLayout(self.sections_box)
        outer.addStretch(1)
        self.sections: dict[str, EffectsSection] = {}
        self._spare: list[EffectsSection] = []
        #: The layers to show, in order; those whose sections are still to be made.
        self._layers: list[str] = []
        self._waiting: list[str] = []
        #: What each layer's section shows (:meth:`fill`), kept for a section not made yet.
        self._fills: dict[str, tuple[Any, ...]] = {}
        self._more = DeferredCall(self, self._make_sections)

    @property
    def top(self) -> int:
        """Channels shown per layer."""
        return int(self.top_spin.value())

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress.setFormat(f"{done}/{total} channels")

    def set_sections(self, layers: Sequence[str]) -> None:
        """Show ``layers``' sections, reusing hidden spares (making them is slow); at most
        :data:`SECTIONS_PER_TURN` are made per event-loop turn."""
        old, layers = self.sections, list(layers)
        if list(old) == layers and not self._waiting:
            return
        spare = [s for name, s in old.items() if name not in layers] + self._spare
        self._fills = {n: fill for n, fill in self._fills.items() if n in layers}
        self.sections, self._layers, self._waiting = {}, layers, []
        for layer in layers:
            section = old.get(layer) or (spare.pop(0) if spare else None)
            if section is not None and section.layer != layer:
                section.set_layer(layer)
                section.bars.set_rows(())
            if section is None:
                self._waiting.append(layer)
            else:
                self.sections[layer] = section
        self._spare = spare
        for section in spare:
            self.sections_box.removeWidget(section)
            section.setVisible(False)
        self._make_sections()

    def building(self) -> bool:
        """Whether sections are still being made (a few per event-loop turn)."""
        return bool(self._waiting)

    def fill(self, layer: str, *args: Any) -> None:
        """:meth:`EffectsSection.set_rows` of ``layer``'s section, now or once it is made."""
        self._fills[layer] = args
        if layer in self.sections:
            self.sections[layer].set_rows(*args)

    def _make_sections(self) -> None:
        """Make the next few waiting sections and place every section in order (cheap)."""
        made, self._waiting = self._waiting[:SECTIONS_PER_TURN], self._waiting[SECTIONS_PER_TURN:]
        for layer in made:
            section = EffectsSection(layer)
            section.bars.channel_clicked.connect(self.channel_clicked.emit)
            section.ablate_requested.connect(self.ablate_requested.emit)
            section.keep_requested.connect(self.keep_requested.emit)
            self.sections[layer] = section
            if layer in self._fills:
                section.set_rows(*self._fills[layer])
        self.sections = {n: self.sections[n] for n in self._layers if n in self.sections}
        for section in self.sections.values():
            self.sections_box.removeWidget(section)
        for section in self.sections.values():
            self.sections_box.addWidget(section)
            section.setVisible(True)
        if self._waiting:
            self._more.request()
