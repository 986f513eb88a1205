"""Open model / Open input, the sample picker, the recent menus, and the adopted model's note."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from actviz.ui.background_loads import IMAGE_FILTER, TENSOR_FILTER
from actviz.ui.file_dialogs import open_file
from actviz.ui.window.actions import WindowActions
from actviz.ui.window.settings import split_recent_model

if TYPE_CHECKING:  # pragma: no cover
    from actviz.ui.window.dialogs import OpenModelDialog


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
        self.sample_combo.setEnabled(bool(self.samples))
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
        self.files.dialog_closed(dialog)
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
        filters = [IMAGE_FILTER, TENSOR_FILTER, *self.extra_input_filters, "All files (*)"]
        return open_file(self.files.window, title, ";;".join(filters), start)

    def _open_input(self) -> None:
        if path := self.ask_input_file():
            self.files.open_input_source(path)

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
