"""Regenerate ``resources/colormaps.npz``: the exact colour tables of every map actviz offers.

The window (pyqtgraph) and the exporter (PIL) must paint the same colours, and ``actviz.display``
may not import Qt, so the tables are sampled once from pyqtgraph's own map data and shipped:
for each map a ``(256, 3)`` table (plain images: ``round(v * 255)`` picks the entry) and a
``(255, 3)`` table (index images: entries 0..254, 255 being transparent padding).
Run: ``python tools/make_colormaps.py`` (needs pyqtgraph, no display).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg

#: Names in the order offered; "jet" is kept for ``actviz export --cmap jet`` (made from the
#: anchors actviz has always used), "CET-D1" is the diverging map for signed values.
NAMES = ["viridis", "inferno", "magma", "plasma", "turbo", "CET-D1", "gray", "jet"]
_JET = [(0, 0, 128), (0, 0, 255), (0, 128, 255), (0, 255, 255), (128, 255, 128),
        (255, 255, 0), (255, 128, 0), (255, 0, 0), (128, 0, 0)]  # fmt: skip


def colormap(name: str) -> pg.ColorMap:
    if name == "gray":
        return pg.ColorMap(pos=[0.0, 1.0], color=[(0, 0, 0), (255, 255, 255)], name="gray")
    if name == "jet":
        return pg.ColorMap(pos=np.linspace(0, 1, len(_JET)), color=_JET, name="jet")
    return pg.colormap.get(name)


def main() -> None:
    tables: dict[str, np.ndarray] = {}
    for name in NAMES:
        cmap = colormap(name)
        for n in (256, 255):
            rgb = cmap.getLookupTable(nPts=n, alpha=False, mode="byte")
            tables[f"{name}/{n}"] = np.ascontiguousarray(rgb, dtype=np.uint8)
    out = Path(__file__).resolve().parents[1] / "resources" / "colormaps.npz"
    np.savez_compressed(out, names=np.array(NAMES), **tables)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
