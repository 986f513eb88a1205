"""Repeated captures reuse the process's memory instead of page-faulting fresh pages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import resource, sys, torch, torchvision, actviz
torch.set_num_threads(1)
model = torchvision.models.resnet18(weights=None).eval()
x = torch.randn(1, 3, 320, 320)
for _ in range(2):
    actviz.capture(model, x, None, gradients=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    actviz.capture(model, x, None, gradients=False)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3)
"""


def faults_per_capture(tuning: str) -> float:
    env = dict(os.environ, ACTVIZ_MALLOC_TUNING=tuning)
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only"
)
def test_repeated_captures_do_not_page_fault():
    tuned = faults_per_capture("1")
    untuned = faults_per_capture("0")
    # every leaf of ResNet-18 held at once: thousands of fresh pages per capture by default
    assert untuned > 1000
    assert tuned < untuned / 10
