"""Tiny random-init sequence models for the token, attention and logit-lens tests."""

from __future__ import annotations

import logging

import pytest
import torch


def tiny_gpt2(vocab: int = 40, seed: int = 0) -> torch.nn.Module:
    """A 2-block GPT-2 LM (32 features, 4 heads), eval mode."""
    transformers = pytest.importorskip("transformers", reason="needs the hf extra")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=vocab, n_positions=32,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config).eval()


def tiny_bert(vocab: int = 40, seed: int = 0) -> torch.nn.Module:
    """A 2-layer BERT classifier (32 features, 4 heads, 3 classes), eval mode."""
    transformers = pytest.importorskip("transformers", reason="needs the hf extra")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=48, max_position_embeddings=32, num_labels=3,
    )  # fmt: skip
    return transformers.BertForSequenceClassification(config).eval()


def tiny_bert_encoder(seed: int = 0) -> torch.nn.Module:
    """A 1-layer bare ``BertModel`` (16 features, 2 heads, vocabulary 50), eval mode: module
    names without a head's prefix (``embeddings.word_embeddings``, ``encoder.layer.0``)."""
    transformers = pytest.importorskip("transformers", reason="needs the hf extra")
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16,
    )  # fmt: skip
    return transformers.BertModel(config).eval()


def tiny_vit(seed: int = 0) -> torch.nn.Module:
    """A timm ViT on 32x32 images: 2x2 patches of 16, one class token, 2 blocks of 3 heads."""
    timm = pytest.importorskip("timm", reason="needs the timm extra")
    torch.manual_seed(seed)
    return timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2, embed_dim=48,
        num_heads=3, num_classes=5,
    ).eval()  # fmt: skip
