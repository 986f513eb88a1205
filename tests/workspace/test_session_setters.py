"""The Session's state changes only through its setters: no code outside ``actviz/workspace``
(nor any test) assigns a Session attribute, and each setter stores what it is given."""

from __future__ import annotations

import re
from pathlib import Path

from actviz.workspace.session_state import Session

ROOT = Path(__file__).resolve().parents[2]
# ``window.session.memory_budget = 1``, ``self.host.session.result = None`` (not ``==``).
ASSIGNMENT = re.compile(r"\bsession\.([a-z_]+)\s*(\+|-|\|)?=(?!=)")


def test_no_code_outside_the_workspace_assigns_session_state():
    assert ASSIGNMENT.search("window.session.memory_budget = 1 << 30").group(1) == "memory_budget"
    assert ASSIGNMENT.search("self.host.session.result=None")
    assert not ASSIGNMENT.search("assert window.session.target == 3")
    found = []
    for folder in ("actviz", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("actviz/workspace/") or path.name == Path(__file__).name:
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if ASSIGNMENT.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "assign through the Session's setters:\n" + "\n".join(found)


def test_the_setters_store_what_they_are_given():
    s = Session()
    s.set_memory_budget(1 << 20)
    s.set_categories(("cat", "dog"))
    s.set_model_open_args({"arch": "resnet18", "weights": None, "trust": False})
    s.set_saliency_wanted(False)
    assert s.memory_budget == 1 << 20 and s.categories == ["cat", "dog"]
    assert s.model_open_args == {"arch": "resnet18", "weights": None, "trust": False}
    assert s.saliency_wanted is False
    s.set_categories(())
    assert s.categories is None
