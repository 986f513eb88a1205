"""LightPlot: a view box with a left and a bottom axis, the part of ``pg.PlotItem`` the token
maps use, without its menus, buttons, title and hidden axes (a PlotItem builds its options
form and four axes whatever is shown: most of a token canvas's construction)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtWidgets

from actviz.ui.panels import style


class LightPlot(pg.GraphicsWidget):
    """``vb`` in a grid with its ``"left"`` and ``"bottom"`` axes (``getAxis``, as PlotItem),
    styled, top-down (rows read as text does) and passive; items, ranges and links go to ``vb``.
    """

    def __init__(self, x_label: str | None = None) -> None:
        super().__init__()
        policy = QtWidgets.QSizePolicy.Policy.Expanding
        self.setSizePolicy(policy, policy)  # as PlotItem: it takes the room beside fixed parts
        grid = QtWidgets.QGraphicsGridLayout()
        grid.setContentsMargins(1, 1, 1, 1)
        grid.setHorizontalSpacing(0)
        grid.setVerticalSpacing(0)
        self.setLayout(grid)
        self.vb = pg.ViewBox(enableMenu=False, invertY=True)
        self.vb.setParentItem(self)
        self.vb.setMouseEnabled(x=False, y=False)
        self._axes = {
            name: pg.AxisItem(name, linkView=self.vb, parent=self) for name in ("left", "bottom")
        }
        grid.addItem(self._axes["left"], 0, 0)
        grid.addItem(self.vb, 0, 1)
        grid.addItem(self._axes["bottom"], 1, 1)
        for i in range(2):
            grid.setRowPreferredHeight(i, 0)
            grid.setRowMinimumHeight(i, 0)
            grid.setColumnPreferredWidth(i, 0)
            grid.setColumnMinimumWidth(i, 0)
        grid.setRowStretchFactor(0, 100)
        grid.setColumnStretchFactor(1, 100)
        for name, axis in self._axes.items():
            axis.setZValue(0.5)  # as PlotItem: above the view box's background
            style.style_axis(axis, x_label if name == "bottom" else None)

    def getAxis(self, name: str) -> pg.AxisItem:  # noqa: N802 - PlotItem's name
        return self._axes[name]
