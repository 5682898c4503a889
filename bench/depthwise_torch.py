#!/usr/bin/python3
"""PyTorch's depthwise convolutions on bench/cpu_kernels_bench's Depthwise shapes (MobileNet
v2's 3x3 depthwise layers at 224x224, 8 images, pad 1), one thread.

One line per pass and shape: `PASS/C:c/H:h/s:s CPU_NS`, the smallest of 5 repetitions of
the per-call CPU time (process time: what Google Benchmark's cpu_time is). The passes are
what autograd calls: F.conv2d forward, and aten::convolution_backward for the input's
gradient alone (BackwardData) and for the weight's and bias's (BackwardFilter). Run by
bench/depthwise_vs_pytorch.sh.

    /usr/bin/python3 bench/depthwise_torch.py [--min-time S]
"""

import argparse

import torch
import torch.nn.functional as F

from transformer_cores_torch import cpu_ns  # the smallest of 5 repetitions' CPU time per call

SHAPES = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2),
          (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1)]  # bench/cpu_kernels_bench.cc
N = 8


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-time", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    for c, h, s in SHAPES:
        x = torch.rand(N, c, h, h, generator=g) + 0.5
        w = torch.rand(c, 1, 3, 3, generator=g) + 0.5
        b = torch.rand(c, generator=g)
        y = F.conv2d(x, w, b, s, 1, 1, c)
        dy = torch.rand(*y.shape, generator=g)
        conv_bwd = torch.ops.aten.convolution_backward
        passes = {
            "Forward": lambda: F.conv2d(x, w, b, s, 1, 1, c),
            "BackwardData": lambda: conv_bwd(dy, x, w, [c], [s, s], [1, 1], [1, 1], False, [0, 0],
                                             c, [True, False, False]),
            "BackwardFilter": lambda: conv_bwd(dy, x, w, [c], [s, s], [1, 1], [1, 1], False,
                                               [0, 0], c, [False, True, True]),
        }
        with torch.no_grad():
            for name, fn in passes.items():
                print(f"{name}/C:{c}/H:{h}/s:{s} {cpu_ns(fn, args.min_time)[0]:.0f}", flush=True)


if __name__ == "__main__":
    main()
