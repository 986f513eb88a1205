"""Concepts in the window: a layer panel shows a dictionary's concepts instead of channels.

:class:`ConceptsFeature` attaches through the host only:

* Data > Train concepts… (a dialog; the training runs on a worker of the feature's own, on a
  copy of the model, with progress and Cancel; the dictionary is saved as a SAELens folder
  and, with its data folder, scanned for each concept's top images) and Data > Open
  concepts… (a SAELens folder) attach a dictionary to its layer in the session
  (``session.set_concepts``);
* the tile menu of a layer with a dictionary gets "Show concepts" / "Show channels"; a panel
  showing concepts (``panel_shown``) gets the concepts most active for the input as tiles
  (:func:`actviz.analysis.concepts.tiles.concept_tiles`), and its tile clicks open the
  Concept dock (:class:`~actviz.ui.concepts.view.ConceptView`): the map over the input, a
  name, Remove / Scale (an ``actviz.edits.concept`` edit on the session's edits board: the
  what-if machinery re-runs), the effect on the prediction, top images, "What it wants";
* sessions keep each layer's dictionary folder, the names and the choice; reports show the
  concept tiles of each layer with a dictionary, named.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QFileDialog, QInputDialog, QMenu, QScrollArea

from actviz.ui.concepts.dialog import TrainConceptsDialog, TrainSpec
from actviz.ui.concepts.view import ConceptView
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.loaders import describe_error
from actviz.ui.worker import Worker

log = logging.getLogger(__name__)

__all__ = ["ConceptsFeature"]

#: Width of the Concept dock.
DOCK_WIDTH = 360
#: Top images kept per concept by the scan made after training.
TOP_K = 6
#: Steps of "What it wants" (a quick picture; the Visualize tab makes finer ones).
WANTS_STEPS = 96


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return (
        f", about {max(1, round(seconds))} s left"
        if seconds < 90
        else (f", about {round(seconds / 60)} min left")
    )


def progress_text(p: Any) -> str:
    """A :class:`~actviz.analysis.concepts.TrainProgress` in words: "Collecting vectors: 12 of
    40 images, 3,072 vectors seen, about 4 s left." / "Training: epoch 2, step 30 of 75,
    6,144 vectors seen, FVU so far 0.31, about 9 s left."."""
    if p.stage == "collect":
        return (
            f"Collecting vectors: {p.done} of {p.total} images, {p.vectors:,} vectors seen"
            f"{_duration(p.eta_s)}."
        )
    fvu = f", FVU so far {p.fvu:.3f}" if p.fvu is not None else ""
    return (
        f"Training: epoch {p.epoch}, step {p.done} of {p.total}, {p.vectors:,} vectors seen"
        f"{fvu}{_duration(p.eta_s)}."
    )


class _Handover(QObject):
    """From a worker's thread to the GUI thread, whatever the worker thinks of the job."""

    progressed = Signal(object)


