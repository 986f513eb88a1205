"""A private copy of the session's model for background scans.

Hooks are per-module state (one model, one worker): a scan that ran its forward passes on the
model the window captures with would mix its records with the window's runs. A scan and its
top-k views therefore each run on their own copy. The window's capture worker may be inside a
capture while the copy is made; its hooks (``actviz``'s recorder methods) are left out of the
copy, hooks the user registered are kept (their functions shared, as ``copy.copy`` would).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from torch import nn

#: The hook dictionaries of an ``nn.Module`` (per-module forward / backward hooks).
_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)


def _is_transient(hook: Any) -> bool:
    """Whether ``hook`` belongs to an actviz capture running now (removed when it ends)."""
    owner = getattr(hook, "__self__", None)
    where = type(owner).__module__ if owner is not None else getattr(hook, "__module__", "")
    return str(where or "").startswith("actviz.")


def detached_copy(model: nn.Module) -> nn.Module:
    """A deep copy of ``model`` without the hooks of a capture that may be running on it.

    Parameters
    ----------
    model
        The session's model (not changed).

    Returns
    -------
    nn.Module
        An independent copy in eval mode; its parameters and buffers are new tensors.

    Raises
    ------
    TypeError, RuntimeError
        When the model cannot be copied (some scripted or exotic modules).
    """
    memo: dict[int, Any] = {}
    for module in model.modules():
        for attr in _HOOK_DICTS:
            hooks = getattr(module, attr, None)
            if isinstance(hooks, dict):
                # Copying the dictionary would copy a running capture's recorder with it.
                kept = OrderedDict((k, h) for k, h in list(hooks.items()) if not _is_transient(h))
                memo[id(hooks)] = kept
    clone = copy.deepcopy(model, memo)
    clone.eval()
    return clone


__all__ = ["detached_copy"]
