"""Model B for the Compare tab, opened as the main model is, on loads of its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject

from actviz.ui.background_loads import ModelRequest
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
        #: The model B being opened.
        self.request: ModelRequest | None = None
        self._closed = False

    def is_loading(self) -> bool:
        """Whether model B is being opened."""
        return self.request is not None

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

    def _load_model(self, dialog: Any, spec: Any) -> None:
        if self._closed:
            return
        request = self.request = ModelRequest(spec.source, spec.arch, spec.weights, dialog=dialog)
        self.host.load_model(
            request, self._on_finished, self._fail, self.loads, lambda: self.request, "model B"
        )

    def _on_finished(self, request: ModelRequest, loaded: Any) -> None:
        session = self.host.session
        # Run A's layers, else (no run yet) the ticked ones, must be in model B.
        cap = None if session.result is None else session.result.capture
        names = list(session.ticked) if cap is None else list(cap.names)
        text = layer_mismatch({} if cap is None else cap, loaded.model, names)
        if text:
            self._fail(request, text)
            return
        self.request, self.model = None, loaded
        self.host.refresh_busy(f"Opened model B {loaded.name}")
        request.dialog.opened()
        self._opened(loaded, request.source)

    def _fail(self, request: ModelRequest, text: str = "", **failure: Any) -> None:
        """Model B was not opened (no ``text``: cancelled); ``failure``: see ``host.load_model``."""
        self.request = None
        self.host.refresh_busy(text)
        if text:
            path, candidates = failure.get("path", ""), failure.get("candidates", ())
            request.dialog.show_failure(text, path=path, candidates=candidates)
            self._failed(text)

    def _on_dialog_finished(self, dialog: Any) -> None:
        if self.dialog is dialog:
            self.dialog = None
        if self.request is not None and self.request.dialog is dialog:
            self.loads.drop()  # closed while model B was loading
            self._fail(self.request)
        dialog.deleteLater()

    def shutdown(self) -> None:
        """The window closes: loads stop."""
        self._closed = True
        self.loads.shutdown(timeout_ms=0)
