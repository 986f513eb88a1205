"""Feature visualisation: "What it wants", the "What channels want" dock and File > Export
visualisations. Synthesis runs on its own worker and model copy (it hooks the model); the
cache is asked on a thread of its own (hashing large weights is slow)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMenu

from actviz.analysis.visualize.feature_vis import visualize
from actviz.analysis.visualize.visualization import Visualization
from actviz.ui.file_dialogs import open_folder
from actviz.ui.host import FeatureBase, FeatureJob, WindowHost
from actviz.ui.visualize.page import STATE_KEY, PageVisualiser
from actviz.ui.visualize.section import WantsSection, read_saved_settings
from actviz.ui.worker import CAPTURE_NICE, Worker

log = logging.getLogger(__name__)


class VisualizeFeature(FeatureBase, QObject):
    """ "What it wants" for the channel view's channel, "What channels want", and their export."""

    name = "visualize"

    def __init__(self, host: WindowHost) -> None:
        super().__init__(host)
        self.channel_view = host.channel_view
        self.section = WantsSection()
        self.section.setVisible(False)
        self.channel_view.add_section(self.section)
        self.shown: Visualization | None = None  #: The visualisation shown (None: none).
        #: Cache look-ups (no model run, no hooks: a thread of their own, newest wins).
        self.lookups = Worker(self, nice=CAPTURE_NICE)
        # Last key asked for: a live frame showing the same channel asks nothing.
        self._asked: tuple[Any, ...] | None = None
        self._pending = False

        self.section.requested.connect(self.synthesise)
        self.section.settings_changed.connect(self._show_cached)
        self.channel_view.channel_changed.connect(self._on_channel_changed)
        #: The synthesis: on :attr:`synth_worker`, on the model's copy (:attr:`copy`).
        self.synth_worker, self.copy = Worker(self, nice=CAPTURE_NICE), host.private_model(self)
        #: Its context: the key it computes.
        self.job = FeatureJob(
            self,
            host,
            self.section,
            failed="Could not synthesise",
            status="What it wants",
            cancelled="Cancelled.",
            log_as="feature visualisation",
            on_finished=self._on_synthesised,
            # The copy goes after each synthesis: a large model is not held twice while idle.
            on_failed=lambda _text: self.copy.forget(),
            worker=self.synth_worker,
            copy=self.copy,
        )
        # The section's Cancel stops its own synthesis only; Esc stops the page too.
        self.section.cancel_requested.connect(self.job.cancel)
        self.listen(self.session.model_changed, self._on_model_changed)
        #: The "What channels want" dock and its background synthesis.
        self.page = PageVisualiser(host, self.section.settings, self.section.settings_menu)
        self.dock = self.page.dock  # reset with the window's layout
        self.dock.export_requested.connect(self.export_dialog)
        self.page.pictures_made.connect(self._on_page_pictures)
        tip = (
            "Synthesise what each channel of the selected layer's page wants (in the "
            "background; the What channels want dock)"
        )
        text = "Visualise channels of the selected layer"
        self.visualise_action = host.add_action("Run", text, self.visualise_selected, tip)
        tip = (
            "Write the pictures shown (channel view and What channels want) as PNGs with "
            "visualize.json, which says how to make them again"
        )
        host.add_action("File", "Export visualisations…", self.export_dialog, tip, before="Quit")
        host.add_tile_menu_entries(self.fill_tile_menu)

    def cancel(self) -> bool:
        """Esc / Cancel: stop the syntheses."""
        page = self.page.cancel()
        return self.job.cancel() or page

    def is_busy(self) -> bool:
        """True while a synthesis runs (or waits for its copy of the model)."""
        return self.is_synthesising() or self.page.is_busy()

    def looking_up(self) -> bool:
        """True while the cache is asked for the channel shown."""
        return self._pending

    def report_part(self) -> dict[str, Any]:
        """The "What it wants" picture and the "What channels want" page, for the report."""
        from actviz.analysis.visualize.picture_files import contact_sheet

        figures = []
        for vis, page in ((self.shown, False), (self.page.result(), True)):
            if vis is not None:
                s, ch = vis.settings, vis.channels
                what = f"ch {ch[0]}-{ch[-1]} want" if page else f"ch {ch[0]} wants"
                caption = f"What {vis.layer} {what} ({s['objective']}, {s['steps']} steps)"
                figures.append((caption, contact_sheet(vis) if page else vis.image_uint8(0)))
        return {"figures": figures} if figures else {}

    def session_part(self) -> dict[str, Any]:
        """The What channels want page (layer, page, settings, dock open); pictures stay cached."""
        state = self.page.state()
        return {STATE_KEY: state} if state is not None else {}

    def restore_session_part(self, parts: Any) -> None:
        """Put back :meth:`session_part`'s page: its settings, and its tiles from the cache."""
        if not isinstance(state := parts.get(STATE_KEY), dict):
            return
        if (settings := read_saved_settings(state.get("settings"))) is not None:
            self.section.set_settings(settings)
        self.page.restore(state)

    def stop(self) -> None:
        """Stop the page's synthesis."""
        self.lookups.shutdown()
        self.synth_worker.shutdown()
        self.copy.close()
        self.page.shutdown()

    def visualise_page(self, layer: str, first: int | None = None) -> bool:
        """Fill "What channels want" with ``layer``'s page from ``first`` (None: the panel's)."""
        return False if self._closed else self.page.visualise(layer, first)

    def visualise_selected(self) -> bool:
        """Run > Visualise channels: the selected layer's page (else the channel view's)."""
        if self.session.model is None:
            self.host.show_warning("Open a model first, then visualise a layer's channels.")
            return False
        if not (layer := self.host.selected_layer or self.channel_view.name):
            self.host.show_warning("Select a layer first, then visualise its channels.")
            return False
        return self.visualise_page(layer)

    def fill_tile_menu(self, menu: QMenu, layer: str, channels: tuple[int, ...]) -> None:
        """The entries of a layer panel's tile menu: this page's channels."""
        from actviz.io.input_tensors import reads_text

        menu.addSeparator()
        tip = "Synthesise what each channel of this page wants (What channels want dock)"
        action = menu.addAction("Visualise channels", lambda: self.visualise_page(layer))
        if (loaded := self.session.loaded_model) is not None and reads_text(loaded):
            action.setEnabled(False)  # (it failed once clicked)
            tip = f"{self.session.model_name} reads text: what a channel wants is a picture"
        action.setToolTip(tip)

    def export_to(self, folder: str | Path) -> list[Path]:
        """Write the pictures shown into ``folder``'s ``page/`` and ``channel/``: PNGs, a contact
        sheet and ``visualize.json`` (settings, model, how to remake). The files written."""
        from actviz.analysis.visualize import picture_files
        from actviz.analysis.visualize.picture_files import write_visualization

        loaded, model = self.session.loaded_model, self.session.model
        source = getattr(loaded, "source", None)
        extra: dict[str, Any] = {
            "model": getattr(loaded, "name", None) or type(model).__name__,
            "source": source,
        }
        if model is not None:
            # Remembered from the cache's look-ups: no second hashing of the weights.
            extra["weights"] = picture_files.model_fingerprint(model)
        note = ""
        if loaded is not None and source:
            from actviz.io.export.reproduce import run_source

            # Random weights: reopening the source gives others, so no command line to remake.
            if run_source(loaded, None).state is not None:
                note = (
                    f"{extra['model']} has random weights: opening {source!r} again gives "
                    "other weights and other pictures; the call makes these with these "
                    "weights (the fingerprint above)"
                )
                source = None
        files: list[Path] = []
        for sub, vis in (("page", self.page.result()), ("channel", self.shown)):
            if vis is not None:
                again = picture_files.reproduce(vis, source) | ({"note": note} if note else {})
                files += write_visualization(vis, Path(folder) / sub, {**extra, "reproduce": again})
        return files

    def export_dialog(self) -> None:
        """File > Export visualisations: ask for a folder and write the pictures there."""
        if self.page.result() is None and self.shown is None:
            self.host.show_warning(
                "Nothing to export yet: synthesise What it wants or visualise a layer's "
                "channels first."
            )
            return
        folder = open_folder(self.host.dialog_parent(), "Export visualisations into folder")
        if not folder:
            return
        try:
            files = self.export_to(folder)
        except OSError as exc:
            self.host.show_error(f"Could not export the visualisations: {exc}")
            return
        self.host.show_status(f"Wrote {len(files)} files to {folder}")

    def key(self) -> tuple[Any, ...] | None:
        """``(layer, channel, settings)`` of the channel shown, or None."""
        view = self.channel_view
        if self.session.model is None or not view.name or view.channel is None:
            return None
        return (view.name, int(view.channel), self.section.settings())

    def synthesise(self) -> bool:
        """Synthesise the channel shown in the background; False when not started."""
        if (key := self.key()) is None or self._closed or self.is_synthesising():
            return False
        self.section.set_busy(True)
        self.section.set_message(f"Synthesising what ch {key[1]} wants…")
        self.host.refresh_busy("Synthesising what the channel wants…")
        self.copy.get(lambda twin: self._start(twin, key), self.job.copy_failed)
        return True

    def is_synthesising(self) -> bool:
        """True while What it wants runs or waits for its copy of the model."""
        return self.job.running or self.copy.pending

    def _start(self, twin: Any, key: tuple[Any, ...]) -> None:
        model = self.copy.engine_model(twin)

        def job(should_stop: Any, report: Any) -> Visualization:
            step = self.job.stepper(report, "What it wants: step {0}/{1}")
            return _visualize_key(model, key, progress=step, should_stop=should_stop)

        self.job.start(
            job,
            message=f"Synthesising what ch {key[1]} wants…",
            status="Synthesising what the channel wants…",
            done="What it wants: done",
            context=key,
        )

    def _show_cached(self) -> None:
        """Show the cached picture of the channel and settings shown once the cache answers."""
        if (key := self.key()) is None or self._closed:
            self._forget_lookup()
            self._show(None)
            return
        if key == self._asked or (self.shown is not None and self._key_of(self.shown) == key):
            return  # shown, or asked already (a live frame shows the same channel again)
        self._show(None)
        self._asked, self._pending = key, True
        # The opened model (its preprocessing and input size) when there is one.
        model = self.session.loaded_model or self.session.model
        self.lookups.submit(lambda *_: (key, _visualize_key(model, key, only_cached=True))).on(
            finished=self._on_lookup_finished, failed=self._on_lookup_errored
        )

    @staticmethod
    def _key_of(vis: Visualization) -> tuple[Any, ...]:
        s = vis.settings
        return (vis.layer, vis.channels[0], read_saved_settings({**s, "size": s["size"][0]}))

    def _show(self, vis: Visualization | None) -> None:
        self.shown = vis
        self.section.show_image(None if vis is None else vis.image_uint8(0))
        if self.is_synthesising():
            return  # the job's message stays
        if vis is None:
            # Nothing synthesised yet: say what the button does (it takes a while on a CPU).
            key = self.key()
            self.section.set_message(
                ""
                if key is None
                else f"Synthesises the image ch {key[1]} responds to most: {key[2].steps} "
                f"steps, {key[2].size[0]} px, {key[2].objective} objective (⚙)"
            )
        else:
            saved = " (saved)" if vis.from_cache[0] else ""
            self.section.set_message(
                f"What ch {vis.channels[0]} wants{saved}: activation "
                f"{vis.activations[0]:.4g} after {vis.settings['steps']} steps"
            )

    def _on_channel_changed(self, layer: str, channel: int) -> None:
        shown = channel >= 0 and self.session.model is not None
        self.section.setVisible(shown)
        if shown:
            self._show_cached()

    def _on_page_pictures(self, _token: int, kind: str, vis: Any) -> None:
        """The page's pictures hold the channel shown, with the same settings: shown here too."""
        if (key := self.key()) is None or kind != "part" or self._closed or self.is_synthesising():
            return
        layer, _, settings = self._key_of(vis)
        if (layer, settings) != (key[0], key[2]) or key[1] not in vis.channels:
            return
        if self.shown is None or self._key_of(self.shown) != key:
            self._forget_lookup()
            self._show_cached()  # from the cache the page has just written

    def _forget_lookup(self) -> None:
        self._asked, self._pending = None, False
        self.lookups.drop()

    def _on_lookup_finished(self, value: Any) -> None:
        key, vis = value
        if key != self._asked:
            return
        self._pending = False
        if key == self.key() and vis.channels:
            self._show(vis)

    def _on_lookup_errored(self, error: BaseException) -> None:
        # Not an image model, a channel out of range: "What it wants" then says why.
        log.debug("no cached visualisation: %s", error)
        self._pending = False

    def _on_model_changed(self, *_args: Any) -> None:
        self.cancel()
        self.copy.forget()
        self.page.forget()
        self._forget_lookup()
        self._show(None)

    def _on_synthesised(self, value: Visualization, key: tuple[Any, ...] | None) -> None:
        self.copy.forget()
        self.section.set_message("")
        if key == self.key():
            self._show(value)
        else:  # another channel is shown now: the result waits in the cache
            self._forget_lookup()
            self._show_cached()


def _visualize_key(model: Any, key: tuple[Any, ...], **kwargs: Any) -> Visualization:
    """:func:`visualize` of ``key`` (:meth:`VisualizeFeature.key`), cached; ``kwargs`` go to it."""
    layer, channel, settings = key
    return visualize(model, layer, [channel], settings, cache=True, **kwargs)
