"""The app's process sets its OpenMP wait policy before torch loads; a user's own value stays."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from actviz.core.openmp import APP_OPENMP, use_app_openmp


def test_the_app_policy_fills_only_what_the_user_left_unset():
    env: dict[str, str] = {}
    use_app_openmp(env)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"} == APP_OPENMP
    mine = {"OMP_WAIT_POLICY": "ACTIVE"}
    use_app_openmp(mine)
    assert mine == {"OMP_WAIT_POLICY": "ACTIVE"}


def _gui_sees(env: dict[str, str]) -> str:
    """What ``actviz gui`` leaves for the window: the policy, and whether torch had loaded."""
    script = textwrap.dedent(
        """
        import os, sys, types
        fake = types.ModuleType("actviz.ui.explore")
        def run_app(**_kwargs):
            print(os.environ.get("OMP_WAIT_POLICY"), "torch" in sys.modules)
            return 0
        fake.run_app = run_app
        sys.modules["actviz.ui.explore"] = fake
        from actviz.cli import main
        raise SystemExit(main(["gui"]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_gui_command_sets_the_policy_before_torch_loads():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _gui_sees(env) == "PASSIVE False"
    assert _gui_sees({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE False"
