#!/usr/bin/python3
"""PyTorch reference for Tandem's gpt zoo model (frontend/zoo/gpt.cc): training tokens/s.

The model is nanoGPT's (Karpathy) as Tandem builds it, character level: the vocabulary is the
text's distinct characters sorted (Tandem's text:FILE:chars; 63 for the KJV, newline
included), token embedding wte [V, D] and learned position embedding wpe [1, T, D], dropout
after their sum, L pre-norm blocks of
  x + dropout(c_proj(attention(ln_1(x))))   (q, k and v: three nn.Linear(D, D) with bias,
                                             Tandem has no fused c_attn; causal, H heads,
                                             dropout on the probabilities)
  x + dropout(c_proj(GELU(c_fc(ln_2(x)))))  (erf GELU, 4D wide)
then ln_f and the logits ln_f(x) @ wte^T (tied). LayerNorm eps 1e-5 with bias. Defaults
T=128, L=4, H=4, D=128, dropout 0.1: V*D + T*D + L*(12*D^2 + 13*D) + 2*D parameters (817,792
for the KJV). Attention: --attention sdpa is F.scaled_dot_product_attention(q, k, v,
is_causal=True, dropout_p=p) (PyTorch 2), manual is softmax(q k^T / sqrt(d) + mask) v written
out (PyTorch 1.13 has no SDPA); auto (default) takes sdpa where there is one.
Initialisation as nanoGPT and Tandem: N(0, 0.02) for weights and embeddings, c_proj
weights N(0, 0.02 / sqrt(2L)), zero biases. Loss: cross-entropy over every token.
Optimizer: torch.optim.AdamW lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on the
nn.Linear weights only (not biases, LayerNorms, wte or wpe: Tandem's decay=matrices), the
gradient norm clipped at 1.0 each step. The learning rate stays constant: Tandem's warmup and
cosine schedule change the values, not the step's work.

Learning curve (--eval-every K, issue 43's 2000-step bar): --schedule nanogpt gives Tandem's
gpt recipe (100 warmup steps, update s getting (s + 1) / 100 of lr, then cosine to lr/10 at
the last step, as runtime/lr_schedule.cc), no untimed steps, and after every K steps and at
the end the validation loss over the held-out tail (the last round(0.1 n) ids, as Tandem's
text:FILE holds out; every non-overlapping window of T + 1 ids, dropout off), printed as
  eval step=250 train_loss=2.4798 val_loss=2.1736 val_bpc=3.136 seconds=41.2 lr=0.00096
(train_loss: the mean of the period's step losses) and, with --metrics CSV, written as the
rows of `tandem train --metrics` for a language model (step, train_loss, val_loss, val_bpc,
seconds, tokens_per_s, lr), which `tandem plot` draws.

Generation (--generate N): nanoGPT's generate loop on the model as initialised (speed only),
with --threads threads: each token crops the sequence to the last T ids and runs the whole
model over it (nanoGPT keeps no KV cache), then samples the last position's logits (temperature
1, top-k 40); it prints
  pytorch generate tokens_per_s=812.3 tokens=500 seconds=0.616 threads=1

Batches are --batch random windows of T+1 ids from the first 90% of the text (x the first T,
y the last T), drawn with a seeded generator inside each step, as Tandem draws windows at
random offsets. --compile wraps the model in torch.compile (default mode; the optimizer step
stays eager). Throughput: --warmup untimed steps (compilation happens in the first), then
--steps timed ones; the last line printed is machine readable (loss: the last step's):
  pytorch tokens_per_s=12345.6 steps=20 seconds=13.271 batch=64 threads=2 attention=manual
  compile=off loss=2.912345   (one line)
The first line names torch's version, the parameter count, the vocabulary and the BLAS loaded
(Debian's reference libblas, where libopenblas0-pthread is missing, is many times slower):
  torch 1.13.0a0, gpt params=817792 vocab=63 context=128 layers=4 heads=4 width=128 ...

Run it with Debian's interpreter (/usr/bin/python3, PyTorch 1.13) or through
../shared/tools/pytorch2 python3 (PyTorch 2.6, torch.compile); bench/gpt_vs_pytorch.sh runs
both against Tandem.
"""

