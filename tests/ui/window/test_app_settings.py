"""The user's settings file is actviz's whatever the process is called."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QCoreApplication

from actviz.ui.window.settings import AppSettings


@pytest.mark.parametrize("app_name", ["__main__", "ipykernel_launcher", ""])
def test_settings_file_is_named_actviz_whatever_the_application_is_called(
    qapp, isolated_user_state, app_name
):
    # Qt names the application after argv[0]: "__main__" under `python -m actviz`.
    before = (QCoreApplication.applicationName(), QCoreApplication.organizationName())
    try:
        QCoreApplication.setApplicationName(app_name)
        settings = AppSettings()
        settings.colormap = "viridis"
        settings.sync()
        path = Path(settings.store.fileName())
        assert (path.parent.name, path.stem) == ("actviz", "actviz")
        assert path.is_relative_to(isolated_user_state)  # the test's own config folder
        assert AppSettings().colormap == "viridis"  # read back from the same file
    finally:
        QCoreApplication.setApplicationName(before[0])
        QCoreApplication.setOrganizationName(before[1])
