"""A BERT-style encoder and a GPT-style decoder stack (Vaswani et al. 2017; Devlin et al. 2018;
Radford et al. 2019), sharing their attention and feed-forward layers.

The encoder is post-norm with bidirectional attention (BERT: embeddings of tokens and learned
positions, layer norm, then layers of attention and a GELU feed-forward, each followed by a
residual add and layer norm) and returns the last hidden states. The decoder is pre-norm with
causal attention (GPT-2: layer norm before each sub-layer, a final layer norm, and a language
model head tied to the token embedding) and returns logits. Attention goes through
``scaled_dot_product_attention``, the form export graphs of current models carry.

``transformer_encoder`` is PyTorch's own ``nn.TransformerEncoder``: in eval mode without autograd
eager PyTorch runs each of its layers as one fused kernel (``aten._transformer_encoder_layer_fwd``,
the "fast path" of ``nn.TransformerEncoderLayer``), which ``torch.export`` records decomposed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from srbench_models.builtin.blocks import builtin_case
from srbench_models.inputs import sequences, tokens


class SelfAttention(nn.Module):
    def __init__(self, width: int, heads: int, *, causal: bool):
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not divisible by {heads} heads")
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(batch, length, width))


class FeedForward(nn.Sequential):
    def __init__(self, width: int, hidden: int):
        super().__init__(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, width))


class EncoderLayer(nn.Module):
    """Post-norm: ``x = norm(x + sublayer(x))`` (BERT)."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.attention = SelfAttention(width, heads, causal=False)
        self.norm1 = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, hidden)
        self.norm2 = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attention(x))
        return self.norm2(x + self.feed_forward(x))


class DecoderLayer(nn.Module):
    """Pre-norm with causal attention: ``x = x + sublayer(norm(x))`` (GPT-2)."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads, causal=True)
        self.norm2 = nn.LayerNorm(width)
        self.feed_forward = FeedForward(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm1(x))
        return x + self.feed_forward(self.norm2(x))


class Embeddings(nn.Module):
    """Token plus learned absolute position embeddings."""

    def __init__(self, vocab_size: int, width: int, max_length: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, width)
        self.positions = nn.Embedding(max_length, width)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.tokens(ids) + self.positions(positions)


def _init_weights(model: nn.Module) -> None:
    """Normal(0, 0.02) weights and zero biases, as BERT and GPT-2 initialise (layer norms stay 1, 0)."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)


class Encoder(nn.Module):
    def __init__(self, vocab_size: int, width: int, layers: int, heads: int, max_length: int = 512):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, width, max_length)
        self.norm = nn.LayerNorm(width)
        self.layers = nn.Sequential(*(EncoderLayer(width, heads, 4 * width) for _ in range(layers)))
        _init_weights(self)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.layers(self.norm(self.embeddings(ids)))


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, width: int, layers: int, heads: int, max_length: int = 1024):
        super().__init__()
        self.embeddings = Embeddings(vocab_size, width, max_length)
        self.layers = nn.Sequential(*(DecoderLayer(width, heads, 4 * width) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size, bias=False)
        self.head.weight = self.embeddings.tokens.weight
        _init_weights(self)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.layers(self.embeddings(ids))))


def transformer_encoder(width: int = 256, heads: int = 8, hidden: int = 1024, layers: int = 4) -> nn.Module:
    """``nn.TransformerEncoder`` of post-norm ReLU layers, batch first: every condition of the
    layers' fused inference path holds (eval mode and no autograd are the caller's part)."""
    layer = nn.TransformerEncoderLayer(width, heads, hidden, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


BERT_VOCAB = 30522  # BERT's WordPiece vocabulary
GPT_VOCAB = 8192

CASES = (
    builtin_case(
        name="bert_encoder",
        family="language",
        build=lambda: Encoder(BERT_VOCAB, width=256, layers=4, heads=4),
        make_inputs=tokens(BERT_VOCAB, batch_size=1, lengths=(128, 64)),
        rtol=1e-4,
        atol=1e-4,
        description="BERT-style encoder, 4 layers, width 256, 4 heads, vocab 30522; 128 tokens, shape 1 64",
    ),
    builtin_case(
        name="gpt_decoder",
        family="language",
        build=lambda: Decoder(GPT_VOCAB, width=256, layers=4, heads=4),
        make_inputs=tokens(GPT_VOCAB, batch_size=1, lengths=(128, 64)),
        rtol=1e-4,
        atol=1e-4,
        description="GPT-style causal decoder, 4 layers, width 256, 4 heads, vocab 8192, tied head; "
        "128 tokens, shape 1 64",
    ),
    builtin_case(
        name="transformer_encoder",
        family="language",
        build=transformer_encoder,
        make_inputs=sequences(256, batch_size=1, lengths=(128, 64)),
        rtol=1e-4,
        atol=1e-4,
        description="nn.TransformerEncoder, 4 layers, d 256, 8 heads, FF 1024, batch first; 128 embedded "
        "tokens, shape 1 64; eager takes the layers' fused path",
    ),
)
