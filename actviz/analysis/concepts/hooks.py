"""Where a dictionary reads its vectors, from a ``hook_name``: a module's output, or SAELens's
``blocks.N.hook_resid_pre``/``hook_resid_post`` (block N's input/output, found under the usual
block names).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from torch import nn

_RESID = re.compile(r"^blocks\.(\d+)\.hook_resid_(pre|post|mid)$")
# Containers of a model's blocks, most common first (matched as a suffix of the module name).
_BLOCK_LISTS = (
    "transformer.h", "model.layers", "gpt_neox.layers", "model.decoder.layers", "decoder.layers",
    "encoder.layer", "layers", "h", "blocks",
)  # fmt: skip


@dataclass(frozen=True)
class HookPoint:
    """A module and which ``side`` of it (``"output"``, ``"input"``) holds the vectors."""

    module: str
    side: str = "output"


def _block_list(model: nn.Module) -> str | None:
    names = {name for name, _ in model.named_modules()}
    for suffix in _BLOCK_LISTS:
        for name in sorted(names, key=len):
            if (name == suffix or name.endswith("." + suffix)) and f"{name}.0" in names:
                return name
    return None


def resolve_hook(model: nn.Module, hook_name: str) -> HookPoint:
    """The module and side ``hook_name`` reads in ``model``; ``ValueError`` when none is found."""
    modules = dict(model.named_modules())
    if hook_name in modules:
        return HookPoint(hook_name, "output")
    m = _RESID.match(hook_name)
    if m is not None:
        index, where = int(m.group(1)), m.group(2)
        if where == "mid":
            raise ValueError(
                f"{hook_name!r}: the residual stream between attention and MLP is no module's "
                "input or output; pick a block's hook_resid_pre or hook_resid_post"
            )
        blocks = _block_list(model)
        if blocks is None:
            raise ValueError(
                f"{hook_name!r}: no list of blocks (transformer.h, model.layers, ...) in "
                f"{type(model).__name__}; pass the layer name yourself"
            )
        name = f"{blocks}.{index}"
        if name not in modules:
            raise ValueError(f"{hook_name!r}: {type(model).__name__} has no block {name!r}")
        return HookPoint(name, "input" if where == "pre" else "output")
    close = difflib.get_close_matches(hook_name, [n for n in modules if n], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"no layer {hook_name!r} in {type(model).__name__}{hint}")
