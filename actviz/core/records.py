"""What a capture returns: one :class:`LayerRecord` per module call, gathered in a :class:`Capture`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from actviz.core.structures import first_tensor, iter_tensors

_TARGET_FIELDS = ("target_value", "target_index", "target_description")
#: What a capture with gradients warns when the model's weights are inference tensors.
INFERENCE_WEIGHTS_WARNING = (
    "no gradients: the model's weights were made inside torch.inference_mode(), and such "
    "tensors cannot take part in autograd; load or build the model outside inference_mode "
    "(or clone its parameters there) to get gradients"
)


class CaptureCancelled(RuntimeError):
    """Raised when ``should_stop()`` returned True during a capture."""


class CaptureTooLarge(RuntimeError):
    """Raised when the recorded tensors would exceed ``max_bytes``."""


@dataclass
class LayerRecord:
    """One call of one hooked module, as detached CPU snapshots taken when it ran: ``call_index``
    counts the module's calls (0 first); ``inputs``/``output`` keep their structure; ``grad_output``
    and ``grad_inputs`` (this module's only) are None without gradients; ``seq``: finish order."""

    name: str
    call_index: int
    module_type: str
    inputs: tuple = ()
    output: Any = None
    grad_output: Any = None
    grad_inputs: tuple | None = None
    seq: int | None = None

    @property
    def tensor(self) -> torch.Tensor | None:
        """The first tensor of :attr:`output` (what views display)."""
        return first_tensor(self.output)

    @property
    def grad(self) -> torch.Tensor | None:
        return first_tensor(self.grad_output)

    def __repr__(self) -> str:
        t = self.tensor
        shape = tuple(t.shape) if t is not None else None
        return (
            f"LayerRecord({self.name!r}, call={self.call_index}, type={self.module_type}, "
            f"output={shape}, grad={'yes' if self.grad is not None else 'no'})"
        )


@dataclass
class Capture:
    """The result of :func:`capture`: per-layer records plus the model-level results."""

    names: list[str]
    records: dict[str, list[LayerRecord]]
    output: Any
    input_grads: Any
    target_value: float | None
    target_index: int | None
    target_description: str
    warnings: list[str]
    inputs: Any
    nbytes: int
    elapsed_s: float
    gradients: bool = True
    mode: str = "eval"
    extra: dict[str, Any] = field(default_factory=dict)
    #: The edits applied (:mod:`actviz.core.edit_kinds`): ``{layer: (Edit, ...)}``; {} when none.
    edits: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def defer_target(self, numbers: Callable[[], tuple[float | None, int | None, str]]) -> None:
        """Leave the ``target_*`` attributes to ``numbers()``, called on the first read of one."""
        state = self.__dict__
        for name in _TARGET_FIELDS:
            state.pop(name, None)
        state["_target_numbers"] = numbers

    def __getattr__(self, name: str) -> Any:
        # Reached only for attributes not set: the target fields that defer_target left.
        state = self.__dict__
        if (numbers := state.get("_target_numbers")) is None or name not in _TARGET_FIELDS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        state.update(zip(_TARGET_FIELDS, numbers(), strict=True))
        state.pop("_target_numbers", None)
        return state[name]

    def __getitem__(self, name: str) -> LayerRecord:
        return self.calls(name)[0]

    def __contains__(self, name: object) -> bool:
        return name in self.records

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def calls(self, name: str) -> list[LayerRecord]:
        """Every call of layer ``name`` in execution order (one record per call)."""
        if name not in self.records:
            raise KeyError(f"layer {name!r} was not captured (captured: {self.names})")
        return list(self.records[name])

    def held_bytes(self) -> int:
        """Bytes of every tensor kept (outputs, gradients, inputs, the model's output), each
        storage once; ``nbytes`` counts the recorded outputs alone, which the budget limits."""
        storages = {}
        for t in iter_tensors((self.records, self.output, self.input_grads, self.inputs)):
            storage = t.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())

    def all_records(self) -> list[LayerRecord]:
        """Every record of every layer, layers in execution order."""
        return [rec for name in self.names for rec in self.records[name]]
