"""Run the tests from a checkout too: without `pip install -e .`, the package is read from src/."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

if importlib.util.find_spec("actviz_wav") is None:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
