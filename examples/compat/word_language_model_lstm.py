"""An LSTM word language model in the style of pytorch/examples word_language_model: an embedding, a two-layer
nn.LSTM with dropout, a decoder whose weight is tied to the embedding, truncated backpropagation through time
with the hidden state detached between batches, gradient clipping, plain SGD written out by hand, and the
learning rate divided by four whenever the validation loss stops improving; the best model so far is saved whole
(torch.save of the module) and loaded back for the test. main() returns the loss of every training step, then
the test loss of the best model.

The corpus is a token stream from a random Markov chain (NumPy, fixed seed), already numericalised.

    python word_language_model_lstm.py [--steps 8] [--model LSTM]

(--model GRU, RNN_TANH or RNN_RELU picks the example's other recurrent layers.)
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            try:
                nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            except KeyError as e:
                raise ValueError("An invalid option for `--model` was supplied, "
                                 "options are ['LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU']") from e
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


def make_corpus(ntoken, n, seed=0):
    """n tokens of a Markov chain whose rows favour a few successors (so there is something to learn)."""
    rng = np.random.default_rng(seed)
    transition = rng.dirichlet(np.full(ntoken, 0.1), size=ntoken)
    tokens = [0]
    for _ in range(n - 1):
        tokens.append(rng.choice(ntoken, p=transition[tokens[-1]]))
    return torch.tensor(tokens, dtype=torch.long)


def batchify(data, bsz):
    # Work out how cleanly we can divide the dataset into bsz parts, and trim off the remainder.
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, criterion, data_source, eval_batch_size, bptt):
    model.eval()
    total_loss = 0.0
    ntokens = model.ntoken
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output.view(-1, ntokens), targets).item()
    return total_loss / (len(data_source) - 1)


def main(steps=8, model_type="LSTM", ntokens=50, emsize=32, nlayers=2, bptt=8, batch_size=4, lr=20.0, clip=0.25,
         save=None, seed=1111):
    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    n_train = 3 * bptt * batch_size + batch_size  # three batches per epoch
    corpus = make_corpus(ntokens, n_train + 2 * 40)
    train_data = batchify(corpus[:n_train], batch_size).to(device)
    val_data = batchify(corpus[n_train:n_train + 40], 2).to(device)
    test_data = batchify(corpus[n_train + 40:], 2).to(device)
    model = RNNModel(model_type, ntokens, emsize, emsize, nlayers, dropout=0.2, tie_weights=True).to(device)
    criterion = nn.NLLLoss()
    losses = []

    def train():
        # Turn on training mode which enables dropout.
        model.train()
        hidden = model.init_hidden(batch_size)
        for i in range(0, train_data.size(0) - 1, bptt):
            data, targets = get_batch(train_data, i, bptt)
            # Starting each batch, we detach the hidden state from how it was previously produced.
            # If we didn't, the model would try backpropagating all the way to start of the dataset.
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            # `clip_grad_norm` helps prevent the exploding gradient problem in RNNs / LSTMs.
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
            val_loss = evaluate(model, criterion, val_data, 2, bptt)
            # Save the model if the validation loss is the best we've seen so far.
            if not best_val_loss or val_loss < best_val_loss:
                with open(save, "wb") as f:
                    torch.save(model, f)
                best_val_loss = val_loss
            else:
                # Anneal the learning rate if no improvement has been seen in the validation dataset.
                lr /= 4.0
        # Load the best saved model.
        with open(save, "rb") as f:
            model = torch.load(f, weights_only=False)
            # after load the rnn params are not a continuous chunk of memory
            # this makes them a continuous chunk, and will speed up forward pass
            model.rnn.flatten_parameters()
    # Run on test data.
    return losses + [evaluate(model, criterion, test_data, 2, bptt)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="LSTM word language model (pytorch/examples word_language_model)")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--model", type=str, default="LSTM",
                        help="type of network (RNN_TANH, RNN_RELU, LSTM, GRU)")
    parser.add_argument("--save", type=str, default=None, help="path to save the final model")
    args = parser.parse_args()
    *losses, test_loss = main(args.steps, model_type=args.model, save=args.save)
    for step, loss in enumerate(losses):
        print(f"step {step}: loss {loss!r}")
    print(f"test: loss {test_loss!r}")
