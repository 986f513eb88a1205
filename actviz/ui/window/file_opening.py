"""Opening models and inputs off the GUI thread. Only the latest request is adopted; a failure
goes to the banner and the previous model stays. Trust is asked here, then it loads again.
:class:`OpenMenus`: the Open actions, sample picker, recent menus and the adopted model's note."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QWidget

from actviz.core.threads import reporting
from actviz.io.errors import ArchitectureNeededError, UntrustedFileError
from actviz.io.input_tensors import reads_text
from actviz.ui import background_loads as loads
from actviz.ui.background_loads import IMAGE_FILTER, ModelRequest, failure_reason, short_source
from actviz.ui.file_dialogs import open_file
from actviz.ui.window.central import WindowActions
from actviz.ui.window.input_loads import InputLoads, outcome, while_current
from actviz.ui.window.settings import split_recent_model

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.window.dialogs import OpenModelDialog
    from actviz.ui.worker import Worker

log = logging.getLogger(__name__)

#: ``confirm_untrusted(parent, path, message) -> bool``: may the file be unpickled?
ConfirmUntrusted = Callable[[QWidget, str, str], bool]


class FileOpening:
    """Opens models and inputs on ``window``'s loader workers."""

    def __init__(self, window: Any) -> None:
        self.window, self.session, self.settings = window, window.session, window.settings
        self.model_loads, self.banner = window.model_loads, window.centre.banner
        self.status_label = window.status.status_label
        #: The model being opened (None when none is).
        self.model_request: ModelRequest | None = None
        self.menus = OpenMenus(self, window.commands)
        self.inputs = InputLoads(self, window.input_loads)

    def open_model_source(
        self,
        source: str,
        *,
        arch: str | None = None,
        weights: str | None = "DEFAULT",
        trust: bool = False,
        wait: bool = False,
        dialog: OpenModelDialog | None = None,
    ) -> bool:
        """Open a model (zoo name, file, ``module:attr`` or "demo", arguments as for
        :func:`actviz.io.models.loading.open_model`) in the background; whether the load started
        (``wait``: whether it was adopted); ``model_loaded`` or ``model_load_failed`` follows.
        ``dialog``: the Open model dialog that asked (it says how the load ends)."""
        if self.window.is_closed():
            return False
        request = ModelRequest(str(source), arch=arch, weights=weights, trust=trust, dialog=dialog)
        request.remember = source != "demo"
        if (previous := self.model_request) is not None:
            previous.succeeded = False  # superseded: its result will be dropped
            if previous.dialog is not None and previous.dialog is not dialog:  # frees its Open
                previous.dialog.show_cancelled(
                    f"Opening {short_source(previous.source)} was replaced by "
                    f"{short_source(request.source)}."
                )
        self.model_request = request
        self.load_model(request, self._on_model_load_finished, self._fail)
        return outcome(request, wait, self.window.wait_until)

    def open_input_source(self, source: str, *, remember: bool = True, wait: bool = False) -> bool:
        """Open an input in the background; returns as :meth:`open_model_source` does."""
        if self.window.is_closed():
            return False
        request = loads.InputRequest(str(source), remember=remember)
        self.inputs.ask(request)
        return outcome(request, wait, self.window.wait_until)

    def load_demo(self, sample: str | None = None) -> bool:
        """Open the demo model and one of its samples (the first when None) in the background."""
        if not self.open_model_source("demo"):
            return False
        samples = self.menus.samples  # the demo's, as the sample picker lists them
        if samples:
            path = next((p for p in samples if sample in (p.name, p.stem)), samples[0])
            self.open_input_source(str(path), remember=False)
        return True

    def open_default_input(self) -> bool:
        """Open the current (or loading) model's default input quietly; True when started."""
        if not self.menus.samples or (self.session.model is None and self.model_request is None):
            return False
        source = str(self.menus.samples[0])
        if self.model_request is None:
            source = self._natural_source(self.session.loaded_model, source)
        # While a model is being opened, the source is chosen for it once it is adopted.
        self.inputs.ask(loads.InputRequest(source, remember=False, quiet=True))
        return True

    def _natural_source(self, loaded: Any, fallback: str) -> str:
        """The model's natural default input (prompt, sample image, random tensor)."""
        from actviz.io.input_files import natural_input_source

        model = getattr(loaded, "model", None)
        model = self.session.model if model is None else model
        return natural_input_source(loaded, self.menus.samples, model=model) or fallback

    def open_dropped(self, path: str | Path) -> bool:
        """Open a dropped file: a model by suffix or folder, anything else as an input."""
        path = Path(path)
        if loads.names_a_model(path):
            opened = self.open_model_source(str(path))
            if opened and self.session.input is None:  # none yet: the model's own comes with it
                self.open_default_input()
            return opened
        if self.window.is_closed():
            return False
        self.inputs.ask(loads.InputRequest(str(path), dropped=True))
        return True

    def is_loading(self) -> bool:
        """True while a model or an input is being opened."""
        return self.model_request is not None or self.inputs.request is not None

    def cancel(self) -> bool:
        """Cancel the model and input loads (the previous ones stay); True when one was running."""
        if (model := self.model_request) is not None:
            self.drop_model_load()
        inp = self.inputs.request  # (read after: a dropped model may start a waiting input)
        if inp is not None:
            self.inputs.drop(f"Opening {short_source(inp.source)} was cancelled; the input stays.")
            self.window.runs.run_if_due()
        return model is not None or inp is not None

    def abandon(self) -> None:
        """Forget the loads running now (the window closes): they end as not succeeded."""
        for request in (self.model_request, self.inputs.request):
            if request is not None and request.succeeded is None:
                request.succeeded = False
        self.model_request = self.inputs.request = None

    def load_model(
        self,
        request: ModelRequest,
        finished: Callable[[ModelRequest, Any], object],
        failed: Callable[..., object],
        worker: Worker | None = None,
        current: Callable[[], ModelRequest | None] | None = None,
        name: str = "model",
    ) -> None:
        """Open ``request``'s model on ``worker`` (the window's loads); while it is ``current()``
        (the window's model being opened) ``finished(request, loaded)`` or ``failed(request, text,
        level=, path=, candidates=, details=)`` (no text: cancelled) follows. Trust is asked here,
        then it loads again. ``name``: what the texts call the model (Compare's "model B")."""
        worker, window, loader = worker or self.model_loads, self.window, self.window.model_loader
        current = current or (lambda: self.model_request)
        source, arch, weights = request.source, request.arch, request.weights

        def load(_stop: Callable[[], bool], progress: Callable[[str], None]) -> Any:
            with reporting(progress):  # a guessed architecture says what it tries
                return loader(source, arch=arch, weights=weights, trust=request.trust)

        def progress(request: ModelRequest, text: str) -> None:
            self.status_label.setText(text)
            if request.dialog is not None:
                request.dialog.set_busy(True, text)

        def errored(request: ModelRequest, error: BaseException) -> None:
            if isinstance(error, UntrustedFileError) and not request.trust:
                trusted = window.confirm_untrusted(window, error.path, str(error))
                if current() is not request:
                    return  # another model was opened while the question was up
                if trusted:
                    request.trust = True
                    self.load_model(request, finished, failed, worker, current, name)
                else:
                    failed(request, f"Not opened: {error.path} was not trusted.", level="warning")
                return
            log.info("could not open %s %r: %s", name, source, error)
            if isinstance(error, ArchitectureNeededError):  # asked in the dialog, never --arch
                text = loads.arch_needed_text(error, in_dialog=request.dialog is not None)
                path, more = error.path, dict(candidates=error.candidates)
            else:
                text = f"Could not open {name} {source!r}: {failure_reason(error, source)}"
                path, more = source, dict(details=loads.error_details(error))
            # A path typed or picked stays in the dialog; a zoo name or a recent entry keeps its tab.
            keep = path if path and Path(path).exists() else ""
            failed(request, text, level="error", path=keep, **more)

        job = request.job = worker.submit(load)
        mine = while_current(request, job, current)
        job.on(
            finished=mine(finished),
            failed=mine(errored),
            cancelled=mine(failed),
            progress=mine(progress),
        )
        what = "" if name == "model" else f"{name} "
        window.refresh_busy(f"Opening {what}{short_source(source)}…")

    def drop_model_load(self, status: str = "") -> None:
        """Forget the model being opened (an in-memory model replaced it; ``status`` says so)."""
        if (request := self.model_request) is None:
            return
        self.model_loads.drop()
        self._fail(request, status)

    def _on_model_load_finished(self, request: ModelRequest, loaded: Any) -> None:
        self.model_request = None
        request.succeeded = True
        if request.dialog is not None:
            request.dialog.opened()
        self._adopt_model(loaded)
        # For the export's reproduce.py.
        self.session.set_model_open_args(
            dict(arch=request.arch, weights=request.weights, trust=request.trust)
        )
        if request.remember:
            self.settings.add_recent_model(request.source, request.arch)
            self.menus.refresh_recent()
        from actviz.io.models.arch_guess import confident_guess

        used = None if request.arch else confident_guess(getattr(loaded, "arch_guesses", ()))
        guessed = f"architecture guessed: {used.name} ({used.reason})" if used is not None else ""
        self.window.refresh_busy(f"Opened {loaded.name}" + (f" · {guessed}" if guessed else ""))
        self.menus.show_note(guessed)
        self.window.model_loaded.emit(request.source)

    def _fail(
        self,
        request: ModelRequest,
        text: str = "",
        *,
        level: str | None = None,
        details: str = "",
        path: str = "",
        candidates: Any = (),
    ) -> None:
        """A load ended unfinished (``level`` None: cancelled): said in its dialog, else banner."""
        dialog, self.model_request, request.succeeded = request.dialog, None, False
        text = text or f"Opening {short_source(request.source)} was cancelled; the model stays."
        shown = level if dialog is None else None
        if shown == "error":
            self.window.host.show_error(text, details=details)
        elif shown == "warning":
            self.window.host.show_warning(text)
        # An error's whole sentence is in the banner; the one-line status bar would cut it.
        self.window.refresh_busy(loads.failed_status(request.source) if shown == "error" else text)
        self.window.model_load_failed.emit(text)
        self.inputs.model_failed()
        if dialog is not None and level is None:
            dialog.show_cancelled(text)
        elif dialog is not None:
            dialog.show_failure(text, path=path, candidates=candidates)

    def _adopt_model(self, loaded: Any) -> None:
        self.window.runs.stop()
        self.banner.clear()
        gradcam = None
        if loaded.source == "demo" or loaded.kind == "demo":
            from actviz.io.models.demo_model import DEMO_GRADCAM_LAYER

            gradcam = DEMO_GRADCAM_LAYER
        # Registered before the model changes, so the automatic run waits for the re-read input.
        reread, restore = self.inputs.request, None
        if reread is None:
            reread, restore = self.inputs.input_for(loaded)
        elif reread.quiet and self.session.input is None:
            # The start-up default waited for this model: its natural input.
            reread.source = self._natural_source(loaded, reread.source)
        self.inputs.request = reread
        self.session.set_loaded_model(loaded, gradcam_layer=gradcam)
        if restore is not None:
            self.inputs.restore(restore)
        if reread is not None:
            self.inputs.start(reread)