import argparse
import math
import sys
import time

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
from pytorch_train import blas_library  # noqa: E402 (bench/, the script's own directory)


def read_ids(path):
    """The text's characters as ids of their places among its distinct characters sorted."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        sys.exit(f"gpt_pytorch: cannot read {path}: {e.strerror}")
    except UnicodeDecodeError as e:
        sys.exit(f"gpt_pytorch: {path} is not UTF-8 text: {e}")
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    chars = np.unique(points)
    return torch.from_numpy(np.searchsorted(chars, points).astype(np.int64)), len(chars)


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context, p, sdpa):
        super().__init__()
        self.heads, self.p, self.sdpa = heads, p, sdpa
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.c_proj = nn.Linear(width, width)
        self.attn_dropout = nn.Dropout(p)
        if not sdpa:
            mask = torch.full((context, context), float("-inf")).triu(1)
            self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        n, t, d = x.shape
        split = lambda y: y.view(n, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # [N, H, T, d]
        if self.sdpa:
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        else:
            scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d // self.heads))
            probs = torch.softmax(scores + self.mask[:t, :t], dim=-1)
            y = self.attn_dropout(probs) @ v
        return self.c_proj(y.transpose(1, 2).reshape(n, t, d))


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # erf GELU (approximate="none")


class Block(nn.Module):
    def __init__(self, width, heads, context, p, sdpa):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = CausalSelfAttention(width, heads, context, p, sdpa)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = Mlp(width)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        x = x + self.drop(self.attn(self.ln_1(x)))
        return x + self.drop(self.mlp(self.ln_2(x)))


class Gpt(nn.Module):
    def __init__(self, vocab, context=128, layers=4, heads=4, width=128, p=0.1, sdpa=False):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Parameter(torch.zeros(1, context, width))
        self.drop = nn.Dropout(p)
        self.h = nn.Sequential(*(Block(width, heads, context, p, sdpa) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)
        # nanoGPT's _init_weights, as frontend/zoo/gpt.cc gives it.
        for name, m in self.named_modules():
            if isinstance(m, nn.Linear):
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj") else 0.02
                nn.init.normal_(m.weight, std=std)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe, std=0.02)

    def forward(self, ids):
        h = self.drop(self.wte(ids) + self.wpe[:, :ids.shape[1]])
        return F.linear(self.ln_f(self.h(h)), self.wte.weight)  # tied output projection


def expected_params(vocab, context, layers, width):
    return vocab * width + context * width + layers * (12 * width * width + 13 * width) + 2 * width


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--text", required=True, help="the UTF-8 text file (as Tandem's text:FILE)")
    p.add_argument("--steps", type=int, default=20, help="timed training steps")
    p.add_argument("--warmup", type=int,
                   help="untimed steps first (default 5; 6 with --compile, which compiles "
                        "in the first)")
    p.add_argument("--batch", type=int, default=64, help="sequences per step")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--attention", choices=["auto", "sdpa", "manual"], default="auto")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schedule", choices=["constant", "nanogpt"], default="constant",
                   help="the learning rate: constant, or 100 warmup steps then cosine to lr/10")
    p.add_argument("--eval-every", type=int, default=0,
                   help="K > 0: the validation loss every K steps and at the end")
    p.add_argument("--metrics", help="with --eval-every: a CSV of the evaluations")
    p.add_argument("--generate", type=int, default=0,
                   help="N > 0: time nanoGPT's generate loop drawing N tokens instead")
    args = p.parse_args()
    if args.eval_every < 0:
        sys.exit(f"gpt_pytorch: --eval-every must be >= 0, got {args.eval_every}")
    if args.metrics and not args.eval_every:
        sys.exit("gpt_pytorch: --metrics needs --eval-every K")
    for flag in ("steps", "batch", "threads", "context", "layers", "heads", "width"):
        if getattr(args, flag) < 1:
            sys.exit(f"gpt_pytorch: --{flag} must be >= 1, got {getattr(args, flag)}")
    if args.width % args.heads:
        sys.exit(f"gpt_pytorch: width {args.width} does not divide into {args.heads} heads")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    if args.attention == "auto":
        args.attention = "sdpa" if has_sdpa else "manual"
    if args.attention == "sdpa" and not has_sdpa:
        sys.exit(f"gpt_pytorch: torch {torch.__version__} has no F.scaled_dot_product_attention "
                 "(PyTorch 2.0 and later); use --attention manual")
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"gpt_pytorch: torch {torch.__version__} has no torch.compile "
                 "(PyTorch 2.0 and later)")
    warmup = args.warmup if args.warmup is not None else (
        0 if args.eval_every else 6 if args.compile else 5)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)

    ids, vocab = read_ids(args.text)
    cut = ids.numel() - round(0.1 * ids.numel())  # Tandem's held-out tail (training_data.cc)
    train, held_out = ids[:cut], ids[cut:]
    if train.numel() < args.context + 2:
        sys.exit(f"gpt_pytorch: {args.text} is too short for windows of {args.context} + 1 ids")
    windows = train.unfold(0, args.context + 1, 1)  # [count, T + 1], a view

    model = Gpt(vocab, args.context, args.layers, args.heads, args.width, args.dropout,
                sdpa=args.attention == "sdpa")
    params = sum(q.numel() for q in model.parameters())
    want = expected_params(vocab, args.context, args.layers, args.width)
    if params != want:
        sys.exit(f"gpt_pytorch: the model has {params} parameters, the architecture {want}")
    decay = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    decay_ids = {id(w) for w in decay}
    no_decay = [q for q in model.parameters() if id(q) not in decay_ids]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    step_model = torch.compile(model) if args.compile else model
    model.train()
    print(f"torch {torch.__version__}, gpt params={params} vocab={vocab} context={args.context} "
          f"layers={args.layers} heads={args.heads} width={args.width} dropout={args.dropout:g}, "
          f"attention={args.attention}, compile={'on' if args.compile else 'off'}, "
          f"threads={torch.get_num_threads()}, batch={args.batch}, adamw lr=0.001 betas=0.9/0.99 "
          f"wd=0.1 on {len(decay)} weights, clip 1.0, tokens={ids.numel()} "
          f"(train {train.numel()}), blas={blas_library()}", flush=True)

    def lr_factor(s):
        """runtime/lr_schedule.cc's factor of update s for cosine:0.1 with 100 warmup steps."""
        if args.schedule == "constant":
            return 1.0
        warm, total, floor = 100, args.steps, 0.1
        span = total - warm
        t = min(max(s - warm, 0), span)
        f = floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t / span))
        return f * (s + 1) / warm if s < warm else f

    def step():
        w = windows[torch.randint(windows.shape[0], (args.batch,), generator=gen)]
        x, y = w[:, :-1], w[:, 1:]
        opt.zero_grad(set_to_none=True)
        logits = step_model(x)
        loss = F.cross_entropy(logits.reshape(-1, vocab), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    if args.generate > 0:
        generate_rate(args, model, vocab)
        return
    if args.eval_every:
        if args.schedule == "nanogpt" and args.steps <= 100:
            sys.exit(f"gpt_pytorch: --schedule nanogpt warms up for 100 steps; --steps "
                     f"{args.steps} leaves no cosine")
        train_curve(args, model, step, opt, lr_factor, held_out, vocab)
        return
    for i in range(warmup):
        t0 = time.perf_counter()
        loss = step()
        if i == 0:
            print(f"first step (warm-up{', compilation' if args.compile else ''}): "
                  f"{time.perf_counter() - t0:.1f} s, loss {loss.item():.4f}", flush=True)
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    final_loss = loss.item()
    seconds = time.perf_counter() - t0
    rate = args.steps * args.batch * args.context / seconds
    print(f"pytorch tokens_per_s={rate:.1f} steps={args.steps} seconds={seconds:.3f} "
          f"batch={args.batch} threads={args.threads} attention={args.attention} "
          f"compile={'on' if args.compile else 'off'} loss={final_loss:.6f}")


def generate_rate(args, model, vocab):
    """nanoGPT's generate: N tokens after a one-token prompt, the whole window each token."""
    model.eval()
    gen = torch.Generator().manual_seed(args.seed)
    idx = torch.zeros(1, 1, dtype=torch.long)
    with torch.no_grad():
        model(idx)  # first-call set-up outside the timing
        t0 = time.perf_counter()
        for _ in range(args.generate):
            logits = model(idx[:, -args.context:])[:, -1, :]
            v, _ = torch.topk(logits, min(40, vocab))
            logits[logits < v[:, [-1]]] = -float("inf")
            nxt = torch.multinomial(F.softmax(logits, -1), 1, generator=gen)
            idx = torch.cat((idx, nxt), 1)
        seconds = time.perf_counter() - t0
    print(f"pytorch generate tokens_per_s={args.generate / seconds:.1f} tokens={args.generate} "
          f"seconds={seconds:.3f} threads={torch.get_num_threads()}")


def validation_loss(model, held_out, context, batch, vocab):
    """Mean cross-entropy over every non-overlapping window of the held-out ids, dropout off."""
    count = (held_out.numel() - 1) // context
    if count < 1:
        sys.exit(f"gpt_pytorch: the held-out tail ({held_out.numel()} ids) holds no window")
    starts = torch.arange(count) * context
    total = 0.0
    model.eval()
    with torch.no_grad():
        for b in range(0, count, batch):
            w = torch.stack([held_out[i:i + context + 1] for i in starts[b:b + batch].tolist()])
            logits = model(w[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1),
                                     reduction="sum").item()
    model.train()
    return total / (count * context)


def train_curve(args, model, step, opt, lr_factor, held_out, vocab):
    """--steps updates with the schedule, the validation loss every --eval-every and at the
    end; prints each evaluation and writes them to --metrics."""
    rows = []
    losses = []
    t0 = time.perf_counter()
    for s in range(args.steps):
        lr = 1e-3 * lr_factor(s)
        for g in opt.param_groups:
            g["lr"] = lr
        losses.append(step().item())
        if (s + 1) % args.eval_every == 0 or s + 1 == args.steps:
            seconds = time.perf_counter() - t0
            val = validation_loss(model, held_out, args.context, args.batch, vocab)
            row = {"step": s + 1, "train_loss": sum(losses) / len(losses), "val_loss": val,
                   "val_bpc": val / math.log(2), "seconds": seconds,
                   "tokens_per_s": len(losses) * args.batch * args.context / seconds, "lr": lr}
            rows.append(row)
            print(f"eval step={row['step']} train_loss={row['train_loss']:.4f} "
                  f"val_loss={val:.4f} val_bpc={row['val_bpc']:.3f} seconds={seconds:.1f} "
                  f"lr={lr:.6g}", flush=True)
            losses = []
            t0 = time.perf_counter()
    if args.metrics:
        with open(args.metrics, "w") as f:
            f.write("step,train_loss,val_loss,val_bpc,seconds,tokens_per_s,lr\n")
            for r in rows:
                f.write(f"{r['step']},{r['train_loss']:.6f},{r['val_loss']:.6f},"
                        f"{r['val_bpc']:.6f},{r['seconds']:.3f},{r['tokens_per_s']:.1f},"
                        f"{r['lr']:.9g}\n")
    print(f"pytorch val_loss={rows[-1]['val_loss']:.6f} steps={args.steps}")


if __name__ == "__main__":
    main()
