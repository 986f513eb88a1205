"""A language model's predictions and target are named by token text, on a real tiny GPT-2
with a word-level tokenizer (and a BERT classifier keeps its class names)."""

from __future__ import annotations

import pytest
import torch

from actviz.core.capture import capture
from actviz.core.targets import name_token, sequence_logits, token_phrase
from actviz.display.attribution import prediction_kind, top_predictions
from actviz.display.logit_lens import token_texts
from actviz.display.prepare import prepare
from actviz.display.prepared import DisplaySpec

transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from tests.io.hf_tiny import LABELS, gpt2_over, tiny_tokenizer  # noqa: E402

TEXT = "the cat sat on the"


def _run(model, tok, layers, categories=None):
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    tokens = tuple(tok.convert_ids_to_tokens(ids[0].tolist()))
    cap = capture(model, {"input_ids": ids}, layers)
    spec = DisplaySpec(
        layers=tuple(layers),
        tokens=tokens,
        tokenizer=tok,
        categories=tuple(categories) if categories else None,
    )
    return ids, cap, prepare(cap, spec, model=model)


def test_a_causal_lm_shows_the_next_token_top5_with_texts_and_probabilities():
    tok = tiny_tokenizer(bert=False)
    model = gpt2_over(tok)
    ids, cap, result = _run(model, tok, ["lm_head"])
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids).logits[0, -1].double(), dim=0)
    top = torch.topk(probs, 5)
    assert [i for i, _label, _p in result.predictions] == top.indices.tolist()
    assert [p for _i, _label, p in result.predictions] == pytest.approx(top.values.tolist())
    words = [tok.decode([i]) for i in top.indices.tolist()]
    assert [label for _i, label, _p in result.predictions] == [repr(w) for w in words]
    assert result.prediction_kind == "token"
    # The target names the token by its text: "... (token 4 'the')", not only "token 4".
    first = int(top.indices[0])
    assert cap.target_index == first
    assert result.target_text == (
        f"next-token logit at the last position (token {first} {words[0]!r})"
    )


def test_an_explicit_token_target_is_named_by_its_text():
    tok = tiny_tokenizer(bert=False)
    model = gpt2_over(tok)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    mat = tok.convert_tokens_to_ids("mat")
    cap = capture(model, {"input_ids": ids}, ["lm_head"], target=mat)
    result = prepare(cap, DisplaySpec(layers=("lm_head",), tokenizer=tok), model=model)
    assert result.target_text == f"logit of token {mat} 'mat' at the last position"


def test_without_a_tokenizer_tokens_keep_their_ids():
    tok = tiny_tokenizer(bert=False)
    model = gpt2_over(tok)
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    cap = capture(model, {"input_ids": ids}, ["lm_head"])
    result = prepare(cap, DisplaySpec(layers=("lm_head",)), model=model)
    assert [label for _i, label, _p in result.predictions] == [
        f"token {i}" for i, _label, _p in result.predictions
    ]
    assert result.target_text == cap.target_description


def test_a_sequence_classifier_shows_its_class_names():
    tok = tiny_tokenizer(bert=True)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, num_labels=3, id2label=LABELS,
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(config).eval()
    names = [LABELS[i] for i in range(3)]
    ids, cap, result = _run(model, tok, ["classifier"], categories=names)
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids).logits[0].double(), dim=0)
    order = torch.argsort(probs, descending=True).tolist()
    assert [(i, label) for i, label, _p in result.predictions] == [(i, names[i]) for i in order]
    assert result.prediction_kind == "class"
    assert result.target_text.endswith(f": {names[order[0]]}")


def test_token_phrases_and_texts():
    assert token_phrase(4) == "token 4" and token_phrase(4, " the") == "token 4 ' the'"
    assert name_token("logit of token 42 at the end", 4, "x") == "logit of token 42 at the end"
    assert name_token("top (token 4)", 4, "x") == "top (token 4 'x')"
    tok = tiny_tokenizer(bert=False)
    cat = tok.convert_tokens_to_ids("cat")
    assert token_texts(tok, [cat]) == ["cat"]
    assert token_texts(None, [cat]) == [f"#{cat}"]
    # Masked and token-classifier logits are per position too; a plain tensor is not.
    logits = torch.randn(1, 3, 7)
    assert sequence_logits({"logits": logits}) is logits
    assert sequence_logits(logits) is None
    assert prediction_kind({"logits": logits}) == "token"
    assert prediction_kind({"logits": logits}, ["a"] * 7) == "class"
    rows = top_predictions({"logits": logits}, None, k=2)
    assert [i for i, _l, _p in rows] == torch.topk(logits[0, -1], 2).indices.tolist()


def test_before_and_after_predictions_of_a_language_model_name_next_tokens():
    from actviz.display.difference import prediction_change

    tok = tiny_tokenizer(bert=False)
    model = gpt2_over(tok)
    a = tok(TEXT, return_tensors="pt")["input_ids"]
    b = tok("a dog sat on the", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out_a, out_b = model(input_ids=a), model(input_ids=b)
    mat = tok.convert_tokens_to_ids("mat")
    change = prediction_change(out_a, out_b, k=3, target=mat, tokenizer=tok)
    assert change.message == "" and change.rows
    pa = torch.softmax(out_a.logits[0, -1].double(), 0)
    pb = torch.softmax(out_b.logits[0, -1].double(), 0)
    want = set(torch.topk(pa, 3).indices.tolist()) | set(torch.topk(pb, 3).indices.tolist())
    assert {r.index for r in change.rows} == want
    for r in change.rows:
        assert r.name == repr(tok.decode([r.index]))
        assert r.p_a == pytest.approx(float(pa[r.index]))
        assert r.dp == pytest.approx(float(pa[r.index] - pb[r.index]))
    assert change.target.index == mat and change.target.name == "'mat'"
    assert change.top_a == int(pa.argmax()) and change.top_b == int(pb.argmax())
    # Without a tokenizer the tokens keep their ids.
    plain = prediction_change(out_a, out_b, k=3)
    assert all(r.name == f"token {r.index}" for r in plain.rows)
