"""Sine-wave prediction in the style of pytorch/examples time_sequence_prediction: two nn.LSTMCell layers
stepped by hand over the sequence and a linear read-out, in double precision, trained with LBFGS through a
closure; after each step the model also predicts a stretch of the future from its own outputs (no_grad).

The waves are generated as in the example's generate_sine_wave.py (NumPy, fixed seed; fewer and shorter), saved
with torch.save and loaded back as the example does.
main() returns the training loss of every closure evaluation (LBFGS evaluates up to max_iter per step), each
step's evaluations followed by that step's test loss.

    python time_sequence_prediction.py [--steps 2] [--line-search strong_wolfe]
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def generate_sine_wave(path, T=20, L=40, N=8):
    """The example's generate_sine_wave.py: the waves as a NumPy array, saved with torch.save."""
    np.random.seed(2)
    x = np.empty((N, L), "int64")
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype("float64")
    with open(path, "wb") as f:
        torch.save(data, f)


def main(steps=2, max_iter=8, line_search_fn=None, future=20, seed=0):
    with tempfile.TemporaryDirectory() as tmp:
        generate_sine_wave(os.path.join(tmp, "traindata.pt"))
        # set random seed to 0
        np.random.seed(0)
        torch.manual_seed(seed)
        # load data and make training set (a NumPy array: not weights only)
        data = torch.load(os.path.join(tmp, "traindata.pt"), weights_only=False)
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=max_iter, line_search_fn=line_search_fn)
    losses = []
    for _ in range(steps):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss

        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="LSTMCell sine-wave prediction with LBFGS "
                                                 "(pytorch/examples time_sequence_prediction)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--line-search", default=None, choices=["strong_wolfe"], help="LBFGS's line search")
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, line_search_fn=args.line_search)):
        print(f"step {step}: loss {loss!r}")
