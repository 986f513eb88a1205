"""actviz.compare: figures against numpy on hand-made captures, first divergence, skips."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from torch import nn

import actviz
from actviz.core.compare import Comparison, compare, layer_diff
from actviz.edits import ablate
from tests.helpers import make_capture


def np_figures(a: np.ndarray, b: np.ndarray):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
    return cos, np.linalg.norm(a - b) / np.linalg.norm(b), np.abs(a - b).max()


def np_cka(a: np.ndarray, b: np.ndarray) -> float:
    """Linear CKA in its feature form (the code uses the Gram form)."""
    x = a.reshape(a.shape[0], -1).astype(np.float64)
    y = b.reshape(b.shape[0], -1).astype(np.float64)
    x = x - x.mean(0)
    y = y - y.mean(0)
    return np.linalg.norm(y.T @ x) ** 2 / (np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y))


@pytest.fixture
def pair():
    g = torch.Generator().manual_seed(0)
    a1 = torch.randn(4, 3, 5, 5, generator=g)
    b1 = a1.clone()  # identical
    a2 = torch.randn(4, 6, generator=g)
    b2 = a2 + 0.1 * torch.randn(4, 6, generator=g)  # diverges
    a3 = torch.randn(4, 2, 3, generator=g)
    b3 = torch.randn(4, 2, 3, generator=g)
    out_a, out_b = torch.randn(4, 10, generator=g), torch.randn(4, 10, generator=g)
    cap_a = make_capture({"c1": [a1], "fc": [a2], "seq": [a3, a3 * 2], "only_a": [a1]}, out_a)
    cap_b = make_capture({"c1": [b1], "seq": [b3, b3], "fc": [b2]}, out_b)
    return cap_a, cap_b


def test_figures_against_numpy(pair):
    cap_a, cap_b = pair
    cmp = compare(cap_a, cap_b)
    # common layers in run A's order, every call
    assert [(d.name, d.call_index) for d in cmp.layers] == [
        ("c1", 0),
        ("fc", 0),
        ("seq", 0),
        ("seq", 1),
    ]
    for d in (*cmp.layers, cmp.output):
        if d.name == "output":
            a, b = cap_a.output.numpy(), cap_b.output.numpy()
        else:
            a = cap_a.records[d.name][d.call_index].output.numpy()
            b = cap_b.records[d.name][d.call_index].output.numpy()
        cos, rel, mx = np_figures(a, b)
        assert d.shape == a.shape
        assert d.cosine == pytest.approx(cos, abs=1e-12)
        assert d.rel_l2 == pytest.approx(rel, abs=1e-12)
        assert d.max_abs == pytest.approx(mx, abs=1e-7)
        assert d.cka == pytest.approx(np_cka(a, b), abs=1e-12)
    same = cmp.layer("c1")
    assert (same.cosine, same.rel_l2, same.max_abs) == (pytest.approx(1.0), 0.0, 0.0)
    assert same.cka == pytest.approx(1.0)
    assert cmp.first_divergence == cmp.layer("fc")
    assert cmp.layer("seq", 1).rel_l2 > 0.5


def test_large_layers_are_reduced_in_pieces(monkeypatch, pair):
    import actviz.core.compare as compare_module

    whole = compare(*pair)
    monkeypatch.setattr(compare_module, "CHUNK", 7)  # pieces of 1 or a few features
    pieces = compare(*pair)
    for d, e in zip(whole.layers, pieces.layers, strict=True):
        assert (d.name, d.call_index, d.max_abs) == (e.name, e.call_index, e.max_abs)
        for key in ("cosine", "rel_l2", "cka"):
            assert getattr(e, key) == pytest.approx(getattr(d, key), rel=1e-12, abs=1e-12)


def test_cka_invariances_and_degenerate_cases():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 8, generator=g)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    rotated = (a.double() @ q * 3.0 + 1.0).float()  # orthogonal map, scale, shift
    d = layer_diff("x", 0, rotated, a)
    assert d.cka == pytest.approx(1.0, abs=1e-6)
    assert d.rel_l2 > 1.0  # far in L2, the same representation for CKA
    assert layer_diff("x", 0, a[:1], a[:1] * 2).cka is None  # a batch of one
    assert layer_diff("x", 0, a, torch.ones_like(a)).cka is None  # no variance in B
    zero = torch.zeros(2, 3)
    both = layer_diff("z", 0, zero, zero)
    assert (both.cosine, both.rel_l2, both.max_abs) == (1.0, 0.0, 0.0)
    b_zero = layer_diff("z", 0, torch.ones(2, 3), zero)
    assert b_zero.cosine == 0.0 and math.isinf(b_zero.rel_l2) and b_zero.max_abs == 1.0
    assert b_zero.to_dict()["rel_l2"] is None  # JSON has no inf


def test_tolerance_skips_and_errors(pair):
    cap_a, cap_b = pair
    loose = compare(cap_a, cap_b, tol=10.0)
    assert loose.first_divergence is None and loose.tol == 10.0
    only = compare(cap_a, cap_b, layers=["seq"])
    assert [d.name for d in only.layers] == ["seq", "seq"]
    with pytest.raises(ValueError, match="'only_a' is not in run B's capture"):
        compare(cap_a, cap_b, layers=["only_a"])
    with pytest.raises(ValueError, match="tol must be"):
        compare(cap_a, cap_b, tol=-1)
    with pytest.raises(KeyError, match="'c2' call 0 was not compared"):
        loose.layer("c2")
    small = make_capture({"c1": [torch.zeros(1, 3, 2, 2)], "seq": [torch.zeros(4, 2, 3)]})
    cmp = compare(cap_a, small)
    assert [(d.name, d.call_index) for d in cmp.layers] == [("seq", 0)]
    assert cmp.skipped == (
        ("c1", 0, "shapes differ: (4, 3, 5, 5) vs (1, 3, 2, 2)"),
        ("seq", 1, "only one run made this call"),
    )
    assert cmp.output is None


def test_to_dict_is_strict_json(pair):
    cmp = compare(*pair)
    data = json.loads(json.dumps(cmp.to_dict(), allow_nan=False))
    assert data["first_divergence"]["name"] == "fc"
    assert [row["name"] for row in data["layers"]] == ["c1", "fc", "seq", "seq"]
    assert data["layers"][0]["shape"] == [4, 3, 5, 5]
    assert data["output"]["name"] == "output"
    assert set(data["metrics"]) == {"cosine", "rel_l2", "max_abs", "cka"}
    assert isinstance(cmp, Comparison)


def test_edited_run_diverges_at_the_edited_layer():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(64, 3)
    ).eval()
    x = torch.randn(2, 3, 8, 8)
    plain = actviz.capture(model, x)
    edited = actviz.capture(model, x, edits={"2": ablate([1])})
    cmp = actviz.compare(edited, plain)
    assert [d.name for d in cmp.layers] == ["0", "1", "2", "3", "4", "5"]
    assert cmp.layer("0").rel_l2 == 0.0 and cmp.layer("1").max_abs == 0.0
    assert cmp.first_divergence is not None and cmp.first_divergence.name == "2"
    ch1 = plain["2"].tensor[:, 1]
    torch.testing.assert_close(
        cmp.layer("2").rel_l2, float(ch1.norm() / plain["2"].tensor.norm()), rtol=1e-6, atol=0
    )
    assert cmp.output is not None and cmp.output.rel_l2 > 0


class Reused(nn.Module):
    """``b(act(a(act(x))))``: ``act`` runs before and after ``a``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)
        self.act = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.act(self.a(self.act(x))))


def test_first_divergence_in_execution_order_with_a_reused_module():
    torch.manual_seed(0)
    model = Reused().eval()
    x = torch.randn(3, 4)
    plain = actviz.capture(model, x)
    edited = actviz.capture(model, x, edits={"a": ablate([0, 2])})
    assert [(r.name, r.call_index, r.seq) for r in edited.all_records()] == [
        ("act", 0, 0),
        ("act", 1, 2),
        ("a", 0, 1),
        ("b", 0, 3),
    ]
    cmp = actviz.compare(edited, plain)
    assert cmp.layer("act", 0).rel_l2 == 0.0 and cmp.layer("act", 1).rel_l2 > 0
    assert (cmp.first_divergence.name, cmp.first_divergence.call_index) == ("a", 0)
