#!/usr/bin/python3
"""Writes the PyTorch reference cases of the transformer kernel cores.

Run with Debian's PyTorch 1.13 (/usr/bin/python3, package python3-torch):

    /usr/bin/python3 tests/data/gen_transformer_refs.py

It rewrites tests/data/transformer_refs/*.ref, small text files that the C++ tests
(tests/backend/transformer_refs_test.cc) read, so CI needs no PyTorch. Each case holds
its inputs, its attributes and what PyTorch computes from them, forward results and
gradients, at a few shapes including odd sizes. Inputs are drawn with a fixed seed and
rounded to bf16-representable values where a case says so, so that the same file checks
the bf16 cores against an exact-input f32 reference.

Format, one item per line:
    # comment
    attr NAME VALUE
    tensor NAME f32|i32 D0 D1 ...
    v0 v1 v2 ...          (every value of the tensor on one line, %.9g: exact for f32)
"""

import os
import sys

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer_refs")
torch.manual_seed(20261126)
torch.set_num_threads(1)


def bf16_values(t):
    """t rounded to the nearest bf16 and back: exact inputs for the bf16 cores."""
    return t.to(torch.bfloat16).to(torch.float32)


class Case:
    def __init__(self, name, what):
        self.name, self.lines = name, [
            f"# {what}",
            f"# written by tests/data/gen_transformer_refs.py with PyTorch {torch.__version__};"
            " do not edit",
        ]

    def attr(self, name, value):
        if isinstance(value, bool):
            value = int(value)
        self.lines.append(f"attr {name} {value!r}" if isinstance(value, float)
                          else f"attr {name} {value}")
        return self

    def tensor(self, name, t):
        t = t.detach().contiguous()
        if t.dtype in (torch.int64, torch.int32):
            kind, values = "i32", [str(int(v)) for v in t.reshape(-1).tolist()]
        else:
            kind = "f32"
            values = ["%.9g" % v for v in t.to(torch.float32).reshape(-1).tolist()]
        self.lines.append(f"tensor {name} {kind} " + " ".join(str(d) for d in t.shape))
        self.lines.append(" ".join(values))
        return self

    def write(self):
        with open(os.path.join(OUT, self.name + ".ref"), "w") as f:
            f.write("\n".join(self.lines) + "\n")


def randn(*shape, bf16=False):
    t = torch.randn(*shape)
    return bf16_values(t) if bf16 else t


def matmul_case(name, batch, m, k, n, trans_a=False, trans_b=False, a_broadcast=False,
                b_broadcast=False, bias=False, scale=1.0, bf16=False):
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    a = randn(*(((1,) if a_broadcast else (batch,)) + a_shape), bf16=bf16).requires_grad_()
    b = randn(*(((1,) if b_broadcast else (batch,)) + b_shape), bf16=bf16).requires_grad_()
    opa = a.transpose(-1, -2) if trans_a else a
    opb = b.transpose(-1, -2) if trans_b else b
    c = torch.matmul(opa, opb) * scale
    bias_t = None
    if bias:
        bias_t = randn(n, bf16=bf16).requires_grad_()
        c = c + bias_t
    dc = randn(*c.shape, bf16=bf16)
    c.backward(dc)
    case = Case(name, f"C = {scale} * op(A) op(B) (+ bias), batched with transpose flags")
    for key, v in dict(batch=batch, m=m, k=k, n=n, trans_a=trans_a, trans_b=trans_b,
                       a_broadcast=a_broadcast, b_broadcast=b_broadcast, bias=bias,
                       bf16_inputs=bf16).items():
        case.attr(key, v)
    case.attr("scale", float(scale))
    case.tensor("a", a).tensor("b", b)
    if bias:
        case.tensor("bias", bias_t)
    case.tensor("dc", dc).tensor("c", c).tensor("da", a.grad).tensor("db", b.grad)
    if bias:
        case.tensor("dbias", bias_t.grad)
    case.write()


