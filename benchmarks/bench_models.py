"""Whole-model training steps against PyTorch: a nanoGPT-style character model, a CIFAR ResNet-18 and the LSTM
language model of pytorch/examples' word_language_model.

Each model is written once against the torch API (``lib`` is ``torch`` or ``ember``); ember's copy starts from
torch's initial weights (its state_dict) and both see the same batch. A step is what the model's training script
runs per batch: forward, loss, backward, gradient clipping where the script clips, the optimiser's step and
zero_grad. The digits CNN of examples/train_digits.py has its row in bench_nn.py. Rows are timed alternately
(``_harness.interleaved``), so load from other processes touches both sides alike.
"""
import math

import numpy as np
from _harness import benchmark, interleaved


def _ember_copy(torch_model, ember_model):
    """Load torch's initial weights (and buffers) into the ember model."""
    import ember
    ember_model.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in torch_model.state_dict().items()})
    return ember_model


def _models(make, seed=0):
    import torch

    import ember
    torch.manual_seed(seed)
    t = make(torch)
    return {"torch": t, "ember": _ember_copy(t, make(ember))}


class Step:
    """One training step as its phases, ``[(name, fn)]`` run in order (the profiling script times each apart)."""

    def __init__(self, *phases):
        self.phases = phases
        self._fns = [fn for _, fn in phases]

    def __call__(self):
        for fn in self._fns:
            fn()


def _compare(steps):
    """Median seconds per step of each side, warmed up (optimiser state, caches) first."""
    for f in steps.values():
        f()
    return interleaved(steps["ember"], steps["torch"], repeats=7, budget=0.5)


# ---- a nanoGPT-style character model (nanoGPT's model.py, shakespeare_char on the CPU) -------------------------------
GPT = dict(vocab=65, context=64, layers=4, heads=4, width=128, batch=12)


def _gpt(lib, vocab, context, layers, heads, width, experts=0, top_k=2):
    """nanoGPT's model; with ``experts``, each block's MLP is a mixture of that many experts of the same width, each
    token routed to ``top_k`` of them (torchtitan's MoE layer: tokens sorted by expert, one grouped_mm per weight)."""
    nn, F = lib.nn, lib.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width, bias=False)
            self.c_proj = nn.Linear(width, width, bias=False)

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(width, dim=2)
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.gelu = nn.Linear(width, 4 * width, bias=False), nn.GELU()
            self.c_proj = nn.Linear(4 * width, width, bias=False)

        def forward(self, x):
            return self.c_proj(self.gelu(self.c_fc(x)))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(width, experts, bias=False)
            self.w1 = nn.Parameter(lib.randn(experts, width, 4 * width) * 0.02)
            self.w2 = nn.Parameter(lib.randn(experts, 4 * width, width) * 0.02)

        def forward(self, x):
            B, T, C = x.size()
            x = x.view(-1, C)
            weights, chosen = F.softmax(self.router(x), dim=-1).topk(top_k, dim=-1)
            order = chosen.view(-1).argsort(stable=True)
            offs = lib.bincount(chosen.view(-1), minlength=experts).cumsum(0).to(lib.int32)
            token = order // top_k
            h = F.gelu(F.grouped_mm(x[token], self.w1, offs=offs))
            y = F.grouped_mm(h, self.w2, offs=offs) * weights.view(-1)[order].unsqueeze(-1)
            return lib.zeros_like(x).index_add(0, token, y).view(B, T, C)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(width, bias=False), SelfAttention()
            self.ln_2 = nn.LayerNorm(width, bias=False)
            self.mlp = MoE() if experts else MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width, bias=False)
            self.lm_head = nn.Linear(width, vocab, bias=False)
            self.wte.weight = self.lm_head.weight  # tied, as nanoGPT's
            for name, p in self.named_parameters():  # nanoGPT's initialisation
                if name.endswith("weight") and p.dim() == 2:
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                    nn.init.normal_(p, mean=0.0, std=std)
            self.register_buffer("pos", lib.arange(context), persistent=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(self.pos[:idx.size(1)])
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

    return Model()


def _gpt_step(lib, model, x, y):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = lib.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                          lr=1e-3, betas=(0.9, 0.99))
    params, clip, loss = list(model.parameters()), lib.nn.utils.clip_grad_norm_, [None]

    def forward():
        loss[0] = model(x, y)

    def backward():
        loss[0].backward()
        loss[0] = None
    return Step(("forward", forward), ("backward", backward), ("clip_grad_norm_", lambda: clip(params, 1.0)),
                ("optimizer step", opt.step), ("zero_grad", lambda: opt.zero_grad(set_to_none=True)))


def gpt_setup(seed=0, **options):
    """{"ember": step, "torch": step} of the GPT row (also used by the profiling script); ``options`` change the
    model's (``experts=8``: the MoE row)."""
    import torch

    import ember
    cfg = dict(GPT, **options)
    batch = cfg.pop("batch")
    models = _models(lambda lib: _gpt(lib, **cfg), seed)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg["vocab"], (batch, cfg["context"] + 1))
    libs = {"torch": torch, "ember": ember}
    return {name: _gpt_step(lib, models[name], lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:]))
            for name, lib in libs.items()}


