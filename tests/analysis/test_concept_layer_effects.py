"""A mix of layers ranked by channels and by concepts (the dock's rows for a panel showing
concepts): estimates and exact values equal the channels' and the concepts' own functions and
a hand-written hook; the what-if edits remove concepts."""

from __future__ import annotations

import numpy as np
import torch

import actviz
from actviz.analysis.concepts.layer_effects import (
    UnitEffects,
    estimate_layers,
    unit_edit,
    unit_name,
    verify_layers,
)
from actviz.analysis.effects.channel_effects import estimate_from_capture, verify
from actviz.analysis.effects.effect_results import Effects
from tests.analysis.concept_nets import LAYER, Net, dictionary, hand_removed


def _captured_net():
    net = Net().eval()
    x = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(2))
    cap = actviz.capture(net, x, ["conv", LAYER], target=1)
    return net, x, cap, dictionary()


def test_without_a_dictionary_it_is_the_channels_ranking():
    net, _, cap, c = _captured_net()
    eff = estimate_layers(net, cap, ["conv", LAYER], {"other": c}, target=1)
    assert not isinstance(eff, UnitEffects) and unit_name(eff, LAYER) == "channel"
    want = estimate_from_capture(net, cap, ["conv", LAYER], target=1)
    np.testing.assert_array_equal(eff[LAYER].estimate, want[LAYER].estimate)


def test_a_layer_with_a_dictionary_is_ranked_by_its_concepts_estimate_and_exact():
    net, x, cap, c = _captured_net()
    eff = estimate_layers(net, cap, ["conv", LAYER], {LAYER: c}, target=1)
    assert isinstance(eff, UnitEffects) and eff.layers == ("conv", LAYER)
    assert unit_name(eff, LAYER) == "concept" and unit_name(eff, "conv") == "channel"
    assert eff[LAYER].channels == c.d_sae and eff["conv"].channels == 8
    own = actviz.concepts.concept_estimate_from_capture(net, cap, c, LAYER)
    np.testing.assert_allclose(eff[LAYER].estimate, own[LAYER].estimate, rtol=0, atol=0)
    chans = estimate_from_capture(net, cap, ["conv"], target=1)
    np.testing.assert_array_equal(eff["conv"].estimate, chans["conv"].estimate)

    steps = []
    done = verify_layers(net, eff, 3, progress=lambda d, t: steps.append((d, t)))
    assert isinstance(done, UnitEffects) and done.method == "exact"
    assert steps[-1] == (6, 6) and [d for d, _ in steps] == sorted(d for d, _ in steps)
    top = [int(i) for i in eff[LAYER].order()[:3]]
    assert np.flatnonzero(done[LAYER].verified).tolist() == sorted(top)
    with torch.no_grad():
        clean = float(net(x)[0, 1])
    for i in top:  # the concept removed by a forward hook written here
        want = hand_removed(net, x, c, i, 0.0, lambda out: float(out[0, 1])) - clean
        assert abs(done[LAYER].exact[i] - want) < 1e-5
    # The channels' exact values are verify()'s own.
    ref = verify(net, chans, 3)
    np.testing.assert_allclose(done["conv"].exact, ref["conv"].exact, equal_nan=True)
    # Asked per layer: only those units.
    one = verify_layers(net, eff, {LAYER: [top[-1]]})
    assert np.flatnonzero(one[LAYER].verified).tolist() == [top[-1]]
    assert not one["conv"].verified.any()


def test_the_edits_remove_the_top_concepts_or_all_but_them():
    net, x, cap, c = _captured_net()
    eff = estimate_layers(net, cap, [LAYER], {LAYER: c}, target=1)
    top = [int(i) for i in eff[LAYER].order()[:2]]
    ablate = unit_edit(eff, LAYER, top, keep=False)
    kept = unit_edit(eff, LAYER, top, keep=True)
    out = actviz.capture(net, x, [], edits={LAYER: ablate}, gradients=False).output
    hooked = hand_removed(net, x, c, top[0], 0.0, lambda o: o)  # one concept: differs
    assert not torch.allclose(out, hooked)

    def removed(indices):
        def hook(_m, _a, o):
            v = o.movedim(1, -1)
            z = c.encode(v)[..., indices]
            return (v - z @ c.W_dec[indices]).movedim(-1, 1)

        handle = net.act.register_forward_hook(hook)
        try:
            with torch.no_grad():
                return net(x)
        finally:
            handle.remove()

    torch.testing.assert_close(out, removed(top), rtol=0, atol=1e-5)
    rest = [i for i in range(c.d_sae) if i not in top]
    out_kept = actviz.capture(net, x, [], edits={LAYER: kept}, gradients=False).output
    torch.testing.assert_close(out_kept, removed(rest), rtol=0, atol=1e-5)
    # A channels layer keeps its channel edits.
    plain = estimate_layers(net, cap, ["conv"], {}, target=1)
    assert isinstance(plain, Effects)
    assert type(unit_edit(plain, "conv", [1, 2], keep=False)) is type(actviz.edits.ablate([1, 2]))
