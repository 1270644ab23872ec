"""A GPT in the style of nanoGPT: token and position embeddings, pre-LayerNorm blocks of causal self-attention
(F.scaled_dot_product_attention with is_causal=True, or an explicit masked softmax where it is missing) and a
GELU MLP, the output head tied to the token embedding, GPT-2's initialisation, AdamW with weight decay only on
matrices (two parameter groups), gradient clipping, and a linear warmup then cosine decay of the learning rate
through LambdaLR. Batches are random windows of the token stream drawn with torch.randint, as nanoGPT does.

The token stream comes from a random Markov chain (NumPy, fixed seed).

    python gpt.py [--steps 8] [--dropout 0.0] [--no-flash] [--schedule sequential] [--out-dir DIR [--resume]]

A checkpoint saved with one library resumes with the other (ember reads and writes PyTorch's format).
"""
import argparse
import inspect
import math
import os
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32
    dropout: float = 0.0
    bias: bool = True
    flash: bool = True  # F.scaled_dot_product_attention where there is one; False: the explicit masked softmax


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout
        self.flash = config.flash and hasattr(torch.nn.functional, "scaled_dot_product_attention")
        if not self.flash:
            # causal mask to ensure that attention is only applied to the left in the input sequence
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                               dropout_p=self.dropout if self.training else 0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        # apply special scaled init to the residual projections, per GPT-2 paper
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        # every 2D parameter (matmul weights, embeddings) decays, biases and layernorms don't
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)


def make_tokens(vocab_size, n, seed=0):
    rng = np.random.default_rng(seed)
    transition = rng.dirichlet(np.full(vocab_size, 0.05), size=vocab_size)
    tokens = [0]
    for _ in range(n - 1):
        tokens.append(rng.choice(vocab_size, p=transition[tokens[-1]]))
    return np.array(tokens, dtype=np.uint16)


def main(steps=8, batch_size=8, learning_rate=1e-3, min_lr=1e-4, warmup_iters=2, lr_decay_iters=8,
         weight_decay=0.1, grad_clip=1.0, dropout=0.0, flash=True, schedule="lambda", out_dir=None, init_from="scratch",
         seed=1337):
    """Train up to iteration ``steps``; with ``out_dir``, save a checkpoint (model, optimizer, scheduler, random
    state) there at the end; with ``init_from="resume"``, first continue from the checkpoint in ``out_dir``.
    ``schedule``: "lambda" (LambdaLR of the function below) or "sequential" (LinearLR warmup, then
    CosineAnnealingLR, chained by SequentialLR: the same curve, by the schedulers' own formulas).
    Returns the losses of the iterations run."""
    torch.manual_seed(seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    device_type = "cuda" if "cuda" in device else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
    torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
    config = GPTConfig(dropout=dropout, flash=flash)
    data = make_tokens(config.vocab_size, 2000)
    block_size = config.block_size

    def get_batch():
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i:i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1:i + 1 + block_size]).astype(np.int64)) for i in ix])
        if device_type == "cuda":
            # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x.to(device), y.to(device)

    def lr_lambda(it):
        """Linear warmup, then cosine decay to min_lr at lr_decay_iters (a factor of learning_rate)."""
        if it < warmup_iters:
            return (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr / learning_rate
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return (min_lr + coeff * (learning_rate - min_lr)) / learning_rate

    model = GPT(config)
    model.to(device)
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (0.9, 0.95), device_type)
    if schedule == "lambda":
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    else:
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=1 / (warmup_iters + 1),
                                                   total_iters=warmup_iters)
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=lr_decay_iters - warmup_iters,
                                                            eta_min=min_lr)
        scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[warmup_iters])
    iter_num = 0
    if init_from == "resume":
        checkpoint = torch.load(os.path.join(out_dir, "ckpt.pt"), map_location=device)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        torch.set_rng_state(checkpoint["rng_state"])
        iter_num = checkpoint["iter_num"]
        checkpoint = None  # free up memory
    losses = []
    while iter_num < steps:
        X, Y = get_batch()
        logits, loss = model(X, Y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        iter_num += 1
    if out_dir is not None:
        checkpoint = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng_state": torch.get_rng_state(),
            "iter_num": iter_num,
            "config": asdict(config),
        }
        os.makedirs(out_dir, exist_ok=True)
        torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="GPT (nanoGPT style)")
    parser.add_argument("--steps", type=int, default=8, help="train up to this iteration")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--no-flash", action="store_true", help="attention as an explicit masked softmax")
    parser.add_argument("--schedule", default="lambda", choices=["lambda", "sequential"],
                        help="warmup and cosine decay by LambdaLR, or by LinearLR + CosineAnnealingLR")
    parser.add_argument("--out-dir", default=None, help="save a checkpoint there at the end")
    parser.add_argument("--resume", action="store_true", help="continue from the checkpoint in --out-dir")
    args = parser.parse_args()
    losses = main(args.steps, dropout=args.dropout, flash=not args.no_flash, schedule=args.schedule,
                  out_dir=args.out_dir, init_from="resume" if args.resume else "scratch")
    for step, loss in enumerate(losses):
        print(f"step {step}: loss {loss!r}")
