"""Writes scikit-learn's digits data set (Debian python3-sklearn ships it as a CSV) to an .npz.

    write_digits_npz.py DIGITS_CSV_GZ OUT_NPZ

Arrays: x, f32 [1797, 1, 8, 8], the 8x8 images scaled from 0..16 to [0, 1]; y, i64 [1797],
the digits (the CSV's last column). Only numpy is needed, not scikit-learn itself.
"""
import sys

import numpy as np

rows = np.loadtxt(sys.argv[1], delimiter=",", dtype=np.float64)
x = (rows[:, :64] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
y = rows[:, 64].astype(np.int64)
np.savez(sys.argv[2], x=x, y=y)