def layer_norm_case(name, rows, width, eps, bf16=False):
    x = (randn(rows, width) * 3 + 1.5)
    x = (bf16_values(x) if bf16 else x).requires_grad_()
    gamma = (1 + 0.5 * randn(width, bf16=bf16)).requires_grad_()
    beta = randn(width, bf16=bf16).requires_grad_()
    y = F.layer_norm(x, (width,), gamma, beta, eps)
    dy = randn(rows, width, bf16=bf16)
    y.backward(dy)
    xd = x.detach()
    case = Case(name, "nn.LayerNorm(width, eps) with affine over the last dimension")
    case.attr("rows", rows).attr("width", width).attr("eps", float(eps)).attr("bf16_inputs", bf16)
    case.tensor("x", x).tensor("gamma", gamma).tensor("beta", beta).tensor("dy", dy)
    case.tensor("y", y).tensor("mean", xd.mean(-1)).tensor("var", xd.var(-1, unbiased=False))
    case.tensor("dx", x.grad).tensor("dgamma", gamma.grad).tensor("dbeta", beta.grad)
    case.write()


def softmax_case(name, shape, axis, log, bf16=False):
    x = (randn(*shape) * 2)
    x = (bf16_values(x) if bf16 else x).requires_grad_()
    y = (F.log_softmax if log else F.softmax)(x, dim=axis)
    dy = randn(*shape, bf16=bf16)
    y.backward(dy)
    case = Case(name, ("log_softmax" if log else "softmax") + " over one axis")
    case.attr("axis", axis).attr("log", log).attr("bf16_inputs", bf16)
    case.tensor("x", x).tensor("dy", dy).tensor("y", y).tensor("dx", x.grad)
    case.write()


def activation_case(name, kind):
    # A sweep over [-8, 8] (the tails where erf and tanh saturate, the curved middle)
    # plus random values, all bf16-representable so bf16 runs see the same inputs.
    sweep = torch.linspace(-8, 8, 161)
    x = bf16_values(torch.cat([sweep, torch.randn(97) * 2])).requires_grad_()
    fn = {
        "gelu_erf": lambda t: F.gelu(t),
        "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
    }[kind]
    y = fn(x)
    dy = bf16_values(torch.randn(x.shape))
    y.backward(dy)
    case = Case(name, f"{kind} forward and backward")
    case.attr("kind", kind)
    case.tensor("x", x).tensor("dy", dy).tensor("y", y).tensor("dx", x.grad)
    case.write()


def reduce_case(name, shape, axis, kind):
    x = randn(*shape, bf16=True).requires_grad_()
    y = x.sum(dim=axis) if kind == "sum" else x.mean(dim=axis)
    dy = randn(*y.shape, bf16=True)
    y.backward(dy)
    case = Case(name, f"{kind} over one axis")
    case.attr("axis", axis).attr("kind", kind)
    case.tensor("x", x).tensor("dy", dy).tensor("y", y).tensor("dx", x.grad)
    case.write()


def embedding_case(name, vocab, width, index_shape):
    table = randn(vocab, width).requires_grad_()
    index = torch.randint(0, vocab, index_shape)
    index.view(-1)[:3] = index.view(-1)[0]  # repeated rows: the backward adds them up
    y = F.embedding(index, table)
    dy = randn(*y.shape, bf16=True)
    y.backward(dy)
    case = Case(name, "nn.Embedding lookup and its table gradient")
    case.attr("vocab", vocab).attr("width", width)
    case.tensor("table", table).tensor("index", index).tensor("dy", dy)
    case.tensor("y", y).tensor("dtable", table.grad)
    case.write()


def cross_entropy_case(name, rows, classes, smoothing, divisor, dloss):
    logits = (randn(rows, classes) * 3).requires_grad_()
    labels = torch.randint(0, classes, (rows,))
    labels[1] = -1  # padding rows of a last partial batch
    labels[rows - 1] = -1
    loss = F.cross_entropy(logits, labels, ignore_index=-1, reduction="sum",
                           label_smoothing=smoothing) / divisor
    loss.backward(torch.tensor(dloss))
    case = Case(name, "nn.CrossEntropyLoss(label_smoothing, ignore_index=-1, sum) / divisor")
    case.attr("rows", rows).attr("classes", classes).attr("smoothing", float(smoothing))
    case.attr("divisor", float(divisor)).attr("dloss", float(dloss))
    case.tensor("logits", logits).tensor("labels", labels)
    case.tensor("loss", loss.reshape(1)).tensor("dlogits", logits.grad)
    case.write()


