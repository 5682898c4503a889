"""Replays examples/diabetes_regression.cc's training in PyTorch and compares the losses.

    diabetes_replay.py DATA_DIR WEIGHTS_DIR LOSSES [--tolerance 1e-5]

DATA_DIR holds train.npz and test.npz (examples/write_diabetes_npz.py), WEIGHTS_DIR the
example's --initial-weights (fc1.w.npy, ... as Model::create drew them) and LOSSES its
--losses file: a line "# batch=16 lr=0.05 momentum=0.9 seed=0 ..." then one line per
epoch, "EPOCH TRAIN_LOSS TEST_LOSS".

The same steps from the same start: torch.nn.Linear's arithmetic on the same weights,
nn.MSELoss's mean over each batch, torch.optim.SGD with the same lr and momentum, and the
same batches in the same order. Tandem shuffles the training examples every epoch with
runtime/data/batch_loader.h's epochPermutation, written out again here from its comment
(Fisher-Yates over std::mt19937_64 seeded with splitmix64(seed ^ splitmix64(epoch)),
rejection sampling for j) rather than read from the example, so the permutation is checked
against the C++ standard's generator too; the last partial batch is dropped. An epoch's
training loss is what runtime/trainer.cc reports: the step losses (f32, each the batch's
mean) times the batch, summed in double, over the examples, which is the mean of the step
losses; the test loss is each batch's f32 sum of squared errors (the evaluation step's
loss) summed in double over the examples.

Prints every epoch's losses and relative differences, then the largest; exits 1 when one
exceeds the tolerance (relative: |tandem - torch| / |torch|), 2 on bad input.
"""
import argparse
import os
import re
import sys

import numpy as np
import torch

MASK = (1 << 64) - 1


def splitmix64(x):
    """ir/random.h's splitmix64."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


class Mt19937_64:
    """std::mt19937_64 as the C++ standard ([rand.predef]) defines it."""

    N, M = 312, 156
    MATRIX_A = 0xB5026F5AA96619E9
    UPPER, LOWER = 0xFFFFFFFF80000000, 0x7FFFFFFF

    def __init__(self, seed):
        self.mt = [seed & MASK]
        for i in range(1, self.N):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK)
        self.index = self.N

    def _twist(self):
        mt = self.mt
        for i in range(self.N):
            x = (mt[i] & self.UPPER) | (mt[(i + 1) % self.N] & self.LOWER)
            mt[i] = mt[(i + self.M) % self.N] ^ (x >> 1) ^ (self.MATRIX_A if x & 1 else 0)
        self.index = 0

    def __call__(self):
        if self.index >= self.N:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK


def check_generator():
    """The standard's check: the 10000th output of a default-seeded mt19937_64."""
    gen = Mt19937_64(5489)
    for _ in range(9999):
        gen()
    if gen() != 9981545732273789042:
        sys.exit("diabetes_replay.py: this mt19937_64 is not the C++ standard's")


def epoch_permutation(n, seed, epoch):
    """runtime/data/batch_loader.h's epochPermutation."""
    order = list(range(n))
    gen = Mt19937_64(splitmix64(seed ^ splitmix64(epoch)))
    for i in range(n - 1, 0, -1):
        bound = i + 1
        threshold = (1 << 64) % bound  # (0 - bound) % bound in uint64_t
        while True:
            r = gen()
            if r >= threshold:
                break
        j = r % bound
        order[i], order[j] = order[j], order[i]
    return order


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("weights_dir")
    parser.add_argument("losses")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()
    check_generator()

    with open(args.losses) as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("# "):
        sys.exit(f"diabetes_replay.py: {args.losses}: no settings line")
    settings = dict(re.findall(r"(\w+)=(\S+)", lines[0]))
    batch, seed = int(settings["batch"]), int(settings["seed"])
    lr, momentum = float(settings["lr"]), float(settings["momentum"])
    tandem = [(int(e), float(tr), float(te)) for e, tr, te in (l.split() for l in lines[1:])]
    if not tandem:
        sys.exit(f"diabetes_replay.py: {args.losses}: no epochs")

    train, test = (np.load(os.path.join(args.data_dir, p + ".npz")) for p in ("train", "test"))
    x, y = torch.from_numpy(train["x"]), torch.from_numpy(train["y"])
    test_x, test_y = torch.from_numpy(test["x"]), torch.from_numpy(test["y"])

    # The example's model: fc1 (10 -> 32), relu, fc2 (32 -> 1), weights [out, in] as torch's.
    def weight(name):
        return torch.nn.Parameter(torch.from_numpy(np.load(os.path.join(args.weights_dir,
                                                                        name + ".npy"))))

    params = [weight(n) for n in ("fc1.w", "fc1.b", "fc2.w", "fc2.b")]
    if [tuple(p.shape) for p in params] != [(32, 10), (32,), (1, 32), (1,)]:
        sys.exit(f"diabetes_replay.py: {args.weights_dir}: not the example's 10-32-1 MLP: "
                 f"{[tuple(p.shape) for p in params]}")
    w1, b1, w2, b2 = params

    def forward(inputs):
        return torch.nn.functional.linear(
            torch.relu(torch.nn.functional.linear(inputs, w1, b1)), w2, b2)

    optimizer = torch.optim.SGD(params, lr=lr, momentum=momentum)
    steps = len(x) // batch  # the last partial batch is dropped
    worst = 0.0
    print("epoch  tandem train        torch train         rel.diff   "
          "tandem test         torch test          rel.diff")
    for epoch, tandem_train, tandem_test in tandem:
        order = torch.tensor(epoch_permutation(len(x), seed, epoch))
        loss_sum = 0.0
        for k in range(steps):
            rows = order[k * batch:(k + 1) * batch]
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(forward(x[rows]), y[rows])
            loss.backward()
            optimizer.step()
            loss_sum += float(loss) * batch
        torch_train = loss_sum / (steps * batch)
        with torch.no_grad():
            test_sum = sum(
                float(torch.nn.functional.mse_loss(forward(test_x[k:k + batch]),
                                                   test_y[k:k + batch], reduction="sum"))
                for k in range(0, len(test_x), batch))
        torch_test = test_sum / len(test_x)
        diffs = [abs(a - b) / abs(b) for a, b in ((tandem_train, torch_train),
                                                   (tandem_test, torch_test))]
        worst = max(worst, *diffs)
        print(f"{epoch:5d}  {tandem_train:.12f}  {torch_train:.12f}  {diffs[0]:.2e}   "
              f"{tandem_test:.12f}  {torch_test:.12f}  {diffs[1]:.2e}")
    print(f"largest relative difference {worst:.3e} over {len(tandem)} epochs "
          f"(tolerance {args.tolerance:g})")
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
