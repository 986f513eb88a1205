"""Dictionaries attached to a session's layers (no Qt): :class:`AttachedConcepts`.

Session files keep the folder, the concept names and whether concepts are shown, not the
weights (the folder holds them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class AttachedConcepts:
    """A dictionary on one layer of the session: the ``concepts``, the SAELens ``folder`` ("" in
    memory only), the user's ``names``, whether the panel ``shown`` concepts, a concept ``scan``
    (or None) and the ``data`` folder it came from.
    """

    concepts: Any
    folder: str = ""
    names: Mapping[int, str] = field(default_factory=dict)
    shown: bool = True
    scan: Any = None
    data: str = ""

    def __post_init__(self) -> None:
        names = {int(k): str(v) for k, v in dict(self.names).items() if str(v).strip()}
        object.__setattr__(self, "names", names)

    def named(self, concept: int, name: str) -> AttachedConcepts:
        """The same with concept ``concept`` named ``name`` ("" removes the name)."""
        names = dict(self.names)
        names.pop(int(concept), None)
        if name.strip():
            names[int(concept)] = name.strip()
        return dataclasses.replace(self, names=names)

    def replaced(self, **changes: Any) -> AttachedConcepts:
        """The same with ``changes`` (``shown``, ``scan``, ``folder``, ...)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """What a session file keeps: the folder, the names, the choice and the data folder."""
        return {
            "folder": self.folder,
            "names": {str(k): v for k, v in sorted(self.names.items())},
            "shown": bool(self.shown),
            "data": self.data,
        }
