"""Tiny random Hugging Face models saved with a tokenizer trained on a few sentences.

Shared by the io and CLI tests; importing it needs transformers and tokenizers (the callers
``importorskip`` them first).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def gpt2_over(tok: Any, *, n_positions: int = 32, n_layer: int = 2) -> torch.nn.Module:
    """A GPT-2 LM (width 16, 2 heads, ``n_layer`` blocks) over ``tok``'s vocabulary, made after
    ``torch.manual_seed(0)``, in eval mode."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tok), n_positions=n_positions, n_embd=16, n_layer=n_layer, n_head=2,
        bos_token_id=None, eos_token_id=None,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config).eval()


def save_tiny_gpt2(folder: Path, n_layer: int = 2) -> Path:
    """A GPT-2 of ``n_layer`` blocks (width 16) and its tokenizer, written with
    save_pretrained."""
    tok = tiny_tokenizer(bert=False)
    gpt2_over(tok, n_layer=n_layer).save_pretrained(folder)
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


REMOTE_CODE = """
from transformers import GPT2Config, GPT2LMHeadModel


class EvilConfig(GPT2Config):
    model_type = "evil"


class EvilForCausalLM(GPT2LMHeadModel):
    config_class = EvilConfig
"""


def save_remote_code_model(folder: Path, gpt2_dir: Path) -> Path:
    """A folder whose config names its own modeling code (``auto_map``): the GPT-2 of
    ``gpt2_dir`` under a model type transformers does not know."""
    import json
    import shutil

    folder.mkdir(parents=True)
    for name in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(gpt2_dir / name, folder / name)
    (folder / "modeling_evil.py").write_text(REMOTE_CODE, encoding="utf-8")
    config = json.loads((gpt2_dir / "config.json").read_text(encoding="utf-8"))
    config["model_type"] = "evil"
    config["architectures"] = ["EvilForCausalLM"]
    config["auto_map"] = {
        "AutoConfig": "modeling_evil.EvilConfig",
        "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
    }
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@contextlib.contextmanager
def remote_code_sandbox(tmp_path: Path) -> Iterator[None]:
    """Make transformers copy trusted model code under ``tmp_path`` (not the user's cache),
    and forget it afterwards (its entry on the import path and its modules)."""
    from transformers import dynamic_module_utils

    saved_cache, saved_path = dynamic_module_utils.HF_MODULES_CACHE, list(sys.path)
    before = set(sys.modules)
    dynamic_module_utils.HF_MODULES_CACHE = str(tmp_path / "hf-modules")
    try:
        yield
    finally:
        dynamic_module_utils.HF_MODULES_CACHE = saved_cache
        sys.path[:] = saved_path
        for name in [m for m in sys.modules if m.startswith("transformers_modules")]:
            if name not in before:
                del sys.modules[name]


def save_tiny_vit(folder: Path) -> Path:
    """A 1-layer ViT image classifier on 32x32 images (2 labels) with its image processor."""
    config = transformers.ViTConfig(
        image_size=32, patch_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, num_labels=2, id2label={0: "cat", 1: "dog"},
        label2id={"cat": 0, "dog": 1},
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.ViTForImageClassification(config).eval().save_pretrained(folder)
    processor = transformers.ViTImageProcessor(
        size={"height": 32, "width": 32}, image_mean=[0.5, 0.4, 0.3], image_std=[0.2, 0.25, 0.3]
    )
    processor.save_pretrained(folder)
    return folder
