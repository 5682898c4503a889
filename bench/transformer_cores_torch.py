#!/usr/bin/python3
"""PyTorch 1.13's counterparts of bench/transformer_cores_bench's cases, same shapes.

One line per case: NAME CPU_NS CHECKSUM, where CPU_NS is the smallest of 5 repetitions of
the per-call CPU time (process time, one thread: what Google Benchmark's cpu_time is)
and CHECKSUM the sum of the result's values (to check that two runs agree). Run by
bench/transformer_cores_vs_pytorch.sh; the functions are what autograd calls for each
forward op and its gradients (addmm/mm for nn.Linear, bmm for attention,
native_layer_norm and its backward, _softmax and _softmax_backward_data, gelu and
gelu_backward, dropout, torch.optim.AdamW's step).

    /usr/bin/python3 bench/transformer_cores_torch.py [--filter REGEX] [--min-time S]
"""

import argparse
import re
import time

import torch

B, T, W, H, MLP = 128, 50, 64, 4, 128
ROWS, HD = B * T, W // H


def cpu_ns(fn, min_time):
    for _ in range(3):
        out = fn()
    n, spent = 1, 0.0
    while True:  # calls per repetition: enough for min_time of CPU
        t0 = time.process_time()
        for _ in range(n):
            fn()
        spent = time.process_time() - t0
        if spent >= min_time / 5 or n >= 1 << 20:
            break
        n *= 2
    best = spent / n
    for _ in range(4):
        t0 = time.process_time()
        for _ in range(n):
            out = fn()
        best = min(best, (time.process_time() - t0) / n)
    return best * 1e9, out


def checksum(out):
    if isinstance(out, (tuple, list)):
        return sum(checksum(o) for o in out if isinstance(o, torch.Tensor))
    return float(out.double().sum())


def cases(dtype):
    g = torch.Generator().manual_seed(1)

    def r(*shape, dt=dtype):
        return torch.randn(*shape, generator=g).to(dt)

    name = "f32" if dtype == torch.float32 else "bf16"
    yield_ = []

    def add(n, fn):
        yield_.append((f"{n}/{name}", fn))

    # Token-wise linear layers: y = x w^T + b (F.linear -> addmm); dx = dy w; dw = dy^T x.
    for layer, (i, o) in dict(qkv=(W, 3 * W), proj=(W, W), mlp_up=(W, MLP),
                              mlp_down=(MLP, W)).items():
        x, w, b, dy = r(ROWS, i), r(o, i), r(o), r(ROWS, o)
        add(f"Matmul/{layer}/fwd", lambda x=x, w=w, b=b: torch.addmm(b, x, w.t()))
        add(f"Matmul/{layer}/dA", lambda dy=dy, w=w: dy.mm(w))
        # The weight gradient in f32 under autocast-style mixed precision is computed in
        # the activations' dtype by PyTorch and cast: time what it does.
        add(f"Matmul/{layer}/dB", lambda dy=dy, x=x: dy.t().mm(x))
    # Attention per head: scores = (q / 4) k^T, context = p v (nn.MultiheadAttention's
    # scaled q and bmm), and their gradients.
    q, k, ds = r(B * H, T, HD), r(B * H, T, HD), r(B * H, T, T)
    p, v, dc = r(B * H, T, T), r(B * H, T, HD), r(B * H, T, HD)
    add("Matmul/scores/fwd", lambda: torch.bmm(q * 0.25, k.transpose(1, 2)))
    add("Matmul/scores/dA", lambda: torch.bmm(ds, k))
    add("Matmul/scores/dB", lambda: torch.bmm(ds.transpose(1, 2), q))
    add("Matmul/context/fwd", lambda: torch.bmm(p, v))
    add("Matmul/context/dA", lambda: torch.bmm(dc, v.transpose(1, 2)))
    add("Matmul/context/dB", lambda: torch.bmm(p.transpose(1, 2), dc))
    # Layer norm over the width, eps 1e-6 (the ViT's).
    x, dy = r(ROWS, W), r(ROWS, W)
    gamma, beta = r(W, dt=torch.float32), r(W, dt=torch.float32)
    if dtype != torch.float32:
        gamma, beta = gamma.to(dtype), beta.to(dtype)  # 1.13 wants one dtype
    y, mean, rstd = torch.native_layer_norm(x, [W], gamma, beta, 1e-6)
    add("LayerNorm/fwd", lambda: torch.native_layer_norm(x, [W], gamma, beta, 1e-6))
    add("LayerNorm/bwd", lambda: torch.ops.aten.native_layer_norm_backward(
        dy, x, [W], mean, rstd, gamma, beta, [True, True, True]))
    # Softmax over the keys of 512 heads x 50 queries.
    s, dsm = r(B * H * T, T), r(B * H * T, T)
    ys = torch._softmax(s, -1, False)
    add("Softmax/fwd", lambda: torch._softmax(s, -1, False))
    add("Softmax/bwd", lambda: torch._softmax_backward_data(dsm, ys, -1, s.dtype))
    # GELU (erf) on the MLP's hidden activations.
    h, dh = r(ROWS, MLP), r(ROWS, MLP)
    add("Gelu/fwd", lambda: torch.ops.aten.gelu(h))
    add("Gelu/bwd", lambda: torch.ops.aten.gelu_backward(dh, h))
    if dtype == torch.float32:
        add("Dropout/fwd", lambda: torch.nn.functional.dropout(h, 0.1, training=True))
        wp = torch.nn.Parameter(r(208000))
        wp.grad = r(208000)
        opt = torch.optim.AdamW([wp], lr=1e-3, weight_decay=0.01)
        add("AdamW", lambda: opt.step())
    return yield_


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", default=".")
    ap.add_argument("--min-time", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    pattern = re.compile(args.filter)
    with torch.no_grad():
        for dtype in (torch.float32, torch.bfloat16):
            for name, fn in cases(dtype):
                if not pattern.search(name):
                    continue
                ns, out = cpu_ns(fn, args.min_time)
                value = checksum(out) if out is not None else 0.0
                print(f"{name} {ns:.0f} {value:.6g}", flush=True)


if __name__ == "__main__":
    main()
