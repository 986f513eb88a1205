"""Concepts in the window: Data > Train / Open concepts… attach a dictionary to a layer, whose
panel can show the input's most active concepts as tiles (a click opens the Concept dock).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from PySide6.QtCore import QObject, QPoint, Qt
from PySide6.QtWidgets import QDockWidget, QInputDialog, QMenu

from actviz.ui.background_loads import describe_error
from actviz.ui.concepts import session_parts as parts
from actviz.ui.concepts.dialog import TrainConceptsDialog, TrainSpec
from actviz.ui.concepts.jobs import ConceptJobs
from actviz.ui.concepts.training_job import ConceptTraining
from actviz.ui.concepts.view import ConceptView, concept_stats
from actviz.ui.file_dialogs import open_folder
from actviz.ui.host import FeatureBase, WindowHost
from actviz.ui.panels.style import scroll_area

log = logging.getLogger(__name__)

DOCK_WIDTH = 360  #: Width of the Concept dock.


#: Concepts a text model's token panel shows at most (the firing ones, most active first).
TOKEN_PAGE = 64


class ConceptsFeature(FeatureBase, QObject):
    """Dictionaries of concepts on the ``host`` window's layers: trained, opened, shown, edited."""

    name = "concepts"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        #: The copy of the model the Concept dock's jobs share.
        self.copies = host.private_model(self, to_eval=True)
        #: Data > Train concepts… (its dialog, its worker).
        self.training_ = ConceptTraining(host, self._on_trained, self)
        #: The concept tiles each panel shows now (``{layer: ConceptTiles}``).
        self.tiles: dict[str, Any] = {}
        #: Where each panel's page of concepts starts in its order (its page arrows move it).
        self.pages: dict[str, int] = {}
        #: The tile menu of a concept tile shown last (tests trigger its actions).
        self.menu: QMenu | None = None
        #: Asks for a folder (tests replace it): ``(title, start) -> folder or ""``.
        self.ask_folder = functools.partial(open_folder, host.dialog_parent())
        self._view_stale = False  # a new result: the view's effect is measured again

        self.view = ConceptView()
        #: The view's jobs (effect, top images, what it wants, scans) on one copy.
        self.jobs = ConceptJobs(host, self.copies, self.view, self)
        # Its lines wrap to the dock's width (no sideways scrolling).
        scroll = scroll_area(self.view, wrap=True)
        self.dock = QDockWidget("Concept", host.dialog_parent())
        self.dock.setObjectName("ConceptDock")
        self.dock.setWidget(scroll)
        host.add_dock(self.dock, Qt.DockWidgetArea.RightDockWidgetArea, width=DOCK_WIDTH)

        tip = "Learn a dictionary of concepts (a sparse autoencoder) on a layer's activations"
        self.train_action = host.add_action("Data", "Train concepts…", self.open_train_dialog, tip)
        tip = "Open a dictionary saved as a SAELens folder"
        self.open_action = host.add_action("Data", "Open concepts…", self._on_open_triggered, tip)

        self.view.remove_requested.connect(lambda: self.edit_shown(0.0))
        self.view.scale_requested.connect(self.edit_shown)
        self.view.name_edited.connect(self._on_name_edited)
        self.view.wants_requested.connect(self.jobs.what_it_wants)
        self.view.top_requested.connect(self._on_top_requested)
        host.add_tile_menu_entries(self._fill_tile_menu)
        host.panel_created.connect(self._on_panel_created)
        host.panel_shown.connect(self._on_panel_shown)
        for name, panel in host.layer_panels.items():
            self._on_panel_created(name, panel)
        self.listen(self.session.concepts_changed, self._on_concepts_changed)
        self.listen(self.session.model_changed, self._on_model_changed)
        self.listen(self.session.ticks_changed, self.training_.offer_layers)
        self.listen(self.session.result_changed, self._on_result_changed)

    # ------------------------------------------------------------------ attaching
    def attach(
        self, layer: str, concepts: Any, *, folder: str = "", data: str = "", scan: Any = None
    ) -> None:
        """Attach ``concepts`` to ``layer`` and show the layer's panel as concepts."""
        from actviz.workspace.attached_concepts import AttachedConcepts

        old = self.session.concepts.get(layer)
        names = old.names if old is not None and old.concepts.d_sae == concepts.d_sae else {}
        self.session.set_concepts(
            layer, AttachedConcepts(concepts, str(folder), names, True, scan, str(data))
        )

    def open_folder(self, folder: str, layer: str | None = None) -> bool:
        """Attach a SAELens folder to ``layer`` (None: its hook's); False (said) if it cannot."""
        from actviz.analysis.concepts.dictionary import load
        from actviz.analysis.concepts.hooks import resolve_hook

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
        att, panel = self.session.concepts.get(layer), self.host.layer_panels.get(layer)
        if panel is not None and (att is None or not att.shown):
            # Channels again: remake this result's mosaics (a live frame kept older ones).
            panel.set_tile_unit("")
        self.host.refresh_panel(layer)
        shown = self.view.shown
        if shown is not None and shown[0] == layer:
            self._fill_view(*shown, jobs=False)

    # ------------------------------------------------------------------ panels
    def _on_panel_created(self, _name: str, panel: Any) -> None:
        panel.tile_clicked.connect(self.open_concept)
        panel.page_requested.connect(self._turn_page)
        panel.tiles_context_requested.connect(self._on_tiles_context_requested)

    def _on_panel_shown(self, name: str, panel: Any, layer: Any) -> None:
        from actviz.analysis.concepts.tiles import concept_tiles, concept_token_view

        att = self.session.concepts.get(name)
        if (att is None or not att.shown) and name not in self.tiles and not panel.tile_unit():
            return  # no concepts shown there, none to take off: every live frame comes here
        result = self.session.result
        if att is None or not att.shown or result is None or result.capture is None:
            self.tiles.pop(name, None)
            panel.set_tile_unit("")
            return
        tokens = getattr(layer, "tokens", None)  # a text model's: tokens x a page of concepts
        try:
            tiles = concept_tiles(
                att.concepts,
                result.capture,
                name,
                sample=result.spec.sample,
                page=TOKEN_PAGE if tokens is not None else self.host.page_channels(name),
                normalize=self.session.normalize,
                first=self.pages.get(name, 0),
                layout=result.spec.layout,
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
        if tokens is not None:
            panel.set_tokens(concept_token_view(tiles, tokens))
        self._refresh_view(name)

    def _turn_page(self, name: str, step: int) -> None:
        """A concept panel's page arrows: the previous or next page of its firing concepts."""
        tiles, result = self.tiles.get(name), self.session.result
        if tiles is None or result is None or name not in self.host.layer_panels:
            return  # a panel of channels: the window turns its pages
        first = tiles.mosaic.position + step * tiles.mosaic.page_size
        if 0 <= first < len(tiles.order):
            self.pages[name] = first
            self._on_panel_shown(name, self.host.layer_panels[name], result.layers.get(name))

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
        self.pop_up(self.concept_menu(layer, [int(c) for c in concepts]), pos)

    def concept_menu(self, layer: str, concepts: list[int]) -> QMenu:
        """The menu of a right click on concept tiles (built, not shown)."""
        from actviz.analysis.concepts.tiles import concept_label

        att = self.session.concepts.get(layer)
        names = att.names if att is not None else {}
        what = (
            concept_label(concepts[0], names) if len(concepts) == 1 else f"{len(concepts)} concepts"
        )
        menu = QMenu(self.host.dialog_parent(), toolTipsVisible=True)
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
        unit = (
            "features"
            if getattr(self.host.layer_panels.get(layer), "token_view", 0)
            else "channels"
        )
        menu.addAction(f"Show {unit}", lambda: self.set_shown(layer, False)).setToolTip(
            f"Show this layer's {unit} again (the dictionary stays)"
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
        """Remove (``scale`` 0) or scale ``concepts`` of ``layer`` as an edit, and run again."""
        from actviz.analysis.concepts.tiles import concept_label
        from actviz.core import edit_kinds as E

        att = self.session.concepts.get(layer)
        if att is None:
            return
        try:
            edit = E.concept(att.concepts, list(concepts), float(scale))
        except (TypeError, ValueError) as exc:
            self.host.show_error(f"Could not make the edit: {exc}")
            return
        from actviz.workspace.edits_board import StaleEditError

        note = ", ".join(concept_label(c, att.names) for c in concepts)
        try:
            self.session.edits.add(layer, edit, note)
        except StaleEditError as exc:  # dictionaries go with their model: a slip to say
            self.host.show_error(f"Edit not made: {exc}")
            return
        self.host.schedule_run()

    def edit_shown(self, scale: float) -> None:
        """Remove / Scale the concept the Concept dock shows."""
        if self.view.shown is not None:
            layer, concept = self.view.shown
            self.add_edit(layer, [concept], scale)

    # ------------------------------------------------------------------ the concept view
    def open_concept(self, layer: str, concept: int) -> bool:
        """Show ``concept`` of ``layer`` in the Concept dock; False when it shows no concepts."""
        if layer not in self.tiles or not 0 <= concept < self.tiles[layer].peaks.shape[0]:
            return False
        self._fill_view(layer, concept, jobs=True)
        self.dock.show()
        self.dock.raise_()
        return True

    def _fill_view(self, layer: str, concept: int, *, jobs: bool) -> None:
        from actviz.analysis.concepts.tiles import where_it_fires

        tiles = self.tiles.get(layer)
        att = self.session.concepts.get(layer)
        result = self.session.result
        if tiles is None or att is None or concept >= tiles.peaks.shape[0]:
            return
        image = result.image if result is not None else None
        text = getattr(self.host.layer_panels.get(layer), "token_view", None)  # a text model's
        self.view.set_concept(
            layer,
            concept,
            where_it_fires(tiles.view.data[concept], image, text.tokens if text else None),
            name=att.names.get(concept, ""),
            stats=concept_stats(tiles, att.scan, concept),
            concepts=int(att.concepts.d_sae),
        )
        self.view.top_button.setVisible(att.scan is None)
        if jobs:
            self.jobs.start(layer, concept)
        if text is not None:  # both are pictures: scans and synthesis read images
            self.view.pictures_off()

    def _on_name_edited(self, text: str) -> None:
        if self.view.shown is not None:
            self.name_concept(*self.view.shown, text)

    def _on_result_changed(self) -> None:
        # The view follows the new result once its layer's panel shows it (_on_panel_shown).
        self._view_stale = True

    def _refresh_view(self, layer: str) -> None:
        shown = self.view.shown
        if shown is None or shown[0] != layer or layer not in self.tiles:
            return
        self._fill_view(*shown, jobs=False)
        if self._view_stale:
            self._view_stale = False
            self.jobs.start_effect(*shown)

    # ------------------------------------------------------------------ training
    @property
    def dialog(self) -> TrainConceptsDialog | None:
        """The Train concepts dialog (None until first opened)."""
        return self.training_.dialog

    def open_train_dialog(self) -> TrainConceptsDialog:
        """Data > Train concepts…: the dialog, shown."""
        return self.training_.open_dialog()

    def training(self) -> bool:
        """Whether a training runs now (or waits for its copy of the model)."""
        return self.training_.running()

    def is_busy(self) -> bool:
        return self.training()

    def cancel(self) -> bool:
        """Cancel the training (Esc, or the dialog's Cancel)."""
        return self.training_.cancel()

    def _on_trained(self, spec: TrainSpec, concepts: Any, found: Any) -> None:
        if self._closed:
            return
        self.attach(spec.layer, concepts, folder=spec.out, data=spec.data, scan=found)
        if not self.session.is_ticked(spec.layer):
            self.session.set_ticked([spec.layer])
            self.host.schedule_run()

    def _on_model_changed(self) -> None:
        self.training_.offer_layers()
        self.copies.forget()
        self.tiles.clear()
        self.pages.clear()
        self.view.clear()
        self.jobs.drop()

    def _on_top_requested(self) -> None:
        if self.view.shown is None:
            return
        layer, _ = self.view.shown
        att = self.session.concepts.get(layer)
        folder = self.ask_folder(
            "Images to find the concept's top images in", att.data if att else ""
        )
        if folder and att is not None:
            self.jobs.scan_folder(layer, folder)

    # ------------------------------------------------------------------ sessions and reports
    def session_part(self) -> dict[str, Any]:
        """Each layer's dictionary: its folder (the weights stay there), names and choice."""
        return parts.session_part(self.session)

    def restore_session_part(self, saved: Any) -> list[str]:
        """Attach a session's dictionaries again; what could not be (also in the banner)."""
        notes = parts.restore_session_part(self.session, saved)
        if notes:
            self.host.show_warning("; ".join(notes), "concepts")
        return notes

    def report_part(self) -> dict[str, Any]:
        """File > Export report: each layer's concept tiles for this input, named."""
        return parts.report_part(self.session, self.tiles, self.host.layer_panels)

    # ------------------------------------------------------------------ shutdown
    def stop(self) -> None:
        self.copies.close()
        self.training_.shutdown()
        self.jobs.shutdown()
