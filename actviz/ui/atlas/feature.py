"""The Atlas tab: the dataset scan's map of one layer (fitted on its own worker), with the
input's marker and nearest images; a dot's click opens its image as the input."""

from __future__ import annotations

import html
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QObject, QSignalBlocker, Signal
from PySide6.QtGui import QCursor, QHelpEvent, QIcon, QImage, QPixmap
from PySide6.QtWidgets import QListWidgetItem, QToolTip

from actviz.data.atlas_map import NO_ATLAS_NOTE, build_atlas, query_vector, umap_available
from actviz.ui.atlas.view import EMPTY_TEXT, HOVER_HINT, SELECTION_HINT, THUMB, AtlasView, colouring
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.panels.style import rgb_image
from actviz.ui.worker import CAPTURE_NICE, Job, Worker

NEAREST_K = 8  #: Images in the "Nearest in the dataset" strip.
#: Thumbnails the selection strip shows at most (the channels use the whole selection).
SELECTION_THUMBS = 24
SEPARATING_K = 10  #: Channels listed for a selection.
#: What the nearest images' title adds when the input's star lies too far off the map.
FAR_OFF_MAP = "the input lies far off the map, out of view (zoom out to see its star)"
#: Thumbnails kept (a strip shows at most 24; the map may be hovered over thousands).
THUMBS_KEPT = 512


def classifier_layer(scan: Any, categories: Any) -> str | None:
    """The last scanned layer whose embeddings are as wide as the class list, or None."""
    if not categories:
        return None
    flat = [n for n in scan.embedding_layers if scan.spatial(n) in (None, ())]
    hits = [n for n in flat if scan.channels(n) == len(categories)]
    return hits[-1] if hits else None


def made_of(saved: dict[str, Any], scan: Any) -> bool:
    """Whether ``scan`` is the one the saved map was made of."""
    if (key := saved.get("scan_key")) and str(getattr(scan, "cache_path", None) or "") != str(key):
        return False
    return as_int(saved.get("images")) in (None, int(scan.count))


def rows_of(atlas: Any) -> dict[int, int]:
    """The map row of each image, by its index in the scan."""
    return {int(i): r for r, i in enumerate(atlas.embeddings.indices)}


