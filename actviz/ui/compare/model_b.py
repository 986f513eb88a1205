"""Model B for the Compare tab, opened as the main model is, on loads of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject

from actviz.io.errors import ArchitectureNeededError, UntrustedFileError
from actviz.ui.background_loads import arch_needed_text, describe_error, short_source
from actviz.ui.host import WindowHost
from actviz.ui.worker import CAPTURE_NICE, Worker
from actviz.workspace.compare_job import layer_mismatch


class ModelB(QObject):
    """Opens and keeps model B: ``opened(loaded, source)`` if it fits run A, else ``failed``."""

    def __init__(
        self,
        host: WindowHost,
        parent: QObject,
        opened: Callable[[Any, str], None],
        failed: Callable[[str], Any],
    ) -> None:
        super().__init__(parent)
        self.host = host
        self._opened, self._failed = opened, failed
        #: Loads of model B (a new module nobody else holds: its own threads).
        self.loads = Worker(self, max_threads=2, nice=CAPTURE_NICE)
        #: Model B (a ``LoadedModel``), once opened.
        self.model: Any = None
        #: The Open model B dialog while it is open.
        self.dialog: Any = None
        self._load: dict[str, Any] | None = None
        self._closed = False

    def is_loading(self) -> bool:
        """Whether model B is being opened."""
        return self._load is not None

    def open_dialog(self) -> Any:
        """Show the window's Open model dialog for model B (open while model B loads)."""
        if self.dialog is not None:
            self.dialog.raise_()
            return self.dialog
        dialog = self.host.model_dialog(keep_open=True)
        dialog.setWindowTitle("Open model B (to compare) — actviz")
        dialog.open_requested.connect(lambda spec: self._load_model(dialog, spec))
        dialog.finished.connect(lambda _code: self._on_dialog_finished(dialog))
        self.dialog = dialog
        dialog.open()
        return dialog

    def _load_model(self, dialog: Any, spec: Any, *, trust: bool = False) -> None:
        if self._closed:
            return
        loader = self.host.model_loader
        load = self._load = dict(dialog=dialog, spec=spec, trust=trust)

        def ended(slot: Callable[..., None]) -> Callable[..., None]:
            def call(*args: Any) -> None:
                if load is self._load:  # else a later load (or a closed dialog) forgot it
                    self._load = None
                    slot(load, *args)

            return call

        self.loads.submit(
            lambda stop, progress: loader(
                spec.source, arch=spec.arch, weights=spec.weights, trust=trust
            )
        ).on(
            finished=ended(self._on_finished),
            failed=ended(self._on_errored),
            cancelled=ended(lambda _load: self.host.refresh_busy()),
        )
        self.host.refresh_busy(f"Opening model B {short_source(spec.source)}…")

    def _on_finished(self, load: dict[str, Any], loaded: Any) -> None:
        dialog, session = load["dialog"], self.host.session
        # Run A's layers, else (no run yet) the ticked ones, must be in model B.
        cap = None if session.result is None else session.result.capture
        names = list(session.ticked) if cap is None else list(cap.names)
        text = layer_mismatch({} if cap is None else cap, loaded.model, names)
        if text:
            self.host.refresh_busy("Model B does not fit run A")
            self._fail(dialog, text)
            return
        self.model = loaded
        self.host.refresh_busy(f"Opened model B {loaded.name}")
        if dialog is not None and dialog is self.dialog:
            dialog.opened()
        self._opened(loaded, str(load["spec"].source))

    def _on_errored(self, load: dict[str, Any], error: BaseException) -> None:
        dialog, spec = load["dialog"], load["spec"]
        if isinstance(error, UntrustedFileError) and not load["trust"]:
            if self.host.confirm_untrusted(self.host.dialog_parent(), error.path, str(error)):
                self._load_model(dialog, spec, trust=True)
                return
            self._fail(dialog, f"Not opened: {error.path} was not trusted.")
            return
        if isinstance(error, ArchitectureNeededError):
            text = arch_needed_text(error, in_dialog=dialog is not None)
            self._fail(dialog, text, path=error.path, candidates=error.candidates)
            return
        text = f"Could not open model B {spec.source!r}: {describe_error(error)}"
        self._fail(dialog, text, path=spec.source)

    def _fail(
        self, dialog: Any, text: str, *, path: str = "", candidates: Sequence[Any] = ()
    ) -> None:
        self.host.refresh_busy(text)
        if dialog is not None and dialog is self.dialog:
            keep = path if path and Path(path).exists() else ""
            dialog.show_failure(text, path=keep, candidates=candidates)
        self._failed(text)

    def _on_dialog_finished(self, dialog: Any) -> None:
        if self.dialog is dialog:
            self.dialog = None
        load = self._load
        if load is not None and load["dialog"] is dialog:
            self.loads.drop()  # closed while model B was loading
            self._load = None
            self.host.refresh_busy()
        dialog.deleteLater()

    def shutdown(self) -> None:
        """The window closes: loads stop."""
        self._closed = True
        self.loads.shutdown(timeout_ms=0)
