"""An LSTM language model (Zaremba et al., "Recurrent Neural Network Regularization", 2014):
token embedding, a stacked LSTM, and a linear decoder to next-token logits."""

from __future__ import annotations

import torch
from torch import nn

from srbench_models.builtin.blocks import builtin_case
from srbench_models.inputs import tokens


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab_size: int, width: int, layers: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, width)
        self.lstm = nn.LSTM(width, width, num_layers=layers, batch_first=True)
        self.decoder = nn.Linear(width, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embedding(ids))
        return self.decoder(hidden)


VOCAB = 10000  # the Penn Treebank vocabulary size the paper uses

CASES = (
    builtin_case(
        name="lstm_lm",
        family="sequence",
        build=lambda: LSTMLanguageModel(VOCAB, width=256, layers=2),
        make_inputs=tokens(VOCAB, batch_size=4, lengths=(32, 16)),
        batch_size=4,
        rtol=1e-4,
        atol=1e-5,
        description="LSTM language model, 2 layers of 256, vocab 10000; batch 4 x 32 tokens, shape 1 16",
    ),
)
