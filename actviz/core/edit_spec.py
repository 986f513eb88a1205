"""One edit as a record: :class:`Edit`, :class:`EditError`, :data:`KINDS`."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch

from actviz.core.records import Capture

#: Every kind of edit.
KINDS = ("ablate", "scale", "keep", "clamp", "patch", "custom", "concept")
#: Fields compared by identity (objects with no value equality of their own).
_BY_IDENTITY = ("source", "fn", "concepts")
#: What :meth:`Edit.describe` says of the kinds with nothing but channels and a factor.
_DESCRIBED = {
    "ablate": "ablate {ch}",
    "keep": "keep {ch}",
    "scale": "scale {ch} x{factor:g}",
    "patch": "patch {ch} from another run",
}


class EditError(ValueError):
    """An edit that cannot be applied: bad layer, channel out of range, patch shape mismatch."""


def _channels(channels: Any) -> tuple[int, ...] | None:
    if channels is None:
        return None
    if isinstance(channels, numbers.Integral) or (
        isinstance(channels, torch.Tensor) and channels.ndim == 0
    ):
        channels = [channels]
    out: list[int] = []
    for c in channels:
        if isinstance(c, bool) or not isinstance(c, (numbers.Integral, torch.Tensor)):
            raise EditError(f"channels must be integers, not {c!r}")
        c = int(c)
        if c < 0:
            raise EditError(f"channel {c} is negative; channels count from 0")
        if c not in out:
            out.append(c)
    if not out:
        raise EditError("no channels given (use channels=None for every channel)")
    return tuple(out)


@dataclass(frozen=True, eq=False)
class Edit:
    """One change to a module's output, made by :func:`ablate`, :func:`scale`, :func:`keep`,
    :func:`clamp`, :func:`patch`, :func:`custom` or :func:`concept`.

    ``channels`` are sorted without duplicates (None: all; ``concept``: concept indices);
    ``factor`` is ``scale``'s factor or ``concept``'s scale; ``min``/``max`` ``clamp``'s bounds;
    ``source`` ``patch``'s run; ``fn`` ``custom``'s callable; ``call`` None edits every call, ``k``
    the k-th; ``dim`` overrides :func:`channel_dim`. ``source``, ``fn``, ``concepts`` compare by id.
    """

    kind: str
    channels: tuple[int, ...] | None = None
    factor: float | None = None
    min: float | None = None
    max: float | None = None
    source: Capture | None = None
    fn: Callable | None = None
    call: int | None = None
    enabled: bool = True
    dim: int | None = None
    concepts: Any = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise EditError(f"unknown edit kind {self.kind!r}; one of {', '.join(KINDS)}")
        object.__setattr__(self, "channels", _channels(self.channels))
        if self.call is not None:
            if isinstance(self.call, bool) or not isinstance(self.call, numbers.Integral):
                raise EditError(f"call must be an integer or None, not {self.call!r}")
            if self.call < 0:
                raise EditError(
                    f"call must be >= 0 (0 is the module's first call), not {self.call}"
                )
            object.__setattr__(self, "call", int(self.call))
        if self.dim is not None:
            object.__setattr__(self, "dim", int(self.dim))
        if self.kind == "scale":
            if self.factor is None or not math.isfinite(float(self.factor)):
                raise EditError(f"scale needs a finite factor, not {self.factor!r}")
            object.__setattr__(self, "factor", float(self.factor))
        if self.kind == "clamp":
            if self.min is None and self.max is None:
                raise EditError("clamp needs min, max or both")
            for bound in ("min", "max"):
                if (value := getattr(self, bound)) is not None and math.isnan(float(value)):
                    raise EditError(f"clamp {bound} is NaN")
                object.__setattr__(self, bound, None if value is None else float(value))
            if self.min is not None and self.max is not None and self.min > self.max:
                raise EditError(f"clamp min {self.min:g} is above max {self.max:g}")
        if self.kind == "patch" and not isinstance(self.source, Capture):
            raise EditError(
                f"patch needs a source Capture (actviz.capture of another run), "
                f"not {type(self.source).__name__}"
            )
        if self.kind == "custom" and not callable(self.fn):
            raise EditError(f"a custom edit needs a callable f(output) -> output, not {self.fn!r}")
        if self.kind == "keep" and not self.channels:
            raise EditError("keep needs the channels to keep")
        if self.kind == "concept":
            c = self.concepts
            if c is None or not callable(getattr(c, "contribution", None)):
                raise EditError(
                    f"a concept edit needs a dictionary (actviz.concepts.Concepts), not {c!r}"
                )
            if not self.channels:
                raise EditError("a concept edit needs the concepts to change")
            bad = [i for i in self.channels if i >= int(c.d_sae)]
            if bad:
                raise EditError(
                    f"concept {bad[0]} is out of range; the dictionary has {c.d_sae} concepts "
                    f"(0..{int(c.d_sae) - 1})"
                )
            factor = 0.0 if self.factor is None else float(self.factor)
            if not math.isfinite(factor):
                raise EditError(f"a concept edit needs a finite scale, not {self.factor!r}")
            object.__setattr__(self, "factor", factor)

    def _key(self) -> tuple:
        return tuple(
            id(getattr(self, f.name)) if f.name in _BY_IDENTITY else getattr(self, f.name)
            for f in fields(self)
        )

    def __eq__(self, other: object) -> bool:
        return NotImplemented if not isinstance(other, Edit) else self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def describe(self) -> str:
        """Short text for the Edits panel: ``"ablate ch 3, 7"``, ``"scale ch 5 x0.5"``."""
        ch, n = "all", len(self.channels or ())
        if self.channels is not None:
            more = f", ... (+{n - 6})" if n > 6 else ""
            ch = f"ch {', '.join(str(c) for c in self.channels[:6])}{more}"
        if self.kind == "clamp":
            lo = "-inf" if self.min is None else f"{self.min:g}"
            hi = "inf" if self.max is None else f"{self.max:g}"
            text = f"clamp {ch} to [{lo}, {hi}]"
        elif self.kind == "concept":
            what = ch.replace("ch ", "concept ", 1)
            text = f"remove {what}" if self.factor == 0 else f"scale {what} x{self.factor:g}"
        elif self.kind == "custom":
            text = f"custom {getattr(self.fn, '__name__', type(self.fn).__name__)}"
        else:
            text = _DESCRIBED[self.kind].format(ch=ch, factor=self.factor)
        if self.call is not None:
            text += f" (call {self.call})"
        if not self.enabled:
            text += " (off)"
        return text

    def __repr__(self) -> str:
        return f"Edit({self.describe()!r})"
