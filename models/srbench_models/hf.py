"""The transformers provider: Hugging Face models, random-initialised from configs built in code.

Nothing is downloaded: configs are constructed here (no ``from_pretrained``, no hub tokenizers;
inputs are random token ids or images), and ``HF_HUB_OFFLINE=1`` is set unless the environment
says otherwise. Configs are shrunk where the published size would be slow on a small CPU; each
case's description states the size. Language models are called as transformers models are, with
keyword arguments: ``input_ids=..., attention_mask=...`` (the last sequence right-padded). A
thin wrapper passes the call through and returns one field of the ``ModelOutput``, which keeps
the captured graph's outputs plain.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import nn

from srbench.zoo import CatalogProvider, ModelCase
from srbench_models.inputs import images, masked_tokens

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROVIDER = "transformers"
hf_case = partial(ModelCase, provider=PROVIDER, rtol=1e-4, atol=1e-4)


class OutputOf(nn.Module):
    """A transformers model called as it is (positional and keyword arguments), returning one
    field of its output."""

    def __init__(self, model: nn.Module, field: str):
        super().__init__()
        self.model = model
        self.field = field

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        return getattr(self.model(*args, **kwargs), self.field)


def from_config(
    model_class: str, config_class: str, field: str, model_options: dict[str, Any] | None = None, **config: Any
) -> Callable[[], nn.Module]:
    """A build function for ``model_class(config_class(**config))``; transformers is imported when it runs."""

    def build() -> nn.Module:
        transformers = importlib.import_module("transformers")
        configuration = getattr(transformers, config_class)(**config)
        return OutputOf(getattr(transformers, model_class)(configuration, **(model_options or {})), field)

    return build


# BERT-mini's shape (Turc et al. 2019): 4 layers, width 256, 4 heads, feed-forward 1024.
SMALL_ENCODER: dict[str, Any] = dict(
    hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024
)
NO_POOLER = {"add_pooling_layer": False}

CASES = (
    hf_case(
        name="hf_bert",
        family="language",
        build=from_config("BertModel", "BertConfig", "last_hidden_state", NO_POOLER, **SMALL_ENCODER),
        make_inputs=masked_tokens(30522, batch_size=1, lengths=(128, 64)),
        description="BertModel, BERT-mini size (4 layers, width 256, 4 heads, FF 1024, vocab 30522); "
        "128 tokens (the last 8 padded), shape 1 64",
    ),
    hf_case(
        name="hf_gpt2",
        family="language",
        build=from_config("GPT2LMHeadModel", "GPT2Config", "logits", n_layer=4, n_embd=256, n_head=4),
        make_inputs=masked_tokens(50257, batch_size=1, lengths=(128, 64)),
        description="GPT2LMHeadModel, 4 layers, width 256, 4 heads (GPT-2 small: 12/768/12), vocab 50257; "
        "128 tokens (the last 8 padded), shape 1 64",
    ),
    hf_case(
        name="hf_vit",
        family="vision",
        build=from_config("ViTForImageClassification", "ViTConfig", "logits", num_labels=1000, **SMALL_ENCODER),
        make_inputs=images(batch_size=1, sizes=(224, 224)),
        description="ViTForImageClassification, 4 layers, width 256, 4 heads, 16x16 patches "
        "(ViT-B: 12/768/12); 224x224, shape 1 batch 2",
    ),
    hf_case(
        name="hf_resnet18",
        family="vision",
        build=from_config(
            "ResNetForImageClassification",
            "ResNetConfig",
            "logits",
            layer_type="basic",
            depths=[2, 2, 2, 2],
            hidden_sizes=[64, 128, 256, 512],
            num_labels=1000,
        ),
        make_inputs=images(batch_size=1),
        description="ResNetForImageClassification in ResNet-18's layout (basic blocks 2-2-2-2, "
        "widths 64-512); 224x224, shape 1 160x160",
    ),
    hf_case(
        name="hf_distilbert",
        family="language",
        build=from_config(
            "DistilBertModel", "DistilBertConfig", "last_hidden_state", dim=256, n_layers=4, n_heads=4, hidden_dim=1024
        ),
        make_inputs=masked_tokens(30522, batch_size=1, lengths=(128, 64)),
        description="DistilBertModel, 4 layers, width 256, 4 heads, FF 1024 (default: 6/768/12), vocab 30522; "
        "128 tokens (the last 8 padded), shape 1 64",
    ),
    hf_case(
        name="hf_t5_encoder",
        family="language",
        build=from_config(
            "T5EncoderModel",
            "T5Config",
            "last_hidden_state",
            d_model=256,
            num_layers=4,
            num_heads=4,
            d_kv=64,
            d_ff=1024,
        ),
        make_inputs=masked_tokens(32128, batch_size=1, lengths=(128, 64)),
        description="T5EncoderModel, 4 layers, width 256, 4 heads, FF 1024, relative position buckets "
        "(T5-small: 6/512/8); 128 tokens (the last 8 padded), shape 1 64",
    ),
    hf_case(
        name="hf_convnext",
        family="vision",
        build=from_config(
            "ConvNextForImageClassification",
            "ConvNextConfig",
            "logits",
            depths=[2, 2, 6, 2],
            hidden_sizes=[64, 128, 256, 512],
            num_labels=1000,
        ),
        make_inputs=images(batch_size=1),
        description="ConvNextForImageClassification, depths 2-2-6-2, widths 64-512 (ConvNeXt-T: 3-3-9-3, 96-768); "
        "224x224, shape 1 160x160",
    ),
)

provider = CatalogProvider(PROVIDER, entries=CASES, requires=("transformers",))
