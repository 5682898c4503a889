#!/usr/bin/python3
"""Writes the PyTorch 2 reference cases of the fused attention math (issue 43).

Run with PyTorch 2.6 (Debian 13's, through the project's tool):

    ../shared/tools/pytorch2 python3 tests/data/gen_attention_refs.py

It rewrites tests/data/transformer_refs/attention_*.ref in the format of
gen_transformer_refs.py (whose docstring describes it), so that the C++ tests
(tests/cores/attention_math_test.cc) need no PyTorch. Each case: q, k, v laid out
[N, T, H, d] (the heads as strides, as the model's tensors are), the output's gradient,
and what torch.nn.functional.scaled_dot_product_attention computes from them in f32:
the output and the gradients of q, k and v; and each query row's log-sum-exp of its
scaled scores, computed in f64 (PyTorch does not return it).
"""

import math
import os

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer_refs")
torch.manual_seed(20261129)
torch.set_num_threads(1)


def write(name, what, attrs, tensors):
    lines = [f"# {what}",
             f"# written by tests/data/gen_attention_refs.py with PyTorch {torch.__version__};"
             " do not edit"]
    for key, value in attrs.items():
        lines.append(f"attr {key} {int(value) if isinstance(value, bool) else value!r}")
    for key, t in tensors.items():
        t = t.detach().contiguous().to(torch.float32)
        lines.append(f"tensor {key} f32 " + " ".join(str(d) for d in t.shape))
        lines.append(" ".join("%.9g" % v for v in t.reshape(-1).tolist()))
    with open(os.path.join(OUT, name + ".ref"), "w") as f:
        f.write("\n".join(lines) + "\n")


def case(name, n, heads, queries, keys, depth, value_depth, causal, scale=None):
    # [N, T, H, d], as the model holds them; SDPA takes [N, H, T, d].
    q = torch.randn(n, queries, heads, depth, requires_grad=True)
    k = torch.randn(n, keys, heads, depth, requires_grad=True)
    v = torch.randn(n, keys, heads, value_depth, requires_grad=True)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=causal,
                                         scale=scale).transpose(1, 2)
    d_out = torch.randn_like(out)
    out.backward(d_out)
    used = scale if scale is not None else 1 / math.sqrt(depth)
    scores = torch.einsum("nqhd,nkhd->nhqk", q.double(), k.double()) * used
    if causal:
        mask = torch.ones(queries, keys, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1).transpose(1, 2)  # [N, Tq, H]
    write(name,
          f"scaled_dot_product_attention(is_causal={causal}, scale={scale}), q k v [N, T, H, d]",
          dict(n=n, heads=heads, queries=queries, keys=keys, depth=depth,
               value_depth=value_depth, causal=causal, scale=float(used)),
          dict(q=q, k=k, v=v, d_out=d_out, out=out, lse=lse, dq=q.grad, dk=k.grad, dv=v.grad))


def main():
    # Odd sizes: more than one tile of 32 keys, and a last tile part full.
    case("attention_causal", n=2, heads=3, queries=37, keys=37, depth=16, value_depth=16,
         causal=True)
    case("attention_causal_long", n=1, heads=1, queries=130, keys=130, depth=32,
         value_depth=32, causal=True)
    # Fewer queries than keys (a prefix attended in full), v of another depth, a given scale.
    case("attention_full", n=2, heads=2, queries=5, keys=70, depth=8, value_depth=12,
         causal=False, scale=0.3)


if __name__ == "__main__":
    main()