def as_int(value: Any) -> int | None:
    """``value`` as an int when it is one (JSON from a session file), else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


def map_summary(atlas: Any) -> str:
    """``layer4: 400 images (PCA) · axes explain 31% of the variance``."""
    p = atlas.projection
    share = ""
    if p.explained is not None:
        share = f" · axes explain {100 * float(np.sum(p.explained)):.0f}% of the variance"
    scan = atlas.scan
    total = len(scan.sources) - len(scan.skipped)
    # A cancelled scan's map is of the images scanned so far: said.
    images = f"{len(atlas.coords):,} image{'' if len(atlas.coords) == 1 else 's'}"
    if int(scan.count) < total:
        images = f"{len(atlas.coords):,} of {total:,} images, a partial scan"
    if p.fitted_on is not None:  # a million points: UMAP fitted on a sample
        share += f" · fitted on {p.fitted_on:,} sampled points, the others placed by the fit"
    return f"{atlas.layer}: {images} ({p.method.upper()}){share}"


def selection_text(atlas: Any, rows: np.ndarray) -> str:
    """``Selection: 12 of 400 images · cat 9, dog 3`` (its three largest classes); none: how to."""
    if not len(rows):
        return SELECTION_HINT
    emb = atlas.embeddings
    text = f"Selection: {len(rows):,} of {len(atlas.coords):,} images"
    if emb.labels is not None and emb.class_names:
        labels = np.asarray(emb.labels)[rows]
        labels = labels[(labels >= 0) & (labels < len(emb.class_names))]
        counts = np.bincount(labels, minlength=len(emb.class_names))
        if top := [int(c) for c in np.argsort(-counts, kind="stable")[:3] if counts[c] > 0]:
            text += " · " + ", ".join(f"{emb.class_names[c]} {counts[c]}" for c in top)
            others = len(np.flatnonzero(counts)) - len(top)
            text += f", +{others} classes" if others > 0 else ""
    return text


class AtlasFeature(FeatureBase, QObject):
    """The Atlas tab (see the module's docstring)."""

    name = "atlas"
    fitted = Signal(object)  #: A map fitted on the feature's worker arrived (after it was shown).

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        self.view = AtlasView()
        host.add_tab(self.view, "Atlas")
        self.worker = Worker(self, nice=CAPTURE_NICE)
        self.atlas: Any = None  #: The map shown (:class:`~actviz.data.atlas_map.Atlas`), or None.
        self.logits: str | None = None
        self.selection: np.ndarray = np.zeros(0, np.int64)
        self.separating: tuple[Any, ...] = ()
        self.nearest: tuple[Any, ...] = ()
        #: A session's saved map, put back once its scan is shown (see restore_session_part).
        self._restoring: dict[str, Any] | None = None
        self.hover_text = ""  #: The hover text last shown (the tooltip's HTML).
        # Maps fitted of the scan shown, by (layer, method, logits layer): shown again at once.
        self._fitted: dict[tuple[str, str, str | None], Any] = {}
        self._thumbs = ThumbCache(THUMB, self)
        self._thumbs.loaded.connect(self._on_thumb_loaded)
        #: The hover tooltip's pictures (twice a strip's), and the dot hovered (-1: none).
        self._hover_thumbs = ThumbCache(2 * THUMB, self, as_uri=True)
        self._hover_thumbs.loaded.connect(lambda _path: self._show_hover())
        self._hovered = -1
        v = self.view
        v.set_choices(v.method_combo, ["PCA"] + (["UMAP"] if umap_available() else []), "PCA")
        v.options_changed.connect(self.rebuild)
        v.colour_changed.connect(
            lambda: self.atlas is not None and v.set_colours(self._colouring())
        )
        v.hovered.connect(self._on_hovered)
        # The map answers the plot's own tooltip event (else it hides the thumbnail).
        v.plot.viewport().installEventFilter(self)
        v.clicked.connect(self._open_row)
        v.rect_selected.connect(lambda rect: self.select_rows(v.rows_in(rect)))
        v.lasso_selected.connect(lambda shape: self.select_rows(v.rows_in_shape(shape)))
        v.nearest_strip.picked.connect(self._open_row)
        v.selection_strip.picked.connect(self._open_row)
        v.channel_list.itemClicked.connect(self._on_channel_clicked)
        self.listen(self.session.scan_changed, self._on_scan_changed)
        self.listen(self.session.result_changed, self._on_result)
        self.listen(
            host.tab_changed,
            lambda w: w is self.view and self._result_pending and self._on_result(),
        )
        # A result that came while the tab was hidden (placed once the tab shows).
        self._result_pending = False
        self._on_scan_changed()

    def _on_scan_changed(self) -> None:
        scan = self.session.scan
        if scan is not None and self._restoring is not None and not made_of(self._restoring, scan):
            self._restoring = None  # another scan than the session's: its map is not restored
        layers = tuple(scan.embedding_layers) if scan is not None else ()
        self._fitted = {k: a for k, a in self._fitted.items() if a.scan is scan}  # others go
        if not layers:
            self.worker.drop()
            self.atlas = None
            # Its line named the map before (another model's, after a model switch).
            self.view.status_label.setText("")
            self.view.set_choices(self.view.layer_combo, (), None)
            # A scan whose embeddings were over the memory budget says so.
            notes = [str(n) for n in getattr(scan, "warnings", ()) or ()]
            why = [n for n in notes if n.startswith(NO_ATLAS_NOTE)]
            why += ["The scan has no embeddings: scan the dataset again (Data > Scan a dataset…)"]
            self.view.show_empty(EMPTY_TEXT if scan is None else why[0])
            return
        self.logits = classifier_layer(scan, self.session.categories)
        # A layer other than the classifier is the more telling map; the one shown stays.
        mapped = [n for n in layers if n != self.logits] or list(layers)
        v, saved = self.view, self._restoring
        current = v.layer_combo.currentText()
        keep = current if current in layers else mapped[-1]
        if saved is not None and saved.get("layer") in layers:
            # The saved layer, method and colouring (chosen without rebuilding).
            keep, colour = str(saved["layer"]), str(saved.get("colour"))
            method = str(saved.get("method", "")).upper()
            for combo, text in ((v.method_combo, method), (v.colour_combo, colour)):
                if combo.findText(text) >= 0:
                    with QSignalBlocker(combo):
                        combo.setCurrentText(text)
            v.channel_spin.setEnabled(v.colour_combo.currentText() == "Channel")
        v.set_choices(v.layer_combo, layers, keep)
        self.rebuild()

    def rebuild(self) -> Job | None:
        """Fit the chosen layer's map in the background; the job (None: nothing, or shown now)."""
        scan, layer = self.session.scan, self.view.layer_combo.currentText()
        if scan is None or not layer:
            return None
        method, logits = self.view.method_combo.currentText().lower() or "pca", self.logits
        fitted = self._fitted.get((layer, method, logits))
        if fitted is not None and fitted.scan is scan:
            self.worker.drop()  # Fitted before: at once (not behind a UMAP fit still running).
            self._on_built(fitted)
            return None
        text = f"Atlas: mapping {layer} ({method.upper()}, {scan.count:,} images)…"
        self.view.status_label.setText(text)
        self.host.show_status(text)
        job = self.worker.submit(
            lambda _stop, _progress: build_atlas(scan, layer, method=method, logits=logits)
        ).on(finished=self._on_built, failed=self._on_build_failed)
        job.finished.connect(self.fitted.emit)
        return job

    def _on_built(self, atlas: Any) -> None:
        if atlas.scan is not self.session.scan:
            return
        self._fitted[(atlas.layer, atlas.projection.method, self.logits)] = atlas
        self.atlas = atlas
        # A session's map being restored: this one, if it is of the saved scan and layer.
        saved = self._restoring
        if saved and (saved.get("layer") != atlas.layer or not made_of(saved, atlas.scan)):
            saved = None
        spin = self.view.channel_spin
        with QSignalBlocker(spin):
            spin.setMaximum(max(int(atlas.embeddings.vectors.shape[1]) - 1, 0))
            if saved is not None and as_int(saved.get("channel")) is not None:
                spin.setValue(int(saved["channel"]))
        self.view.set_coords(atlas.coords, self._colouring())
        # The image last pointed at was a dot of the map before (another layer's, scan's).
        self.view.hover_label.setText(HOVER_HINT)
        self.hover_text = ""
        self.view.show_map()
        text = map_summary(atlas)
        self.view.status_label.setText(text)
        self.host.show_status(f"Atlas ready: {text}")
        rows: list[int | None] = []
        if saved is not None:
            self._restoring = None
            row_of = rows_of(atlas)
            rows = [row_of.get(i) for i in map(as_int, saved.get("selection") or ())]
        self.select_rows([r for r in rows if r is not None])  # the saved selection, else none
        self._on_result()

    def _on_build_failed(self, error: BaseException) -> None:
        self.view.status_label.setText("")
        self.host.show_error(f"The atlas could not be made: {error}", "atlas")

    def _colouring(self) -> Any:
        atlas, mode = self.atlas, self.view.colour_combo.currentText()
        channel = atlas.channel(self.view.channel_spin.value()) if mode == "Channel" else None
        return colouring(
            mode,
            len(atlas.coords),
            labels=atlas.embeddings.labels,
            class_names=atlas.embeddings.class_names,
            predictions=atlas.predictions,
            categories=self.session.categories,
            channel_values=channel,
        )

    def _on_result(self) -> None:
        # A hidden map places no live frame; the last one once it shows.
        if self.host.current_tab() is not self.view:
            self._result_pending = True
            return
        self._result_pending = False
        atlas, capture = self.atlas, getattr(self.session.result, "capture", None)
        if atlas is None:
            return
        emb, why = atlas.embeddings, "run an input"
        try:
            vector = None if capture is None else query_vector(capture, atlas.layer, emb.axis)
        except (KeyError, ValueError, TypeError, IndexError):
            vector, why = None, f"tick {atlas.layer} to place the input on the map"
        if vector is None or vector.shape[-1] != emb.vectors.shape[1]:
            self._show_input(None, (), why)
            return
        xy = atlas.projection.transform(vector)
        self._show_input(np.asarray(xy).reshape(-1)[:2], atlas.nearest(vector, NEAREST_K))

    def _show_input(self, xy: np.ndarray | None, nearest: tuple[Any, ...], why: str = "") -> None:
        in_view = self.view.set_marker(xy)
        self.nearest = tuple(nearest)
        row_of = rows_of(self.atlas)
        rows = [row_of.get(int(n.index), -1) for n in self.nearest]
        self.view.mark_rows(self.view.neighbour_dots, [r for r in rows if r >= 0])
        self.view.nearest_strip.clear()
        for r, n in zip(rows, self.nearest, strict=True):
            if r >= 0:
                pixmap = self._thumbs.get(str(n.source))
                self.view.nearest_strip.add(r, f"{n.similarity:.2f}", self._describe(r), pixmap)
        if xy is None:
            title = f"Nearest in the dataset: {why}"
        else:
            far = "" if in_view else f" · {FAR_OFF_MAP}"
            title = f"Nearest in the dataset ({self.atlas.layer}, cosine){far}"
        self.view.nearest_title.setText(title)

    def source(self, row: int) -> str:
        return str(self.atlas.embeddings.sources[row])

    def _describe(self, row: int, *, thumbnail: str | None = None) -> str:
        """HTML naming row ``row``'s image: file, class, prediction (under ``thumbnail``, a URI)."""
        atlas, categories = self.atlas, self.session.categories
        emb = atlas.embeddings
        path = str(emb.sources[row])
        lines = [f"<b>{html.escape(Path(path).name)}</b>", html.escape(path)]
        if emb.labels is not None and emb.class_names and emb.labels[row] >= 0:
            lines.append(f"class: {html.escape(emb.class_names[int(emb.labels[row])])}")
        if atlas.predictions is not None and atlas.predictions[row] >= 0:
            p = int(atlas.predictions[row])
            name = categories[p] if categories and p < len(categories) else str(p)
            lines.append(f"prediction: {html.escape(name)}")
        head = f'<img src="{html.escape(thumbnail)}"><br>' if thumbnail else ""
        return head + "<br>".join(lines)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt name
        """Keep the hovered dot's thumbnail up when the plot's tooltip event comes."""
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            QToolTip.showText(event.globalPos(), self.hover_text, self.view.plot)  # "": hidden
            return True
        return super().eventFilter(watched, event)

    def _on_hovered(self, row: int) -> None:
        self._hovered = row if self.atlas is not None else -1
        if self._hovered < 0:
            self.hover_text = ""
            QToolTip.hideText()
            # Off the dots, the side panel forgets the image (it kept the last one named).
            self.view.hover_label.setText(HOVER_HINT)
            return
        self.view.hover_label.setText(self._describe(row))
        self._show_hover(again=True)

    def _show_hover(self, *, again: bool = False) -> None:
        """The hovered dot's tooltip, with its picture once decoded (off the GUI thread)."""
        row = self._hovered
        if row < 0 or self.atlas is None or not 0 <= row < len(self.atlas.coords):
            return
        uri = self._hover_thumbs.get(self.source(row))
        text = self._describe(row, thumbnail=uri if isinstance(uri, str) else None)
        if again or text != self.hover_text:
            self.hover_text = text
            QToolTip.showText(QCursor.pos(), text, self.view.plot)

    def _open_row(self, row: int) -> None:
        if self.atlas is not None and 0 <= row < len(self.atlas.coords):
            self.host.open_input_source(self.source(row), remember=False)

    def select_rows(self, rows: Any) -> tuple[Any, ...]:
        """Select ``rows``: their thumbnails and the channels that set them apart."""
        if (atlas := self.atlas) is None:
            return ()
        self.selection = rows = np.unique(np.asarray(rows, np.int64))
        self.view.mark_rows(self.view.selected_dots, rows)
        n = len(atlas.coords)
        self.separating = atlas.separating(rows, SEPARATING_K) if 0 < len(rows) < n else ()
        self.view.selection_title.setText(selection_text(atlas, rows))
        self.view.selection_strip.clear()
        for r in map(int, rows[:SELECTION_THUMBS]):
            s = self.source(r)
            self.view.selection_strip.add(r, Path(s).name, self._describe(r), self._thumbs.get(s))
        self.view.channel_list.clear()
        for split in self.separating:
            c = split.channel
            text = f"ch {c}: d {split.score:+.2f} ({split.mean_in:.3g} vs {split.mean_out:.3g})"
            item = QListWidgetItem(text)
            item.setToolTip(
                f"Channel {c} of {atlas.layer}: mean {split.mean_in:.4g} in the selection, "
                f"{split.mean_out:.4g} outside; d = the difference over the pooled standard "
                "deviation. Click: its channel view"
            )
            item.setData(0x0100, int(split.channel))
            self.view.channel_list.addItem(item)
        return self.separating

    def _on_channel_clicked(self, item: QListWidgetItem) -> None:
        if self.atlas is not None:
            self.host.open_channel(self.atlas.layer, int(item.data(0x0100)))

    def _on_thumb_loaded(self, path: str) -> None:
        pixmap = self._thumbs.get(path)
        if self.atlas is not None and pixmap is not None:
            for strip in (self.view.nearest_strip, self.view.selection_strip):
                for i, row in enumerate(strip.keys()):
                    if self.source(row) == path:
                        strip.item(i).setIcon(QIcon(pixmap))

    def session_part(self) -> dict[str, Any]:
        """What a session file keeps of the map: its choices, selection and scan."""
        atlas, v = self.atlas, self.view
        if atlas is None:
            return {}
        key = getattr(atlas.scan, "cache_path", None)
        return {
            "atlas": {
                "layer": atlas.layer,
                "method": atlas.projection.method,
                "colour": v.colour_combo.currentText(),
                "channel": int(v.channel_spin.value()),
                # The selection as image indices in the scan.
                "selection": [int(i) for i in atlas.embeddings.indices[self.selection]],
                "scan_key": str(key) if key else None,
                "images": int(atlas.scan.count),
            }
        }

    def restore_session_part(self, parts: Any) -> None:
        """Put back :meth:`session_part`'s map once the session's scan is shown (not another's)."""
        saved = parts.get("atlas")
        if not isinstance(saved, dict) or not isinstance(saved.get("layer"), str):
            self._restoring = None
            return
        self._restoring = dict(saved)
        scan = self.session.scan
        if scan is not None and made_of(saved, scan) and saved["layer"] in scan.embedding_layers:
            self._on_scan_changed()

    def report_part(self) -> dict[str, Any]:
        """The map as the tab shows it, drawn when the report is written."""
        if (atlas := self.atlas) is None:
            return {}
        colours, mode = self._colouring(), self.view.colour_combo.currentText()
        marker, selection = self.view.marker_position(), self.selection.copy()
        p = atlas.projection
        channel = f"channel {self.view.channel_spin.value()}'s mean activation"
        by = {"Correct": "correctness", "Channel": channel}.get(mode, mode.lower())
        caption = f"Atlas of {atlas.layer}: {len(atlas.coords):,} images ({p.method.upper()})"
        caption += f", coloured by {by}"
        if len(selection):
            caption += f"; {len(selection):,} selected"

        def figures() -> list[tuple[str, Any]]:
            from actviz.data.atlas_image import atlas_image

            picture = atlas_image(
                atlas.coords,
                rgb=colours.rgb(),
                legend=colours.legend,
                colour_bar=None if colours.scale is None else (*colours.scale, colours.palette),
                marker=None if marker is None else np.asarray(marker),
                selected=selection,
            )
            return [(caption, picture)]

        return {"figures": figures}

    def stop(self) -> None:
        """Stop the map's worker (waited for)."""
        self.worker.shutdown()
        self.atlas, self._fitted = None, {}
        self._thumbs.shutdown()
        self._hover_thumbs.shutdown()


def data_uri(image: QImage) -> str:
    """``image`` as a PNG ``data:`` URI, for rich text (a tooltip's picture)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    return "data:image/png;base64," + bytes(data.toBase64().data()).decode("ascii")


def decode_thumb(path: str, side: int) -> QImage | None:
    """``path``'s picture fitted in ``side`` x ``side`` (None: not a readable image)."""
    try:
        from PIL import Image

        with Image.open(path) as im:
            im.draft("RGB", (side, side))  # JPEGs decode at a fraction of their size
            im = im.convert("RGB")
            im.thumbnail((side, side))
            return rgb_image(np.asarray(im))
    except (OSError, ValueError):
        return None


class ThumbCache(QObject):
    """Thumbnails by path: :meth:`get` answers from the cache at once and decodes the rest on
    a thread of its own; ``loaded(path)`` says when one is ready (or failed). ``as_uri``: they
    come as PNG ``data:`` URIs (for rich text), else as pixmaps."""

    loaded = Signal(str)
    _decoded = Signal(str, object)

    def __init__(self, side: int, parent: QObject | None = None, *, as_uri: bool = False) -> None:
        super().__init__(parent)
        self.side, self.as_uri = side, as_uri
        self._made: dict[str, QPixmap | str | None] = {}
        self._pending: set[str] = set()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="atlas-thumbs")
        self._decoded.connect(self._on_decoded)  # queued: emitted on the pool's thread

    def get(self, path: str) -> QPixmap | str | None:
        """The thumbnail if made (None while it decodes or when it cannot be read)."""
        if path in self._made:
            return self._made[path]
        if path not in self._pending:
            self._pending.add(path)
            self._pool.submit(self._decode, path)
        return None

    def _decode(self, path: str) -> None:
        image = decode_thumb(path, self.side)
        self._decoded.emit(path, data_uri(image) if image is not None and self.as_uri else image)

    def shutdown(self) -> None:
        """Drop what is queued and wait for the decode in progress (its picture goes unused)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _on_decoded(self, path: str, made: QImage | str | None) -> None:
        self._pending.discard(path)
        if len(self._made) >= THUMBS_KEPT:
            self._made.clear()
        self._made[path] = QPixmap.fromImage(made) if isinstance(made, QImage) else made
        self.loaded.emit(path)
