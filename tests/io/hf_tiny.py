"""Tiny random Hugging Face models saved with a tokenizer trained on a few sentences.

Shared by the io and CLI tests; importing it needs transformers and tokenizers (the callers
``importorskip`` them first).
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers

SENTENCES = [
    "the cat sat on the mat",
    "the dog sat on the log",
    "a cat and a dog",
    "the mat is red",
]
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


def tiny_tokenizer(bert: bool) -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer trained on SENTENCES, as transformers' fast tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = ["[UNK]", "[PAD]", "[CLS]", "[SEP]"]
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=special))
    if bert:
        cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
        )
    extra = {"cls_token": "[CLS]", "sep_token": "[SEP]"} if bert else {}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", **extra
    )


def save_tiny_gpt2(folder: Path) -> Path:
    """A 2-layer GPT-2 (width 16) and its tokenizer, written with save_pretrained."""
    tok = tiny_tokenizer(bert=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=2, n_head=2,
        bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    transformers.GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def save_tiny_bert(folder: Path) -> Path:
    """A 1-layer BERT sequence classifier (3 named labels) and its tokenizer."""
    tok = tiny_tokenizer(bert=True)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, num_labels=3, id2label=LABELS,
        label2id={v: k for k, v in LABELS.items()},
    )  # fmt: skip
    transformers.BertForSequenceClassification(config).eval().save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