def adamw_case(name, n, steps, lr, betas, eps, weight_decay, bf16_grads, grad_scale=1.0):
    w = torch.nn.Parameter(randn(n))
    opt = torch.optim.AdamW([w], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    case = Case(name, "torch.optim.AdamW (single-tensor path), state after each step")
    case.attr("n", n).attr("steps", steps).attr("lr", float(lr)).attr("beta1", float(betas[0]))
    case.attr("beta2", float(betas[1])).attr("eps", float(eps))
    case.attr("weight_decay", float(weight_decay)).attr("bf16_grads", bf16_grads)
    case.tensor("w0", w)
    for t in range(1, steps + 1):
        g = randn(n) * (0.1 if t % 2 else 10.0) * grad_scale
        g = bf16_values(g) if bf16_grads else g
        w.grad = g.clone()
        opt.step()
        st = opt.state[w]
        case.tensor(f"g{t}", g).tensor(f"w{t}", w).tensor(f"m{t}", st["exp_avg"])
        case.tensor(f"v{t}", st["exp_avg_sq"])
    case.write()


def main():
    if not torch.__version__.startswith("1.13"):
        sys.exit(f"gen_transformer_refs.py: wants PyTorch 1.13 (run /usr/bin/python3), "
                 f"found {torch.__version__}")
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".ref"):
            os.remove(os.path.join(OUT, f))
    matmul_case("matmul_plain", 1, 5, 7, 3)
    matmul_case("matmul_trans_a", 1, 6, 4, 9, trans_a=True)
    matmul_case("matmul_batched_trans_b", 3, 5, 8, 6, trans_b=True, scale=0.25)
    matmul_case("matmul_batched_trans_both", 2, 3, 5, 7, trans_a=True, trans_b=True)
    matmul_case("matmul_shared_b_bias", 4, 3, 6, 5, b_broadcast=True, bias=True)
    matmul_case("matmul_shared_b_trans_b", 3, 4, 5, 7, trans_b=True, b_broadcast=True)
    matmul_case("matmul_attention_scores", 2, 37, 16, 37, trans_b=True, scale=0.25, bf16=True)
    matmul_case("matmul_attention_values", 2, 37, 37, 16, bf16=True)
    matmul_case("matmul_mlp_bias", 1, 21, 64, 40, bias=True, bf16=True)
    layer_norm_case("layer_norm_odd", 7, 13, 1e-5)
    layer_norm_case("layer_norm_vit", 20, 64, 1e-6, bf16=True)
    softmax_case("softmax_last", (4, 50), -1, False, bf16=True)
    softmax_case("softmax_middle", (3, 5, 7), 1, False)
    softmax_case("softmax_first", (2, 3, 11), 0, False)
    softmax_case("log_softmax_last", (6, 10), -1, True, bf16=True)
    softmax_case("log_softmax_middle", (2, 9, 3), 1, True)
    for kind in ("gelu_erf", "gelu_tanh", "tanh", "sigmoid"):
        activation_case(f"activation_{kind}", kind)
    reduce_case("reduce_sum_middle", (3, 5, 7), 1, "sum")
    reduce_case("reduce_mean_tokens", (2, 50, 16), 1, "mean")
    reduce_case("reduce_sum_first", (6, 9), 0, "sum")
    reduce_case("reduce_mean_last", (5, 3, 11), -1, "mean")
    embedding_case("embedding", 11, 6, (3, 4))
    cross_entropy_case("cross_entropy_smooth", 9, 10, 0.1, 16.0, 1.0)
    cross_entropy_case("cross_entropy_plain", 7, 10, 0.0, 7.0, 0.5)
    cross_entropy_case("cross_entropy_strong", 5, 3, 0.3, 1.0, 2.0)
    adamw_case("adamw", 37, 3, 1e-3, (0.9, 0.999), 1e-8, 0.05, False)
    adamw_case("adamw_bf16_grads", 29, 4, 3e-3, (0.8, 0.99), 1e-6, 0.1, True)
    adamw_case("adamw_no_decay", 17, 2, 1e-2, (0.9, 0.999), 1e-8, 0.0, False)
    # Gradients near eps: where eps outside or inside the square root differ.
    adamw_case("adamw_tiny_grads", 23, 3, 1e-3, (0.9, 0.999), 1e-6, 0.05, False, 1e-6)
    print(f"wrote {len(os.listdir(OUT))} cases to {OUT}")


if __name__ == "__main__":
    main()
