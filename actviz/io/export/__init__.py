"""Writing results to disk: capture exports, token views, HTML reports, reproduce scripts."""

from actviz.core.moved import moved

__getattr__ = moved(__name__, {"export_capture": "actviz.io.export.capture_export"})
