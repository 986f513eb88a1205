"""Concept effects (estimate and exact) against hand-written loops on tiny models; the concept
atlas; feature visualisation of a concept's decoder direction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

import actviz
from tests.analysis.concept_nets import LAYER, Net, dictionary, hand_removed


def hand_estimate(net, x, c, scale, read):
    """``-(1 - s) sum_p z_i(p) d_i . dT/dx(p)`` for every concept, one concept at a time."""
    kept = {}

    def hook(_m, _a, out):
        out.retain_grad()
        kept["a"] = out

    handle = net.act.register_forward_hook(hook)
    try:
        read(net(x)).backward()
    finally:
        handle.remove()
    a, g = kept["a"].detach(), kept["a"].grad
    z = c.encode(a.movedim(1, -1))  # (N, H, W, n)
    gv = g.movedim(1, -1).double()
    return np.array(
        [
            -(1 - scale) * float((z[..., i].double() * (gv @ c.W_dec[i].double())).sum())
            for i in range(c.d_sae)
        ]
    )


@pytest.mark.parametrize("scale", [0.0, 0.5])
def test_exact_and_estimate_equal_hand_written_loops_one_sample(scale):
    net, c = Net(), dictionary()
    x = torch.rand(1, 3, 9, 9, generator=torch.Generator().manual_seed(1))
    eff = actviz.concepts.concept_effects(
        net, x, c, LAYER, method="exact", which="all", scale=scale, batch=5
    )
    with torch.no_grad():
        top = int(net(x)[0].argmax())
    assert eff.target_index == top

    def read(out):
        return out[0, top]

    clean = float(read(net(x).detach()))
    want = np.array([float(hand_removed(net, x, c, i, scale, read)) - clean for i in range(24)])
    res = eff[LAYER]
    assert res.channels == 24 and bool(res.verified.all())
    np.testing.assert_allclose(res.exact, want, atol=1e-5, rtol=0)
    assert np.abs(want).max() > 1e-3  # the concepts do something
    np.testing.assert_allclose(res.estimate, hand_estimate(net, x, c, scale, read), atol=1e-6)
    assert eff.forwards == 5  # 24 concepts, 5 a pass
    assert eff.top(LAYER, 1)[0].channel == int(np.argmax(np.abs(res.estimate)))
    assert eff.rank_correlation(LAYER) > 0.5
    assert not net.act._forward_hooks and net.training  # left as found (eval while measured)


def test_exact_of_a_batch_with_a_callable_target_and_batch_sizes_agree():
    net, c = Net(), dictionary(seed=3)
    x = torch.rand(2, 3, 9, 9, generator=torch.Generator().manual_seed(2))

    def read(out):
        return out[:, 2].sum()

    eff = actviz.concepts.concept_effects(
        net, x, c, LAYER, target=read, method="exact", which=[3, 0, 7, 11]
    )
    one = actviz.concepts.concept_effects(
        net, x, c, LAYER, target=read, method="exact", which=[3, 0, 7, 11], batch=1
    )
    clean = float(read(net(x).detach()))
    res = eff[LAYER]
    assert np.flatnonzero(res.verified).tolist() == [0, 3, 7, 11]
    for i in (3, 0, 7, 11):
        want = float(hand_removed(net, x, c, i, 0.0, read)) - clean
        assert res.exact[i] == pytest.approx(want, abs=1e-5)
    np.testing.assert_allclose(one[LAYER].exact[[0, 3, 7, 11]], res.exact[[0, 3, 7, 11]], atol=1e-5)
    assert eff.forwards == 1 and one.forwards == 4


def test_estimate_is_exact_when_the_rest_of_the_network_is_linear():
    net, c = Net(linear_head=True), dictionary(seed=5)
    x = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(4))
    eff = actviz.concepts.concept_effects(net, x, c, LAYER, method="exact", which="all")
    res = eff[LAYER]
    np.testing.assert_allclose(res.estimate, res.exact, atol=1e-5)
    assert eff.to_dict()["layers"][LAYER]["channels"] == 24


def test_estimate_from_a_capture_runs_nothing_and_matches():
    net, c = Net(), dictionary()
    x = torch.rand(1, 3, 9, 9, generator=torch.Generator().manual_seed(1))
    cap = actviz.capture(net, x, [LAYER])
    est = actviz.concepts.concept_estimate_from_capture(net, cap, c, LAYER)
    again = actviz.concepts.concept_effects(net, x, c, LAYER)
    np.testing.assert_allclose(est[LAYER].estimate, again[LAYER].estimate, atol=1e-9)
    assert est.method == "estimate" and "concept removed" in est.baseline
    with pytest.raises(ValueError, match="gradients"):
        actviz.concepts.concept_estimate_from_capture(
            net, actviz.capture(net, x, [LAYER], gradients=False), c, LAYER
        )
    with pytest.raises(ValueError, match="out of range"):
        actviz.concepts.concept_effects(net, x, c, LAYER, method="exact", which=[24])


def test_concept_atlas_places_decoder_directions():
    c = dictionary(n=30)
    p = actviz.concepts.concept_atlas(c)
    assert p.coords.shape == (30, 2)
    unit = F.normalize(c.W_dec.double(), dim=1).numpy()
    centred = unit - unit.mean(0)
    # PCA of the unit directions: the first axis is the top right singular vector.
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axis = vt[0] * np.sign(vt[0][np.argmax(np.abs(vt[0]))])
    np.testing.assert_allclose(p.coords[:, 0], centred @ axis, atol=1e-9)
    # A concept and its copy land on one point; the layout ignores a direction's length.
    w = c.W_dec.clone()
    w[1] = 3.0 * w[0]
    twin = actviz.concepts.Concepts(w.T.clone(), w, c.b_enc, c.b_dec, architecture="topk", k=4)
    q = actviz.concepts.concept_atlas(twin)
    np.testing.assert_allclose(q.coords[0], q.coords[1], atol=1e-6)  # float32 rows
    near = actviz.concepts.similar_concepts(twin, 0, k=3)
    assert near[0][0] == 1 and near[0][1] == pytest.approx(1.0)
    assert len(near) == 3 and 0 not in [i for i, _ in near]


def test_feature_visualisation_of_a_concepts_direction():
    from actviz.analysis.visualize.feature_vis import visualize

    net, c = Net(), dictionary()
    i = 5
    direction = c.W_dec[i].clone()
    vis = visualize(net, LAYER, [0], objective=direction, steps=25, size=16)
    assert vis.objective[-3:].mean() > vis.objective[:3].mean() + 1e-3  # it climbs
    # The same as an objective written here: the mean over positions of the output along d_i.
    manual = visualize(
        net, LAYER, [0], objective=lambda a: (a.movedim(1, -1) @ direction).mean((1, 2)),
        steps=25, size=16,
    )  # fmt: skip
    np.testing.assert_allclose(vis.activations, manual.activations, rtol=1e-4)
    np.testing.assert_array_equal(vis.images, manual.images)
