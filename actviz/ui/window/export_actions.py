"""Export menu actions: everything (on its own worker), one panel as PNG, one layer's arrays."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtWidgets import QWidget

from actviz.io.errors import ActvizError
from actviz.io.export.typeset import safe_name
from actviz.ui.background_loads import describe_error
from actviz.ui.file_dialogs import open_folder, save_file, start_folder
from actviz.ui.window.dialogs import ask_export_folder
from actviz.ui.window.input_loads import outcome

log = logging.getLogger(__name__)
#: The banner's source for the exports' failures: the next export that succeeds clears them.
BANNER_SOURCE = "export"


@dataclass(eq=False)
class ExportRequest:
    """One "export everything" run: where to, how it ended."""

    out: Path
    succeeded: bool | None = None


class ExportActions:
    """Export everything (on ``window``'s ``export_worker``), a panel as PNG, a layer as .npy."""

    def __init__(self, window: Any) -> None:
        self.window, self.session = window, window.session
        self.actions = actions = window.commands
        self.display, self.status_label = window.display, window.status.status_label
        self.show_error, self.show_warning = window.host.show_error, window.host.show_warning
        self._refresh_busy, self._wait_until = window.refresh_busy, window.wait_until
        #: Files written by the last finished "export everything".
        self.last_export: list[Path] = []
        #: ``(parent, start) -> folder or ""``: where "Export everything" writes (tests replace it).
        self.choose_export_folder: Callable[[QWidget | None, str], str] = ask_export_folder
        self._export_request: ExportRequest | None = None
        #: ``() -> layer_writers`` for ``export_capture`` (the plugins' layer views).
        self.layer_writers: Callable[[], list[Any]] | None = None
        actions.export_all_action.triggered.connect(self._on_export_all_triggered)
        actions.export_png_action.triggered.connect(self._on_export_png_triggered)
        actions.export_npy_action.triggered.connect(self._on_export_npy_triggered)

    def export_all(self, out_dir: str | Path, *, wait: bool = False) -> bool:
        """Write the CLI's ``export`` of the current result to ``out_dir`` in the background
        (``export_finished`` or ``export_failed`` follows); whether it started (``wait``: worked).
        """
        if (result := self.session.result) is None or result.capture is None:
            self.show_warning("Nothing to export yet: run first (Ctrl+R).")
            return False
        if self._export_request is not None:  # superseded: the worker drops its result
            self._export_request.succeeded = False
        request = self._export_request = ExportRequest(Path(out_dir))
        # The same files whatever tab is shown: run again with the gradient first.
        if not self._rerun_with_input_grads(request, result):
            self._export(request, result)
        return outcome(request, wait, self._wait_until)

    def _export(self, request: ExportRequest, result: Any) -> None:
        from actviz.core.capture import CaptureCancelled
        from actviz.io.export.capture_export import export_capture

        out = request.out
        gradcam = self.window.centre.gradcam_panel.current_layer() or result.gradcam_default
        # Everything the job needs is read here, on the GUI thread.
        kwargs: dict[str, Any] = dict(
            image=result.image,
            categories=self.session.categories,
            model_name=self.session.model_name,
            **self._input_record(result),
            cmap=self.actions.colormap,
            normalize=self.session.normalize,
            gradcam_layer=gradcam if gradcam in result.grad_cams else None,
            source=self.session.run_source(getattr(result, "origin", None) is None),
            # What the run showed; never the model (the capture worker may be running it).
            tokens=result.spec.tokens,
            layout=result.spec.layout,
            tokenizer=result.spec.tokenizer,
            logit_lens=result.logit_lens,
            token_saliency=result.token_saliency,
        )
        if self.layer_writers is not None:
            kwargs["layer_writers"] = self.layer_writers()
        cap = result.capture

        def job(should_stop: Any, progress: Any) -> list[Path]:
            def report(done: int, total: int, what: str) -> None:
                if should_stop():
                    raise CaptureCancelled("export cancelled")
                progress(f"Exporting {done}/{total}: {what}")

            return [Path(p) for p in export_capture(cap, out, progress=report, **kwargs)]

        self.window.export_worker.submit(job).on(
            finished=lambda paths: self._on_export_finished(request, paths),
            failed=lambda error: self._on_export_failed(request, error),
            cancelled=lambda: self._on_export_failed(request, None),
            progress=self.status_label.setText,
        )
        self._refresh_busy(f"Exporting to {out}…")

    def _rerun_with_input_grads(self, request: ExportRequest, result: Any) -> bool:
        """Run again with the input gradient the saliency needs, then export; False if not."""
        from actviz.display.attribution import token_input

        runs = self.window.runs
        if (
            result.capture.input_grads is not None
            or result.token_saliency is not None
            or token_input(result.capture.inputs)
            or runs.last_request is None
            or runs.last_request.input_grads  # asked already: running again would loop
            or getattr(result, "origin", None) is not None  # a live frame: exported as shown
            or self.session.pins.find(result) is not None  # a pinned result: the same
            or self.window.host.runs_replaced()  # live frames replace the window's runs
        ):
            return False
        if runs.run(input_grads=True) is None:
            return False

        def settle(failure: str | None = None) -> None:  # the run ended: export, or say why not
            for signal, slot in pairs:
                with contextlib.suppress(RuntimeError, TypeError):
                    signal.disconnect(slot)
            if self._export_request is not request:
                return
            shown = self.session.result
            if failure is None and shown is not None and shown.capture is not None:
                self._export(request, shown)
                return
            self._export_request, request.succeeded = None, False
            if failure is not None:
                self.window.export_failed.emit(f"Export failed: {failure}")

        # Connected once the run started (a run ends on a later event-loop pass).
        pairs = [
            (self.window.run_finished, settle),
            (self.window.run_failed, settle),
            (self.window.run_cancelled, lambda: settle("the run for the saliency was cancelled")),
        ]
        for signal, slot in pairs:
            signal.connect(slot)
        self._refresh_busy(f"Exporting to {request.out}: running once more for the saliency…")
        return True

    def _input_record(self, result: Any) -> dict[str, Any]:
        """summary.json's record of the input: the live frame's origin, else the opened input."""
        if (origin := getattr(result, "origin", None)) is not None:
            return dict(
                input_name=origin.get("input") or "tensor",
                input_path=origin.get("path") or "",
                frame=origin.get("index"),
                perturbation=dict(origin.get("perturbation") or {}),
            )
        inp = self.session.input
        source = inp.source if inp is not None and inp.source else ""
        is_file = bool(source) and Path(source).is_file()
        return dict(
            # A source that is no file ("text:either/or ...", "random:1x3x8x8") as it is.
            input_name=(Path(source).name if is_file else source) or "tensor",
            input_path=source if is_file else "",
        )

    def export_panel_png(self, path: str | Path, panel: QWidget | None = None) -> Path | None:
        """Save ``panel`` (default: the selected layer's panel, else the current tab) as PNG."""
        panel = self.display.selected_panel() if panel is None else panel
        path = Path(path)
        try:
            if hasattr(panel, "export_png"):
                panel.export_png(path)
            else:
                pixmap = panel.grab()
                if pixmap.isNull() or not pixmap.save(str(path), "PNG"):
                    raise OSError(f"could not write {path}")
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"PNG export failed: {describe_error(exc)}", BANNER_SOURCE)
            return None
        self.window.host.clear_messages(BANNER_SOURCE)
        self.status_label.setText(f"Saved {path}")
        return path

    def export_layer_npy(self, out_dir: str | Path, name: str | None = None) -> list[Path]:
        """Save ``name``'s (default: selected) activation and gradient as ``.npy`` files."""
        result = self.session.result
        name = name if name is not None else self.display.selected_layer
        if result is None or result.capture is None or name is None or name not in result.capture:
            self.show_warning("Select a captured layer first (click it in the tree or a panel).")
            return []
        from actviz.io.files import check_out_folder

        out, rec, stem = Path(out_dir), result.capture[name], safe_name(name)
        written = []
        try:
            check_out_folder(out)
            out.mkdir(parents=True, exist_ok=True)
            for kind, tensor in (("activation", rec.tensor), ("gradient", rec.grad)):
                if tensor is None:
                    continue
                path = out / f"{stem}.{kind}.npy"
                np.save(path, tensor.detach().cpu().numpy())
                written.append(path)
        except OSError as exc:  # the action's slot must not raise: say it in the banner
            text = describe_error(exc)
            if not isinstance(exc, ActvizError):
                text = f"{out}: {exc.strerror or exc}"
            self.show_error(f"Could not save the arrays of {name}: {text}", BANNER_SOURCE)
            return []
        self.window.host.clear_messages(BANNER_SOURCE)
        self.status_label.setText(f"Saved {len(written)} arrays of {name} to {out}")
        return written

    def abandon(self) -> None:
        """Forget the export running now (the window closes): it ends as not succeeded."""
        if (request := self._export_request) is not None and request.succeeded is None:
            request.succeeded = False
        self._export_request = None

    def _settle_export(self, request: ExportRequest, succeeded: bool) -> bool:
        if request is not self._export_request:
            return False
        self._export_request, request.succeeded = None, succeeded
        return True

    def _on_export_finished(self, request: ExportRequest, paths: list[Path]) -> None:
        if not self._settle_export(request, True):
            return
        self.last_export = list(paths)
        self.window.host.clear_messages(BANNER_SOURCE)  # an earlier export's failure is over
        self._refresh_busy(f"Exported {len(paths)} files to {request.out}")
        self.window.export_finished.emit(list(paths))

    def _on_export_failed(self, request: ExportRequest, error: BaseException | None) -> None:
        """The export failed (``error``) or was cancelled (None)."""
        if not self._settle_export(request, False):
            return
        text = "Export cancelled; the files written so far stay."
        if error is not None:
            log.error("export failed", exc_info=(type(error), error, error.__traceback__))
            text = f"Export failed: {describe_error(error)}"
            self.show_error(text, BANNER_SOURCE)
        self._refresh_busy(text)
        self.window.export_failed.emit(text)

    def _on_export_all_triggered(self) -> None:
        # Not QFileDialog.getExistingDirectory: a new folder is fine (export creates it).
        last = str(self.last_export[0].parent) if self.last_export else start_folder()
        if out := self.choose_export_folder(self.window, last):
            self.export_all(out)

    def _on_export_png_triggered(self) -> None:
        name = safe_name(self.display.selected_layer or "panel")
        if path := save_file(self.window, "Save panel as PNG", f"{name}.png", "PNG (*.png)"):
            self.export_panel_png(path)

    def _on_export_npy_triggered(self) -> None:
        if out := open_folder(self.window, "Save layer arrays to folder"):
            self.export_layer_npy(out)
