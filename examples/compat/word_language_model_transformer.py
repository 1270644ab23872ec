"""The Transformer variant of pytorch/examples word_language_model: an embedding scaled by sqrt(d_model), a
sinusoidal positional encoding kept as a buffer, nn.TransformerEncoder under a causal (square subsequent) mask,
a linear decoder and log_softmax; trained like the LSTM variant (gradient clipping, SGD written out by hand,
the learning rate divided by four when the validation loss stops improving, the best model saved whole and
loaded back for the test). main() returns the loss of every training step, then the test loss of the best model.

The corpus is a token stream from a random Markov chain (NumPy, fixed seed).

    python word_language_model_transformer.py [--steps 8]
"""
import argparse
import math
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class PositionalEncoding(nn.Module):
    """Adds sin/cos features of the position to the embeddings (a buffer: saved, never trained)."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    """Container module with an encoder, a positional encoding, a transformer encoder and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        mask = (torch.triu(torch.ones(sz, sz)) == 1).transpose(0, 1)
        return mask.float().masked_fill(mask == 0, float("-inf")).masked_fill(mask == 1, 0.0)

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src)).to(device)
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def make_corpus(ntoken, n, seed=0):
    """n tokens of a Markov chain whose rows favour a few successors (so there is something to learn)."""
    rng = np.random.default_rng(seed)
    transition = rng.dirichlet(np.full(ntoken, 0.1), size=ntoken)
    tokens = [0]
    for _ in range(n - 1):
        tokens.append(rng.choice(ntoken, p=transition[tokens[-1]]))
    return torch.tensor(tokens, dtype=torch.long)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, criterion, data_source, bptt):
    model.eval()
    total_loss = 0.0
    ntokens = model.decoder.out_features
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output = model(data)
            output = output.view(-1, ntokens)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def main(steps=8, ntokens=50, emsize=32, nhead=2, nhid=64, nlayers=2, bptt=8, batch_size=4, lr=5.0, clip=0.25,
         save=None, seed=1111):
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n_train = 3 * bptt * batch_size + batch_size  # three batches per epoch
    corpus = make_corpus(ntokens, n_train + 2 * 40)
    train_data = batchify(corpus[:n_train], batch_size).to(device)
    val_data = batchify(corpus[n_train:n_train + 40], 2).to(device)
    test_data = batchify(corpus[n_train + 40:], 2).to(device)
    model = TransformerModel(ntokens, emsize, nhead, nhid, nlayers, dropout=0.2).to(device)
    criterion = nn.NLLLoss()
    losses = []

    def train():
        model.train()
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i, bptt)
            model.zero_grad()
            output = model(data)
            output = output.view(-1, ntokens)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            losses.append(loss.item())
            if len(losses) == steps:
                return

    with tempfile.TemporaryDirectory() as tmp:
        save = save or os.path.join(tmp, "model.pt")
        best_val_loss = None
        while len(losses) < steps:
            train()
            val_loss = evaluate(model, criterion, val_data, bptt)
            if not best_val_loss or val_loss < best_val_loss:
                with open(save, "wb") as f:
                    torch.save(model, f)
                best_val_loss = val_loss
            else:
                lr /= 4.0
        with open(save, "rb") as f:
            model = torch.load(f, weights_only=False)
    return losses + [evaluate(model, criterion, test_data, bptt)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Transformer language model (pytorch/examples word_language_model)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--save", type=str, default=None, help="path to save the final model")
    args = parser.parse_args()
    *losses, test_loss = main(args.steps, save=args.save)
    for step, loss in enumerate(losses):
        print(f"step {step}: loss {loss!r}")
    print(f"test: loss {test_loss!r}")
