"""Session files keep concept edits with their dictionaries: opened again, the edits remove the
same concepts and the model's output is bit for bit the one saved."""

from __future__ import annotations

import json
import zipfile

import torch
from torch import nn
from torch.nn import functional as F

import actviz
from actviz.core.edit_kinds import ablate, concept
from actviz.workspace.session_file import (
    PinState,
    SessionState,
    edits_from_json,
    edits_to_json,
    load_state,
    save_state,
    unsaved_warnings,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.ReLU()
        self.head = nn.Sequential(nn.Conv2d(8, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(8, 4))  # fmt: skip

    def forward(self, x):
        return self.head(self.act(self.conv(x)))


def _random_dictionary(architecture: str = "topk", seed: int = 0) -> actviz.concepts.Concepts:
    g = torch.Generator().manual_seed(seed)
    w_dec = F.normalize(torch.randn(20, 8, generator=g), dim=1)
    return actviz.concepts.Concepts(
        w_dec.T.clone(), w_dec, 0.05 * torch.randn(20, generator=g), 0.1 * torch.randn(8, generator=g),
        architecture=architecture, k=3 if architecture == "topk" else None,
        threshold=torch.full((20,), 0.05) if architecture == "jumprelu" else None,
        hook_name="act", info={"seed": seed},
    )  # fmt: skip


def test_concept_edits_round_trip_bit_for_bit(tmp_path):
    net = Net().eval()
    x = torch.rand(1, 3, 10, 10, generator=torch.Generator().manual_seed(1))
    c, j = _random_dictionary(), _random_dictionary("jumprelu", seed=4)
    edits = {
        "act": (concept(c, [1, 3]), concept(c, [5], scale=0.5), ablate([7])),
        "conv": (concept(j, [2], scale=2.0),),
    }
    cap = actviz.capture(net, x, ["act"], edits=edits)
    pinned = actviz.capture(net, x, ["act"], edits={"act": (concept(c, [1, 3]),)})
    plain = actviz.capture(net, x, ["act"], gradients=False).output
    assert not torch.allclose(cap.output, plain, atol=1e-4)  # the edits change the output
    state = SessionState(edits=edits, capture=cap, pins=(PinState("one removed", 1.0, pinned),))
    assert unsaved_warnings(state) == []
    path = tmp_path / "concepts.actviz"
    assert save_state(state, path) == []
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert "concepts.npz" in zf.namelist()
    # Two dictionaries, each kept once however many edits and captures use it.
    assert len(manifest["concepts"]["dictionaries"]) == 2

    back = load_state(path)
    assert back.warnings == ()
    got = back.edits["act"]
    assert [(e.kind, e.channels, e.factor) for e in got] == [
        ("concept", (1, 3), 0.0),
        ("concept", (5,), 0.5),
        ("ablate", (7,), None),
    ]
    restored = got[0].concepts
    assert got[1].concepts is restored  # one dictionary object for the edits that share it
    assert back.capture.edits["act"][0].concepts is restored
    assert back.pins[0].capture.edits["act"][0].concepts is restored
    for name, t in c.weights().items():
        assert torch.equal(restored.weights()[name], t), name
    assert (restored.architecture, restored.k, restored.hook_name) == ("topk", 3, "act")
    assert restored is not c and restored.same_as(c) and not restored.same_as(j)
    assert dict(restored.info) == {"seed": 0}
    other = back.edits["conv"][0].concepts
    assert other.architecture == "jumprelu" and torch.equal(other.threshold, j.threshold)
    # Run again with the restored edits: the same output, bit for bit.
    again = actviz.capture(net, x, ["act"], edits=back.edits)
    assert torch.equal(again.output, cap.output)
    assert torch.equal(again["act"].tensor, cap["act"].tensor)


def test_a_concept_row_without_its_dictionary_is_left_out_with_a_warning():
    c = _random_dictionary()
    rows, warnings = edits_to_json({"act": (concept(c, [2]),)}, dictionaries=(kept := []))
    assert warnings == [] and kept == [c] and rows[0]["concepts"] == 0
    back, warnings = edits_from_json(rows, dictionaries=kept)
    assert back["act"][0].concepts is c and back["act"][0].channels == (2,)
    back, warnings = edits_from_json(rows)  # no dictionaries given
    assert back == {} and "dictionary is not in the file" in warnings[0]
