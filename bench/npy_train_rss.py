#!/usr/bin/python3
"""Issue 42's bar: a 2 GB .npy of float32 examples trains with a resident set under 600 MB.

Writes X.npy (f32 [N, 3, 32, 32], about GIB GiB, written through a memory map so that this
script holds none of it) and Y.npy (i64 labels of 10 classes), then trains LeNet one epoch
of it with `tandem train --data npy:x=X.npy,y=Y.npy --val-fraction 0.01` and reports the
peak resident set of that process (GNU time), next to the same run over a
small file of the same examples: the difference is what the data costs in memory.

    bench/npy_train_rss.py [--tandem build/tools/tandem] [--gib 2] [--dir /tmp] [--devices 2]

The files are kept for the next run (delete them by hand).
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np


def write(path_x, path_y, count):
    if os.path.exists(path_x) and os.path.exists(path_y):
        x = np.load(path_x, mmap_mode="r")
        if x.shape[0] == count:
            return
    x = np.lib.format.open_memmap(path_x, mode="w+", dtype=np.float32, shape=(count, 3, 32, 32))
    rng = np.random.default_rng(0)
    chunk = 8192
    for at in range(0, count, chunk):
        n = min(chunk, count - at)
        x[at:at + n] = rng.random((n, 3, 32, 32), dtype=np.float32)
    x.flush()
    del x
    np.save(path_y, (np.arange(count) % 10).astype(np.int64))


def train(tandem, spec, devices):
    """Peak resident set (MiB) and wall seconds of one epoch of LeNet over `spec`.

    GNU time reports the peak of the process it starts (wait4's ru_maxrss). Not this
    script's getrusage(RUSAGE_CHILDREN): a child forked from this process counts the pages
    this process held before it exec'd tandem.
    """
    start = time.time()
    run = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib %M", tandem, "train", "--model",
                          "lenet", "--devices", devices, "--batch", "256", "--epochs", "1",
                          "--data", spec, "--val-fraction", "0.01"],
                         capture_output=True, text=True)
    seconds = time.time() - start
    if run.returncode != 0:
        sys.exit(f"npy_train_rss: tandem failed: {run.stderr.strip()}")
    kib = int(run.stderr.strip().splitlines()[-1].split()[-1])
    return kib / 1024, seconds, run.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tandem", default="build/tools/tandem")
    p.add_argument("--gib", type=float, default=2.0)
    p.add_argument("--dir", default="/tmp")
    p.add_argument("--devices", default="2")
    a = p.parse_args()
    if not os.access("/usr/bin/time", os.X_OK):
        sys.exit("npy_train_rss: needs GNU time (/usr/bin/time: the Debian package time)")
    example_bytes = 3 * 32 * 32 * 4
    count = int(a.gib * (1 << 30)) // example_bytes
    small = 4096
    big_x, big_y = (os.path.join(a.dir, f"tandem_rss_{n}.npy") for n in ("x", "y"))
    small_x, small_y = (os.path.join(a.dir, f"tandem_rss_small_{n}.npy") for n in ("x", "y"))
    write(big_x, big_y, count)
    write(small_x, small_y, small)
    small_rss, small_s, _ = train(a.tandem, f"npy:x={small_x},y={small_y}", a.devices)
    big_rss, big_s, out = train(a.tandem, f"npy:x={big_x},y={big_y}", a.devices)
    size = os.path.getsize(big_x) / (1 << 20)
    print(f"{count} examples, {size:.0f} MiB of x: peak resident {big_rss:.0f} MiB "
          f"(one epoch in {big_s:.0f} s)")
    print(f"{small} examples: peak resident {small_rss:.0f} MiB (one epoch in {small_s:.0f} s)")
    print(f"the data's share: {big_rss - small_rss:.0f} MiB; bar: under 600 MiB in all: "
          f"{'met' if big_rss < 600 else 'NOT met'}")
    print(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
