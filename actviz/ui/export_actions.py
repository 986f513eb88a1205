"""Export menu actions: everything (in the background), one panel as PNG, one layer's arrays.

"Export everything" writes dozens of PNGs and arrays, so it runs on its own
:class:`~actviz.ui.worker.Worker`: it reads only the finished capture's detached tensors, never
the model, so it may overlap the next capture. The single-panel exports are quick and stay on
the GUI thread (grabbing a widget must).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtWidgets import QFileDialog, QWidget

from actviz.io.export import safe_name
from actviz.ui.loaders import describe_error

log = logging.getLogger(__name__)


@dataclass(eq=False)
class ExportRequest:
    """One "export everything" run: where to, which worker generation, how it ended."""

    out: Path
    generation: int = 0
    succeeded: bool | None = None
    paths: list[Path] = field(default_factory=list)


class ExportActions:
    """The export half of :class:`~actviz.ui.main_window.MainWindow` (a mixin).

    It relies on the window's ``session``, ``export_worker``, ``gradcam_panel``, ``colormap``,
    ``status_label``, its signals ``export_finished``/``export_failed`` and its helpers
    ``show_error``, ``show_warning``, ``_refresh_busy``, ``_wait_until``, ``_selected_panel``.
    """

    #: Files written by the last finished "export everything".
    last_export: list[Path]
    _export_request: ExportRequest | None

    def export_all(self, out_dir: str | Path, *, wait: bool = False) -> bool:
        """Write everything the CLI's ``export`` writes for the current result to ``out_dir``.

        Runs in the background; ``export_finished(paths)`` or ``export_failed(message)`` follows
        and :attr:`last_export` holds the files written.

        Parameters
        ----------
        out_dir
            Folder to write into (created if missing).
        wait
            Block (with a local event loop) until the export is done.

        Returns
        -------
        bool
            Without ``wait``: True when the export started. With ``wait``: True when it
            finished without error.
        """
        result = self.session.result
        if result is None or result.capture is None:
            self.show_warning("Nothing to export yet: run first (Ctrl+R).")
            return False
        try:
            from actviz.io.export import export_capture
        except ImportError:
            self.show_error("Export is not available in this build (actviz.io.export missing).")
            return False
        from actviz.core.capture import CaptureCancelled

        out = Path(out_dir)
        inp = self.session.input
        gradcam = self.gradcam_panel.current_layer() or result.gradcam_default
        # Everything the job needs is read here, on the GUI thread.
        kwargs: dict[str, Any] = dict(
            image=result.image,
            categories=self.session.categories,
            model_name=self.session.model_name,
            input_name=(Path(inp.source).name if inp and inp.source else "tensor"),
            cmap=self.colormap,
            normalize=self.session.normalize,
            gradcam_layer=gradcam if gradcam in result.grad_cams else None,
        )
        cap = result.capture

        def job(should_stop: Any, progress: Any) -> list[Path]:
            def report(done: int, total: int, what: str) -> None:
                if should_stop():
                    raise CaptureCancelled("export cancelled")
                progress(f"Exporting {done}/{total}: {what}")

            return [Path(p) for p in export_capture(cap, out, progress=report, **kwargs)]

        previous = self._export_request
        if previous is not None:
            previous.succeeded = False  # superseded: the worker drops its result
        request = ExportRequest(out)
        self._export_request = request
        request.generation = self.export_worker.submit(job)
        self._refresh_busy(f"Exporting to {out}…")
        if not wait:
            return True
        self._wait_until(lambda: request.succeeded is not None)
        return bool(request.succeeded)

    def export_panel_png(self, path: str | Path, panel: QWidget | None = None) -> Path | None:
        """Save ``panel`` (default: the selected layer's panel, else the current tab) as PNG."""
        if panel is None:
            panel = self._selected_panel()
        path = Path(path)
        try:
            if hasattr(panel, "export_png"):
                panel.export_png(path)
            else:
                pixmap = panel.grab()
                if pixmap.isNull() or not pixmap.save(str(path), "PNG"):
                    raise OSError(f"could not write {path}")
        except Exception as exc:  # noqa: BLE001
            self.show_error(f"PNG export failed: {describe_error(exc)}")
            return None
        self.status_label.setText(f"Saved {path}")
        return path

    def export_layer_npy(self, out_dir: str | Path, name: str | None = None) -> list[Path]:
        """Save layer ``name``'s (default: the selected layer's) activation and gradient
        (full batch, as captured) as ``<name>.activation.npy`` / ``<name>.gradient.npy``."""
        result = self.session.result
        name = name if name is not None else self._selected_layer
        if result is None or result.capture is None or name is None or name not in result.capture:
            self.show_warning("Select a captured layer first (click it in the tree or a panel).")
            return []
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        rec = result.capture[name]
        stem = safe_name(name)
        written = []
        for kind, tensor in (("activation", rec.tensor), ("gradient", rec.grad)):
            if tensor is None:
                continue
            path = out / f"{stem}.{kind}.npy"
            np.save(path, tensor.detach().cpu().numpy())
            written.append(path)
        self.status_label.setText(f"Saved {len(written)} arrays of {name} to {out}")
        return written

    # ========================================================================== worker events
    def _on_export_progress(self, gen: int, message: str) -> None:
        self.status_label.setText(message)

    def _settle_export(self, gen: int, succeeded: bool) -> ExportRequest | None:
        request = self._export_request
        if request is None or gen != request.generation:
            return None
        self._export_request = None
        request.succeeded = succeeded
        return request

    def _on_export_finished(self, gen: int, paths: list[Path]) -> None:
        request = self._settle_export(gen, True)
        if request is None:
            return
        request.paths = list(paths)
        self.last_export = list(paths)
        self._refresh_busy(f"Exported {len(paths)} files to {request.out}")
        self.export_finished.emit(list(paths))

    def _on_export_errored(self, gen: int, error: BaseException) -> None:
        if self._settle_export(gen, False) is None:
            return
        log.error("export failed", exc_info=(type(error), error, error.__traceback__))
        text = f"Export failed: {describe_error(error)}"
        self.show_error(text)
        self._refresh_busy(text)
        self.export_failed.emit(text)

    def _on_export_cancelled(self, gen: int) -> None:
        if self._settle_export(gen, False) is None:
            return
        text = "Export cancelled; the files written so far stay."
        self._refresh_busy(text)
        self.export_failed.emit(text)

    # ========================================================================== dialogs
    def _on_export_all_triggered(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Export everything to folder")
        if out:
            self.export_all(out)

    def _on_export_png_triggered(self) -> None:
        name = safe_name(self._selected_layer or "panel")
        path, _ = QFileDialog.getSaveFileName(
            self, "Save panel as PNG", f"{name}.png", "PNG (*.png)"
        )
        if path:
            self.export_panel_png(path)

    def _on_export_npy_triggered(self) -> None:
        out = QFileDialog.getExistingDirectory(self, "Save layer arrays to folder")
        if out:
            self.export_layer_npy(out)


__all__ = ["ExportActions", "ExportRequest"]