class ConceptsFeature(FeatureBase, QObject):
    """Dictionaries of concepts on layers: trained, opened, shown, edited (see the module doc).

    Parameters
    ----------
    host
        The window.
    """

    name = "concepts"

    def __init__(self, host: WindowHost) -> None:
        QObject.__init__(self, host.dialog_parent())
        self.host = host
        self.session = host.session
        #: Training and concept scans (a copy of the model each).
        self.worker = Worker(self)
        #: The concept view's jobs (effect, top images, what it wants) on one shared copy.
        self.view_worker = Worker(self)
        #: The concept tiles each panel shows now (``{layer: ConceptTiles}``).
        self.tiles: dict[str, Any] = {}
        #: The Train concepts dialog (made on first use).
        self.dialog: TrainConceptsDialog | None = None
        #: The tile menu of a concept tile shown last (tests trigger its actions).
        self.menu: QMenu | None = None
        #: Asks for a folder (tests replace it): ``(title, start) -> folder or ""``.
        self.ask_folder = lambda title, start="": QFileDialog.getExistingDirectory(
            host.dialog_parent(), title, start
        )
        self._train_gen: int | None = None
        self._copying = False  # a training waits for its copy of the model
        self._train_spec: TrainSpec | None = None
        self._train_progress: Any = None
        self._train_began = 0.0
        self._view_copy: tuple[Any, Any] | None = None  # (session model, its copy)
        self._view_gens: dict[int, str] = {}
        self._closed = False
        self._handover = _Handover(self)
        self._handover.progressed.connect(self._on_train_progressed)

        self.view = ConceptView()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.view)
        self.dock = QDockWidget("Concept", host.dialog_parent())
        self.dock.setObjectName("ConceptDock")
        self.dock.setWidget(scroll)
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=DOCK_WIDTH)

        self.train_action = QAction("Train concepts…", self)
        self.train_action.setToolTip(
            "Learn a dictionary of concepts (a sparse autoencoder) on a layer's activations"
        )
        self.train_action.triggered.connect(self.open_train_dialog)
        host.add_menu_action("Data", self.train_action, shortcut=False)
        self.open_action = QAction("Open concepts…", self)
        self.open_action.setToolTip("Open a dictionary saved as a SAELens folder")
        self.open_action.triggered.connect(self._on_open_triggered)
        host.add_menu_action("Data", self.open_action, shortcut=False)

        self.view.remove_requested.connect(lambda: self.edit_shown(0.0))
        self.view.scale_requested.connect(self.edit_shown)
        self.view.name_edited.connect(self._on_name_edited)
        self.view.wants_requested.connect(self.what_it_wants)
        self.view.top_requested.connect(self._on_top_requested)
        host.add_tile_menu_entries(self._fill_tile_menu)
        host.panel_created.connect(self._on_panel_created)
        host.panel_shown.connect(self._on_panel_shown)
        for name, panel in host.layer_panels.items():
            self._on_panel_created(name, panel)
        self.session.concepts_changed.connect(self._on_concepts_changed)
        self.session.model_changed.connect(self._on_model_changed)
        self.session.result_changed.connect(self._on_result_changed)
        for w in (self.worker, self.view_worker):
            w.signals.finished.connect(self._on_worker_finished)
            w.signals.errored.connect(self._on_worker_errored)
            w.signals.cancelled.connect(self._on_worker_cancelled)

    # ------------------------------------------------------------------ attaching
    def attach(
        self, layer: str, concepts: Any, *, folder: str = "", data: str = "", scan: Any = None
    ) -> None:
        """Attach ``concepts`` to ``layer`` and show the layer's panel as concepts."""
        from actviz.workspace.concepts import AttachedConcepts

        old = self.session.concepts.get(layer)
        names = old.names if old is not None and old.concepts.d_sae == concepts.d_sae else {}
        self.session.set_concepts(
            layer, AttachedConcepts(concepts, str(folder), names, True, scan, str(data))
        )

    def open_folder(self, folder: str, layer: str | None = None) -> bool:
        """Open a SAELens folder and attach it to ``layer`` (None: the layer its hook names);
        False (and a message) when it cannot be."""
        from actviz.analysis.concepts.hooks import resolve_hook
        from actviz.analysis.concepts.model import load

        try:
            concepts = load(folder)
            model = self.session.model
            if layer is None:
                if model is None:
                    raise ValueError("open a model first")
                point = resolve_hook(model, concepts.hook_name)
                if point.side != "output":
                    raise ValueError(
                        f"{concepts.hook_name!r} reads the input of {point.module!r}; tick the "
                        "module before it (only layer outputs are shown as concepts)"
                    )
                layer = point.module
        except (OSError, ValueError, KeyError) as exc:
            self.host.show_error(f"Could not open the concepts in {folder}: {describe_error(exc)}")
            return False
        tree = self.session.tree
        if tree is None or layer not in tree:
            self.host.show_error(
                f"The concepts in {folder} read {layer!r}, not a layer of this model"
            )
            return False
        self.attach(layer, concepts, folder=str(folder))
        result = self.session.result
        if not self.session.is_ticked(layer):
            self.session.set_ticked([layer])  # its panel comes with the next run
        if result is None or result.capture is None or layer not in result.capture:
            self.host.schedule_run()
        self.host.show_status(f"Opened {concepts.d_sae} concepts on {layer}")
        return True

    def _on_open_triggered(self) -> None:
        folder = self.ask_folder("Open concepts (a SAELens folder)")
        if folder:
            self.open_folder(folder)

    def set_shown(self, layer: str, shown: bool) -> None:
        """Show ``layer``'s panel as concepts (True) or channels."""
        att = self.session.concepts.get(layer)
        if att is not None and att.shown != bool(shown):
            self.session.set_concepts(layer, att.replaced(shown=bool(shown)))

    def name_concept(self, layer: str, concept: int, name: str) -> None:
        """Give concept ``concept`` of ``layer`` a name (kept in the session)."""
        att = self.session.concepts.get(layer)
        if att is not None and att.names.get(int(concept), "") != name.strip():
            self.session.set_concepts(layer, att.named(concept, name))

    def _on_concepts_changed(self, layer: str) -> None:
        if self._closed:
            return
        if layer not in self.session.concepts:
            self.tiles.pop(layer, None)
            if self.view.shown is not None and self.view.shown[0] == layer:
                self.view.clear()
        self.host.refresh_panel(layer)
        shown = self.view.shown
        if shown is not None and shown[0] == layer:
            self._fill_view(*shown, jobs=False)

    # ------------------------------------------------------------------ panels
    def _on_panel_created(self, _name: str, panel: Any) -> None:
        panel.tile_clicked.connect(self.open_concept)
        panel.tiles_context_requested.connect(self._on_tiles_context_requested)

    def _on_panel_shown(self, name: str, panel: Any, _layer: Any) -> None:
        from actviz.analysis.concepts.tiles import concept_tiles

        att = self.session.concepts.get(name)
        result = self.session.result
        if att is None or not att.shown or result is None or result.capture is None:
            self.tiles.pop(name, None)
            panel.set_tile_unit("")
            return
        try:
            tiles = concept_tiles(
                att.concepts,
                result.capture,
                name,
                sample=result.spec.sample,
                page=self.host.page_channels(name),
                normalize=self.session.normalize,
            )
        except (ValueError, KeyError) as exc:
            self.tiles.pop(name, None)
            panel.set_tile_unit("")
            self.host.show_warning(f"Concepts of {name}: {exc}", "concepts")
            return
        self.tiles[name] = tiles
        panel.set_tile_unit("concept")
        panel.set_activation(tiles.view, tiles.mosaic)
        panel.set_gradient(None, None)

    def _fill_tile_menu(self, menu: QMenu, layer: str, _channels: tuple[int, ...]) -> None:
        """The channel tile menu's "Show concepts" (with a dictionary: else how to get one)."""
        att = self.session.concepts.get(layer)
        action = menu.addAction("Show concepts")
        if att is None:
            action.setEnabled(False)
            action.setToolTip("Train concepts or open some first (Data > Train concepts…)")
            return
        action.setToolTip(
            f"Show the {att.concepts.d_sae} concepts of this layer, most active first"
        )
        action.triggered.connect(lambda: self.set_shown(layer, True))

    def _on_tiles_context_requested(self, layer: str, concepts: list, pos: QPoint) -> None:
        self.menu = self.concept_menu(layer, [int(c) for c in concepts])
        self.menu.popup(pos)

    def concept_menu(self, layer: str, concepts: list[int]) -> QMenu:
        """The menu of a right click on concept tiles (built, not shown)."""
        from actviz.analysis.concepts.tiles import concept_label

        att = self.session.concepts.get(layer)
        names = att.names if att is not None else {}
        what = (
            concept_label(concepts[0], names) if len(concepts) == 1 else f"{len(concepts)} concepts"
        )
        menu = QMenu(self.host.dialog_parent())
        menu.setToolTipsVisible(True)
        menu.addSection(f"{layer} · {what}")
        if len(concepts) == 1:
            menu.addAction("Open concept", lambda: self.open_concept(layer, concepts[0]))
        menu.addAction(f"Remove {what}", lambda: self.add_edit(layer, concepts, 0.0)).setToolTip(
            "Subtract the concepts' contribution from the layer's output and run again"
        )
        menu.addAction(f"Scale {what}…", lambda: self._ask_and_scale(layer, concepts))
        if len(concepts) == 1:
            menu.addAction("Name…", lambda: self._ask_name(layer, concepts[0]))
        menu.addSeparator()
        menu.addAction("Show channels", lambda: self.set_shown(layer, False)).setToolTip(
            "Show this layer's channels again (the dictionary stays)"
        )
        return menu

    def _ask_and_scale(self, layer: str, concepts: list[int]) -> None:
        value, ok = QInputDialog.getDouble(
            self.host.dialog_parent(), "Scale concepts", "Multiply their contribution by:", 2.0,
            -1e6, 1e6, 3,
        )  # fmt: skip
        if ok:
            self.add_edit(layer, concepts, float(value))

    def _ask_name(self, layer: str, concept: int) -> None:
        att = self.session.concepts.get(layer)
        old = att.names.get(concept, "") if att is not None else ""
        text, ok = QInputDialog.getText(
            self.host.dialog_parent(), "Name the concept", f"Concept {concept}:", text=old
        )
        if ok:
            self.name_concept(layer, concept, text)

    # ------------------------------------------------------------------ edits
    def add_edit(self, layer: str, concepts: list[int], scale: float) -> None:
        """Remove (``scale`` 0) or scale ``concepts`` of ``layer``: an edit on the session's
        edits board (the window runs again with it)."""
        from actviz.analysis.concepts.tiles import concept_label
        from actviz.core import edits as E

        att = self.session.concepts.get(layer)
        if att is None:
            return
        try:
            edit = E.concept(att.concepts, list(concepts), float(scale))
        except (TypeError, ValueError) as exc:
            self.host.show_error(f"Could not make the edit: {exc}")
            return
        note = ", ".join(concept_label(c, att.names) for c in concepts)
        self.session.edits.add(layer, edit, note)
        self.host.schedule_run()

    def edit_shown(self, scale: float) -> None:
        """Remove / Scale the concept the Concept dock shows."""
        if self.view.shown is not None:
            layer, concept = self.view.shown
            self.add_edit(layer, [concept], scale)

    # ------------------------------------------------------------------ the concept view
    def open_concept(self, layer: str, concept: int) -> bool:
        """Show concept ``concept`` of ``layer`` in the Concept dock (its map over the input,
        its effect on the prediction, its top images); False when the layer shows no concepts."""
        if layer not in self.tiles or not 0 <= concept < self.tiles[layer].peaks.shape[0]:
            return False
        self._fill_view(layer, concept, jobs=True)
        self.dock.show()
        self.dock.raise_()
        return True

    def _fill_view(self, layer: str, concept: int, *, jobs: bool) -> None:
        from actviz.analysis.concepts.tiles import concept_picture

        tiles = self.tiles.get(layer)
        att = self.session.concepts.get(layer)
        result = self.session.result
        if tiles is None or att is None or concept >= tiles.peaks.shape[0]:
            return
        m = tiles.view.data[concept]
        fired = int((m > 0).sum())
        rank = tiles.order.index(concept) + 1 if concept in tiles.order else None
        where = f"{rank} of {tiles.active} firing" if rank and tiles.active else "not firing"
        stats = (
            f"peak {float(tiles.peaks[concept]):.4g} · fires at {fired} of {m.size} positions "
            f"· {where} on this input"
        )
        if att.scan is not None:
            stats += f" · fires on {100 * float(att.scan.image_rate[concept]):.0f}% of images"
        image = result.image if result is not None else None
        self.view.set_concept(
            layer,
            concept,
            concept_picture(image, m),
            name=att.names.get(concept, ""),
            stats=stats,
            concepts=int(att.concepts.d_sae),
        )
        self.view.top_button.setVisible(att.scan is None)
        if jobs:
            self._start_view_jobs(layer, concept)

    def _on_name_edited(self, text: str) -> None:
        if self.view.shown is not None:
            self.name_concept(*self.view.shown, text)

    def _on_result_changed(self) -> None:
        shown = self.view.shown
        if shown is not None and not self._closed:
            # The panels' tiles are made as they are shown; the view follows the new input.
            QTimer.singleShot(0, self, lambda: self._refresh_view(shown))

    def _refresh_view(self, shown: tuple[str, int]) -> None:
        if self.view.shown == shown and shown[0] in self.tiles:
            self._fill_view(*shown, jobs=False)
            self._start_effect(*shown)

    # ------------------------------------------------------------------ model copies
    def _copy_model(self) -> Any:
        """A copy of the session's model made now, on the GUI thread, while the capture
        worker runs nothing (so no capture's hooks are copied); None while it is busy."""
        model = self.session.model
        if model is None or self.host.worker.is_busy():
            return None
        clone = copy.deepcopy(model)
        clone.eval()
        return clone

    def _engine_model(self, clone: Any) -> Any:
        """``clone`` with the opened model's preprocessing (what the data engines read)."""
        import dataclasses

        loaded = self.session.loaded_model
        if loaded is not None and loaded.model is self.session.model:
            return dataclasses.replace(loaded, model=clone)
        return clone

    def _with_copy(self, then: Any, tries: int = 200, *, training: bool = False) -> None:
        """``then(copy)`` as soon as the capture worker is idle (polled every 50 ms)."""
        if self._closed or (training and not self._copying):
            return
        clone = self._copy_model()
        if clone is not None:
            then(clone)
        elif tries > 0 and self.session.model is not None:
            QTimer.singleShot(
                50, self, lambda: self._with_copy(then, tries - 1, training=training)
            )
        elif training:
            self._copying = False
            self._end_training("Training did not start: the model is busy.", error=True)

    def _view_model(self, then: Any) -> None:
        held = self._view_copy
        if held is not None and held[0] is self.session.model:
            then(held[1])
            return

        def keep(clone: Any) -> None:
            self._view_copy = (self.session.model, clone)
            then(clone)

        self._with_copy(keep)

    def _on_model_changed(self) -> None:
        self._view_copy = None
        self.tiles.clear()
        self.view.clear()
        self.view_worker.drop()

    # ------------------------------------------------------------------ view jobs
    def _start_view_jobs(self, layer: str, concept: int) -> None:
        self._start_effect(layer, concept)
        att = self.session.concepts.get(layer)
        if att is not None and att.scan is not None:
            self._start_top(layer, concept)
        elif att is not None:
            self.view.set_top([], "No concept scan yet: find its top images in a folder.")

    def _submit_view(self, kind: str, job: Any, supersede: bool = False) -> None:
        gen = self.view_worker.submit(job, supersede=supersede)
        self._view_gens[gen] = kind

    def _start_effect(self, layer: str, concept: int) -> None:
        from actviz.analysis.concepts.tiles import concept_effect

        att = self.session.concepts.get(layer)
        result = self.session.result
        if att is None or result is None or result.capture is None:
            return
        inputs = result.capture.inputs
        edits = {k: v for k, v in (result.capture.edits or {}).items()}
        target = self.session.run_target
        concepts = att.concepts
        self.view.set_effect("Measuring its effect on the prediction…")

        def run(clone: Any) -> None:
            def job(_stop: Any, _report: Any) -> Any:
                return (layer, concept), concept_effect(
                    clone, inputs, concepts, layer, concept, target=target, edits=edits
                )

            self._submit_view("effect", job, supersede=True)

        self._view_model(run)

    def _start_top(self, layer: str, concept: int) -> None:
        from actviz.analysis.concepts.scan import top_heatmaps
        from actviz.analysis.concepts.sheet import overlay

        att = self.session.concepts.get(layer)
        if att is None or att.scan is None:
            return
        concepts, scan = att.concepts, att.scan
        self.view.set_top([], "Reading its top images…")

        def run(clone: Any) -> None:
            model = self._engine_model(clone)

            def job(_stop: Any, _report: Any) -> Any:
                shown = top_heatmaps(model, concepts, scan, concept)
                return (layer, concept), [overlay(p, h) for _, p, h in shown], scan

            self._submit_view("top", job)

        self._view_model(run)

    def what_it_wants(self) -> None:
        """Synthesise what the concept shown wants: the picture that maximises its decoder
        direction at the layer (:func:`actviz.analysis.visualize.visualize`, a direction
        objective), on the view's copy of the model."""
        from actviz.analysis.visualize import visualize

        if self.view.shown is None:
            return
        layer, concept = self.view.shown
        att = self.session.concepts.get(layer)
        if att is None:
            return
        direction = att.concepts.W_dec[concept].clone()
        self.view.set_wants(None, "Synthesising what it wants…")

        def run(clone: Any) -> None:
            model = self._engine_model(clone)

            def job(stop: Any, _report: Any) -> Any:
                vis = visualize(
                    model, layer, [0], objective=direction, steps=WANTS_STEPS, size=96,
                    should_stop=stop,
                )  # fmt: skip
                return (layer, concept), np.asarray(vis.images[0])

            self._submit_view("wants", job)

        self._view_model(run)

    def _on_top_requested(self) -> None:
        if self.view.shown is None:
            return
        layer, _ = self.view.shown
        att = self.session.concepts.get(layer)
        folder = self.ask_folder(
            "Images to find the concept's top images in", att.data if att else ""
        )
        if folder and att is not None:
            self.scan_folder(layer, folder)

    def scan_folder(self, layer: str, folder: str) -> None:
        """Scan ``folder`` for the top images of every concept of ``layer`` (in the
        background; the concept view shows them when done)."""
        from actviz.analysis.concepts.scan import scan_concepts

        att = self.session.concepts.get(layer)
        if att is None:
            return
        concepts = att.concepts
        self.view.set_top([], f"Scanning {folder} for the concepts' top images…")

        def run(clone: Any) -> None:
            model = self._engine_model(clone)

            def job(stop: Any, _report: Any) -> Any:
                return (
                    layer,
                    folder,
                    scan_concepts(model, folder, concepts, layer, k=TOP_K, should_stop=stop),
                )

            gen = self.worker.submit(job, supersede=False)
            self._view_gens[gen] = "scan"

        self._with_copy(run)

    # ------------------------------------------------------------------ training
    def open_train_dialog(self) -> TrainConceptsDialog:
        """Data > Train concepts…: the dialog (made on first use, shown)."""
        if self.dialog is None:
            tree = self.session.tree
            ticked = self.session.ticked
            layers = list(ticked) if ticked else (list(tree.leaves()) if tree is not None else [])
            selected = self.host.selected_layer
            channels = 64
            result = self.session.result
            if result is not None and selected in result.layers:
                shape = result.layers[selected].shape
                channels = int(shape[1]) if shape and len(shape) > 1 else channels
            self.dialog = TrainConceptsDialog(
                self.host.dialog_parent(),
                layers,
                layer=selected,
                out="",
                channels=channels,
            )
            self.dialog.train_requested.connect(self.train)
            self.dialog.cancel_requested.connect(self.cancel)
        self.dialog.show()
        self.dialog.raise_()
        return self.dialog

    def _default_out(self, spec: TrainSpec) -> str:
        from actviz.data.cache import cache_root

        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = spec.layer.replace("/", "_") or "model"
        model = (self.session.model_name or "model").replace("/", "_")
        return str(cache_root() / "concepts" / f"{model}-{safe}-{spec.n_concepts}-{stamp}")

    def train(self, spec: TrainSpec) -> None:
        """Train a dictionary as ``spec`` says, in the background (the dialog shows where it
        is); it is saved, scanned on the data for top images and attached to its layer."""
        from actviz.analysis.concepts.scan import scan_concepts
        from actviz.analysis.concepts.train import train

        dialog = self.dialog
        if self.training():
            return
        self._copying = True
        if not spec.out:
            spec = TrainSpec(**{**spec.__dict__, "out": self._default_out(spec)})
            if dialog is not None:
                dialog.out_edit.setText(spec.out)
        handover = self._handover

        def run(clone: Any) -> None:
            model = self._engine_model(clone)

            def job(stop: Any, report: Any) -> Any:
                def said(p: Any) -> None:
                    handover.progressed.emit(p)

                concepts = train(
                    spec.data, spec.layer, model=model, n_concepts=spec.n_concepts, k=spec.k,
                    epochs=spec.epochs, progress=said, should_stop=stop, seed=0,
                )  # fmt: skip
                concepts.save(spec.out)
                found = scan_concepts(
                    model, spec.data, concepts, spec.layer, k=TOP_K, should_stop=stop
                )
                return spec, concepts, found

            self._copying = False
            self._train_spec = spec
            self._train_began = time.monotonic()
            self._train_gen = self.worker.submit(job, supersede=False)
            self.host.refresh_busy(f"Training concepts on {spec.layer}…")

        if dialog is not None:
            dialog.set_busy(True)
            dialog.set_message("Copying the model…")
        self._with_copy(run, training=True)

    def _on_train_progressed(self, p: Any) -> None:
        self._train_progress = p
        if self.dialog is not None and self._train_gen is not None:
            self.dialog.set_progress(p.done, p.total)
            self.dialog.set_message(progress_text(p))

    def is_busy(self) -> bool:
        return self.training()

    def training(self) -> bool:
        """Whether a training runs now (or waits for its copy of the model)."""
        return self._train_gen is not None or self._copying

    def cancel(self) -> bool:
        """Cancel the training (Esc, or the dialog's Cancel)."""
        if self._copying and self._train_gen is None:
            self._copying = False
            self._end_training("Training cancelled before it began.", error=True)
            return True
        if self._train_gen is None:
            return False
        self.worker.cancel(self._train_gen)
        return True

    def _end_training(self, text: str, *, error: bool) -> None:
        self._train_gen = None
        if self.dialog is not None:
            self.dialog.set_busy(False)
            self.dialog.set_message(text, error=error)
        self.host.refresh_busy(text)

    # ------------------------------------------------------------------ worker signals
    def _on_worker_finished(self, gen: int, value: Any) -> None:
        if self._closed:
            return
        if gen == self._train_gen:
            spec, concepts, found = value
            fvu = concepts.heldout_fvu
            fvu_text = f"held-out FVU {fvu:.3f}, " if fvu is not None else ""
            seen = int(concepts.info.get("vectors_seen", 0))
            text = (
                f"Trained {concepts.d_sae} concepts on {seen:,} vectors of {spec.layer}: "
                f"{fvu_text}L0 {concepts.l0 or 0:.1f}, dead {100 * (concepts.dead_fraction or 0):.0f}%"
                f"; saved in {spec.out}."
            )
            self._end_training(text, error=False)
            self.attach(spec.layer, concepts, folder=spec.out, data=spec.data, scan=found)
            self.host.schedule_run()
            return
        kind = self._view_gens.pop(gen, None)
        if kind == "scan":
            layer, folder, found = value
            att = self.session.concepts.get(layer)
            if att is not None:
                self.session.set_concepts(layer, att.replaced(scan=found, data=folder))
                shown = self.view.shown
                if shown is not None and shown[0] == layer:
                    self._start_top(*shown)
            return
        if kind is None or value is None:
            return
        where = value[0]
        if where != self.view.shown:
            return  # another concept is shown now
        if kind == "effect":
            self.view.set_effect(self._effect_text(value[1]))
        elif kind == "top":
            pictures, scan = value[1], value[2]
            self.view.set_top(
                pictures,
                f"Its top {len(pictures)} of {scan.count} images (the red tint: where it fires)",
            )
        elif kind == "wants":
            self.view.set_wants(
                value[1], "What it wants: the picture that drives its direction most"
            )

    def _effect_text(self, effect: Any) -> str:
        if effect is None:
            return "Effect on the prediction: the model does not output class scores."
        cats = self.session.categories or []
        name = f" ({cats[effect.target]})" if effect.target < len(cats) else ""
        top = ""
        if effect.top_after != effect.target:
            top = f"; the top class becomes {effect.top_after}"
        return (
            f"Removing it: class {effect.target}{name} {100 * effect.p_before:.1f} % → "
            f"{100 * effect.p_after:.1f} % ({100 * effect.dp:+.1f} pp; logit "
            f"{effect.logit_before:.3g} → {effect.logit_after:.3g}){top}."
        )

    def _on_worker_errored(self, gen: int, error: BaseException) -> None:
        if self._closed:
            return
        if gen == self._train_gen:
            log.info("training concepts failed: %s", error)
            self._end_training(f"Training failed: {describe_error(error)}", error=True)
            return
        kind = self._view_gens.pop(gen, None)
        if kind == "effect":
            self.view.set_effect(f"Effect not measured: {describe_error(error)}")
        elif kind in ("top", "scan"):
            self.view.set_top([], f"Top images not found: {describe_error(error)}")
        elif kind == "wants":
            self.view.set_wants(None, f"What it wants is not available: {describe_error(error)}")

    def _on_worker_cancelled(self, gen: int) -> None:
        if self._closed:
            return
        if gen == self._train_gen:
            p = self._train_progress
            done = f" ({progress_text(p)[:-1]})" if p is not None else ""
            self._end_training(f"Training cancelled{done}.", error=True)
            return
        self._view_gens.pop(gen, None)

    # ------------------------------------------------------------------ sessions and reports
    def session_part(self) -> dict[str, Any]:
        """Each layer's dictionary: its folder (the weights stay there), names and choice."""
        saved = {layer: att.to_json() for layer, att in self.session.concepts.items() if att.folder}
        return {"concepts": saved} if saved else {}

    def restore_session_part(self, parts: Any) -> list[str]:
        """Attach a session's dictionaries again (read from their folders); returns what could
        not be (also said in the banner)."""
        from actviz.analysis.concepts.model import load
        from actviz.workspace.concepts import AttachedConcepts

        saved = parts.get("concepts") or {}
        for layer in list(self.session.concepts):
            if layer not in saved:
                self.session.set_concepts(layer, None)
        notes = []
        tree = self.session.tree
        for layer, entry in saved.items() if isinstance(saved, dict) else ():
            folder = str((entry or {}).get("folder", ""))
            if tree is None or layer not in tree:
                notes.append(f"concepts of {layer}: no such layer")
                continue
            try:
                concepts = load(folder)
            except (OSError, ValueError) as exc:
                notes.append(f"concepts of {layer} not restored: {exc}")
                continue
            names = {int(k): str(v) for k, v in (entry.get("names") or {}).items()}
            att = AttachedConcepts(
                concepts, folder, names, bool(entry.get("shown", True)), None,
                str(entry.get("data", "")),
            )  # fmt: skip
            self.session.set_concepts(layer, att)
        if notes:
            self.host.show_warning("; ".join(notes), "concepts")
        return notes

    def report_part(self) -> dict[str, Any]:
        """File > Export report: each layer's concept tiles for this input, the dictionary
        named (its folder, size, k, held-out FVU) and the named concepts listed."""
        from actviz.analysis.concepts.tiles import concept_label
        from actviz.display.colormaps import colorize

        figures = []
        for layer, att in self.session.concepts.items():
            tiles = self.tiles.get(layer)
            if tiles is None:
                continue
            c = att.concepts
            fvu = f", held-out FVU {c.heldout_fvu:.3f}" if c.heldout_fvu is not None else ""
            k = f", k = {c.k}" if c.k is not None else ""
            top = ", ".join(concept_label(i, att.names) for i in tiles.mosaic.tile_channels[:8])
            caption = (
                f"Concepts of {layer}: {c.d_sae} concepts ({c.architecture}{k}{fvu}) from "
                f"{att.folder or 'memory'}; {tiles.active} fire on this input, most active: {top}"
            )
            figures.append((caption, colorize(tiles.mosaic.image)))
        return {"figures": figures} if figures else {}

    # ------------------------------------------------------------------ shutdown
    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.session.concepts_changed.disconnect(self._on_concepts_changed)
        self.session.model_changed.disconnect(self._on_model_changed)
        self.session.result_changed.disconnect(self._on_result_changed)
        for w in (self.worker, self.view_worker):
            w.shutdown()
        if self.dialog is not None:
            self.dialog.close()