def ask_untrusted(parent: QWidget, path: str, message: str) -> bool:
    """Default trust confirmation (a folder runs its own code; a file is a pickle)."""
    from actviz.ui.window.dialogs import confirm_untrusted_file

    return confirm_untrusted_file(parent, path, message, code=Path(path).is_dir())


class OpenMenus:
    """The Open actions, sample picker and recent menus of ``files``."""

    def __init__(self, files: Any, actions: WindowActions) -> None:
        self.files, self.settings, self.sample_combo = files, files.settings, actions.sample_combo
        self.recent_models_menu = actions.recent_models_menu
        self.recent_inputs_menu = actions.recent_inputs_menu
        #: More File > Open input filters ("Plugin inputs (*.wav)"): the plugins' openers.
        self.extra_input_filters: list[str] = []
        #: The bundled sample images, as the sample picker lists them.
        self.samples: list[Path] = []
        try:
            from actviz.io.models.demo_model import demo_samples

            self.samples = demo_samples()
        except Exception:  # noqa: BLE001 - no samples is fine
            pass
        self.sample_combo.addItems(["Sample…", *(path.stem for path in self.samples)])
        self.fit_samples()
        #: The Open model dialog while it is open (None otherwise).
        self.model_dialog: OpenModelDialog | None = None
        self._note = ""
        actions.open_model_action.triggered.connect(lambda _=False: self.open_model_dialog())
        actions.open_input_action.triggered.connect(lambda _=False: self._open_input())
        actions.sample_combo.activated.connect(self._on_sample_activated)
        self.refresh_recent()

    def new_model_dialog(self, *, keep_open: bool = False) -> OpenModelDialog:
        """A new Open model dialog over the window, listing the recent models (not shown)."""
        from actviz.ui.window.dialogs import OpenModelDialog

        recent = self.settings.recent_models()
        return OpenModelDialog(self.files.window, recent=recent, keep_open=keep_open)

    def open_model_dialog(self) -> OpenModelDialog:
        """Show the Open model dialog (window-modal, not blocking; open while the model loads)."""
        if self.model_dialog is not None:
            self.model_dialog.raise_()
            return self.model_dialog
        dialog = self.new_model_dialog(keep_open=True)
        dialog.open_requested.connect(
            lambda spec: self.files.open_model_source(
                spec.source, arch=spec.arch, weights=spec.weights, dialog=dialog
            )
        )
        dialog.finished.connect(lambda _code: self._on_dialog_finished(dialog))
        self.model_dialog = dialog
        dialog.open()
        return dialog

    def _on_dialog_finished(self, dialog: OpenModelDialog) -> None:
        if self.model_dialog is dialog:
            self.model_dialog = None
        # Closed (Cancel, Esc) while its model was loading: that load goes, unsaid.
        request = self.files.model_request
        if request is not None and request.dialog is dialog and request.succeeded is None:
            request.dialog = None
            self.files.drop_model_load()
        dialog.deleteLater()

    def show_note(self, text: str) -> None:
        """Show ``text`` about the adopted model in the status bar for 20 s, replacing the last."""
        bar = self.files.window.statusBar()  # the files' window is the MainWindow
        if text:
            bar.showMessage(text, 20_000)
        elif self._note and bar.currentMessage() == self._note:
            bar.clearMessage()
        self._note = text

    def ask_input_file(self, title: str = "Open input") -> str:
        """An input file picked in a dialog (the plugins' formats too), "" when cancelled."""
        start = (self.settings.recent_inputs() or [None])[0]
        filters = [IMAGE_FILTER, loads.TENSOR_FILTER, *self.extra_input_filters, "All files (*)"]
        return open_file(self.files.window, title, ";;".join(filters), start)

    def _open_input(self) -> None:
        if path := self.ask_input_file():
            self.files.open_input_source(path)

    def fit_samples(self) -> None:
        """Offer the samples to an image model (pictures: a text model reads the text box)."""
        text = reads_text(self.files.session.loaded_model)
        self.sample_combo.setEnabled(bool(self.samples) and not text)
        tip = "The samples are pictures: this model reads the text typed in the box above"
        self.sample_combo.setToolTip(tip if text else "Pick a bundled sample image")

    def _on_sample_activated(self, index: int) -> None:
        if index <= 0 or index > len(self.samples):
            return
        self.files.open_input_source(str(self.samples[index - 1]), remember=False)
        self.sample_combo.setCurrentIndex(0)

    def refresh_recent(self) -> None:
        """Fill Recent models and Recent inputs from the settings."""
        files, models, inputs = self.files, self.recent_models_menu, self.recent_inputs_menu
        models.clear()
        for entry in self.settings.recent_models():
            source, arch = split_recent_model(entry)
            text = f"{source}  (arch {arch})" if arch else source
            models.addAction(text, lambda s=source, a=arch: files.open_model_source(s, arch=a))
        models.setEnabled(not models.isEmpty())
        inputs.clear()
        for source in self.settings.recent_inputs():
            inputs.addAction(source, lambda s=source: files.open_input_source(s))
        inputs.setEnabled(not inputs.isEmpty())
