"""AdaptiveLogSoftmaxWithLoss: a softmax over many classes split into a frequent head and rarer clusters."""
import collections

import ember

from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Classes below ``cutoffs[0]`` (the shortlist) are scored by the ``head`` linear layer next to one logit per
    cluster; the classes of cluster ``i`` (``cutoffs[i]`` up to the next cutoff) by ``tail[i]``, two bias-free linear
    layers through ``in_features // div_value ** (i + 1)`` features. A class's log-probability is its head score's,
    plus, for a cluster class, its score within the cluster."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 or \
                len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                             "where each value is between 1 and n_classes-1")
        fk = {"device": device, "dtype": dtype}
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size, self.n_clusters = self.cutoffs[0], len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, **fk)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **fk),
                                        Linear(hidden, self.cutoffs[i + 1] - self.cutoffs[i], bias=False, **fk)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for into, out in self.tail:
            into.reset_parameters()
            out.reset_parameters()

    def forward(self, input_, target_):
        """(the log-probability of each target class, their mean negated: the loss)."""
        if target_.dim() == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.shape}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        input, target = (input_, target_) if batched else (input_.unsqueeze(0), target_.unsqueeze(0))
        n = target.shape[0]
        output = input.new_zeros(n)
        head_class = target.clone()  # the head column each row reads: its class, or its cluster's logit
        placed = 0
        for i, (low, high) in enumerate(zip([0] + self.cutoffs, self.cutoffs)):
            rows = ((target >= low) & (target < high)).nonzero().reshape(-1)
            placed += rows.numel()
            if i == 0 or rows.numel() == 0:
                continue
            head_class.index_fill_(0, rows, self.shortlist_size + i - 1)
            logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            within = logprob.gather(1, (target.index_select(0, rows) - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, within)
        if placed != n:
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, head_class.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, cluster in enumerate(self.tail):
            parts.append(F.log_softmax(cluster(input), dim=1) + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ember.cat(parts, 1)

    def log_prob(self, input):
        """The log-probabilities (N, n_classes) of every class for a minibatch (N, in_features)."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most probable class of each example of a minibatch (as ``log_prob(input).argmax(1)``, computing the
        clusters only for the rows whose best head score is a cluster's)."""
        head_output = self.head(input)
        output = head_output.argmax(1)
        outside = output >= self.shortlist_size
        if not bool(outside.any()):
            return output
        if bool(outside.all()):
            return self._full_log_prob(input, head_output).argmax(1)
        output[outside] = self._full_log_prob(input[outside], head_output[outside]).argmax(1)
        return output
