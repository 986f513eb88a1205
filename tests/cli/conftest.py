"""What several CLI test files share: ``cli``, running ``actviz ...`` in this process."""

from __future__ import annotations

import logging

import pytest

from actviz.cli import main


@pytest.fixture
def cli(monkeypatch, capsys):
    """Run ``actviz ...`` in this process; returns (exit code, stdout, stderr)."""
    monkeypatch.setenv("ACTVIZ_OFFLINE", "1")
    # main() configures logging for a real run; leave the test process's root logger alone.
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: None)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