@benchmark("GPT char model (4 layers, 4 heads, width 128, context 64, vocab 65) AdamW training step, batch 12",
           goal=1.5)
def gpt_step():
    return _compare(gpt_setup())


@benchmark("MoE GPT char model (the GPT row, each MLP 8 experts, top-2 routing, F.grouped_mm) AdamW training step, "
           "batch 12", goal=1.5)
def moe_gpt_step():
    return _compare(gpt_setup(experts=8))


# ---- ResNet-18 for 32x32 images (the CIFAR variant: 3x3 stem, no max pooling) -------------------------------------
def _resnet18(lib, classes=10):
    nn, F = lib.nn, lib.nn.functional

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = F.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return F.relu(out + self.shortcut(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            blocks, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*blocks)
            self.linear = nn.Linear(512, classes)

        def forward(self, x):
            out = self.layers(F.relu(self.bn1(self.conv1(x))))
            return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))

    return ResNet()


def resnet_setup(seed=0, batch=32, memory_format=None):
    import torch

    import ember
    models = _models(_resnet18, seed)
    rng = np.random.default_rng(seed)
    images = rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, batch)
    steps = {}
    for name, lib in (("torch", torch), ("ember", ember)):
        model, x, y = models[name], lib.tensor(images), lib.tensor(labels)
        if memory_format:  # (the weights and the images laid out NHWC, as PyTorch users do for speed)
            model.to(memory_format=getattr(lib, memory_format))
            x = x.to(memory_format=getattr(lib, memory_format))
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
        loss_fn, loss = lib.nn.CrossEntropyLoss(), [None]

        def forward(model=model, x=x, y=y, loss_fn=loss_fn, loss=loss):
            loss[0] = loss_fn(model(x), y)

        def backward(loss=loss):
            loss[0].backward()
            loss[0] = None
        steps[name] = Step(("zero_grad", opt.zero_grad), ("forward", forward), ("backward", backward),
                           ("optimizer step", opt.step))
    return steps


@benchmark("ResNet-18 (CIFAR, 32x32, BatchNorm, 10 classes) SGD momentum training step, batch 32", goal=2.0)
def resnet_step():
    return _compare(resnet_setup())


@benchmark("ResNet-18 (CIFAR, 32x32) SGD momentum training step, batch 32, channels_last on both sides", goal=2.0)
def resnet_channels_last_step():
    return _compare(resnet_setup(memory_format="channels_last"))


# ---- the LSTM language model of pytorch/examples' word_language_model ---------------------------------------------
LSTM_LM = dict(vocab=10000, emb=128, hidden=256, layers=2, dropout=0.2, seq=35, batch=20, clip=0.25, lr=20.0)


def _lstm_lm(lib, vocab, emb, hidden, layers, dropout):
    nn, F = lib.nn, lib.nn.functional

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(vocab, emb)
            self.rnn = nn.LSTM(emb, hidden, layers, dropout=dropout)
            self.decoder = nn.Linear(hidden, vocab)
            nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

        def forward(self, tokens, state):
            output, state = self.rnn(self.drop(self.encoder(tokens)), state)
            decoded = self.decoder(self.drop(output)).view(-1, vocab)
            return F.log_softmax(decoded, dim=1), state

    return RNNModel()


def lstm_lm_setup(seed=0):
    import torch

    import ember
    cfg = LSTM_LM
    models = _models(lambda lib: _lstm_lm(lib, cfg["vocab"], cfg["emb"], cfg["hidden"], cfg["layers"],
                                          cfg["dropout"]), seed)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, cfg["vocab"], (cfg["seq"] + 1, cfg["batch"]))
    steps = {}
    for name, lib in (("torch", torch), ("ember", ember)):
        model, data, targets = models[name], lib.tensor(tokens[:-1]), lib.tensor(tokens[1:].reshape(-1))
        params, criterion = list(model.parameters()), lib.nn.NLLLoss()
        zeros = lib.zeros(cfg["layers"], cfg["batch"], cfg["hidden"])
        state = {"hidden": (zeros, zeros), "loss": None}

        def forward(model=model, data=data, targets=targets, criterion=criterion, state=state):
            hidden = tuple(h.detach() for h in state["hidden"])  # the example's repackage_hidden
            output, state["hidden"] = model(data, hidden)
            state["loss"] = criterion(output, targets)

        def backward(state=state):
            state["loss"].backward()
            state["loss"] = None

        def sgd(params=params):  # the example's plain SGD
            for p in params:
                p.data.add_(p.grad, alpha=-cfg["lr"])
        clip = lib.nn.utils.clip_grad_norm_
        steps[name] = Step(("zero_grad", model.zero_grad), ("forward", forward), ("backward", backward),
                           ("clip_grad_norm_", lambda clip=clip, params=params: clip(params, cfg["clip"])),
                           ("optimizer step", sgd))
    return steps


@benchmark("LSTM language model (2 layers, emb 128, hidden 256, vocab 10k, seq 35, dropout 0.2) training step, "
           "batch 20", goal=1.5)
def lstm_lm_step():
    return _compare(lstm_lm_setup())
