"""A two-layer graph convolutional network (Kipf & Welling) in the style of pygcn: node features times a weight,
then the symmetrically normalised adjacency D^-1/2 (A + I) D^-1/2 as a sparse COO tensor times that
(torch.sparse.mm), ReLU, dropout, log_softmax, and the negative log likelihood on the labelled nodes; Adam with
weight decay, full-batch.

The graph is a stochastic block model with class-dependent node features (NumPy, fixed seed).

    python gcn.py [--steps 10]
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.parameter import Parameter


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(torch.empty(in_features, out_features))
        if bias:
            self.bias = Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.sparse.mm(adj, support)
        if self.bias is not None:
            return output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def make_graph(n=200, nfeat=32, nclass=4, seed=0):
    """Features (row-normalised), the normalised adjacency as a sparse tensor, labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, nclass, n)
    same = labels[:, None] == labels[None, :]
    edges = np.triu(rng.random((n, n)) < np.where(same, 0.08, 0.01), 1)
    adj = (edges | edges.T).astype(np.float32) + np.eye(n, dtype=np.float32)
    d_inv_sqrt = 1.0 / np.sqrt(adj.sum(1))
    adj = adj * d_inv_sqrt[:, None] * d_inv_sqrt[None, :]
    row, col = np.nonzero(adj)
    indices = torch.from_numpy(np.vstack((row, col)).astype(np.int64))
    values = torch.from_numpy(adj[row, col])
    adj = torch.sparse_coo_tensor(indices, values, (n, n))
    centres = rng.normal(0.0, 1.0, (nclass, nfeat))
    features = np.abs(centres[labels] + rng.normal(0.0, 1.5, (n, nfeat))).astype(np.float32)
    features /= features.sum(1, keepdims=True)
    return torch.FloatTensor(features), adj, torch.LongTensor(labels)


def main(steps=10, hidden=16, dropout=0.5, lr=0.01, weight_decay=5e-4, seed=42):
    cuda = torch.cuda.is_available()
    torch.manual_seed(seed)
    if cuda:
        torch.cuda.manual_seed(seed)
    features, adj, labels = make_graph()
    idx_train = torch.LongTensor(range(60))
    model = GCN(nfeat=features.shape[1], nhid=hidden, nclass=int(labels.max()) + 1, dropout=dropout)
    if cuda:
        model.cuda()
        features, adj, labels, idx_train = features.cuda(), adj.cuda(), labels.cuda(), idx_train.cuda()
    optimizer = optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for _ in range(steps):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        losses.append(loss_train.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="GCN on a sparse normalised adjacency (pygcn)")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps)):
        print(f"step {step}: loss {loss!r}")
