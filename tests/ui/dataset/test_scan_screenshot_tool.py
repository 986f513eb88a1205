"""tools/scan_screenshot.py (the README's dataset-scan screenshot) runs on the window as it
is: it reached the dataset feature through an attribute the window no longer has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

TOOLS = Path(__file__).resolve().parents[3] / "tools"


@pytest.mark.slow  # a process of its own: Qt, torch and the demo's scan (~12 s here)
def test_the_scan_screenshot_tool_makes_its_pictures(tmp_path):
    out = tmp_path / "scan.png"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "scan_screenshot.py", str(out), "--size", "1024x640"],
        cwd=TOOLS,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert Image.open(out).size == (1024, 640)
    assert Image.open(out.with_name("scan-channel.png")).size[0] > 200
