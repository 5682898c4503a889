"""Writes scikit-learn's diabetes data set (Debian python3-sklearn ships it as two CSVs) as
the training and test .npz files examples/diabetes_regression.cc reads.

    write_diabetes_npz.py [DATA_DIR] OUT_DIR

DATA_DIR holds diabetes_data_raw.csv.gz (442 x 10: age, sex, bmi, blood pressure, six blood
serum measurements) and diabetes_target.csv.gz (a measure of the disease's progression a
year later); default /usr/lib/python3/dist-packages/sklearn/datasets/data. Only numpy is
needed, not scikit-learn itself.

OUT_DIR/train.npz holds the first 378 patients, OUT_DIR/test.npz the last 64: x, f32
[count, 10], and y, f32 [count, 1]. Both are standardized with the training part's mean and
standard deviation (features and target alike: the raw features span 1 to 600 and the target
25 to 346, which plain SGD on an MLP trains badly on), so a loss of 1 is the target's
variance. 64 test examples are a whole number of batches of 16, 32 or 64: a model without
class labels cannot evaluate a padded last batch (nothing marks the padding rows).
"""
import os
import sys

import numpy as np

TEST = 64

args = sys.argv[1:]
if len(args) not in (1, 2):
    sys.exit(__doc__)
data_dir = args[0] if len(args) == 2 else "/usr/lib/python3/dist-packages/sklearn/datasets/data"
out = args[-1]
x = np.loadtxt(os.path.join(data_dir, "diabetes_data_raw.csv.gz"), dtype=np.float64)
y = np.loadtxt(os.path.join(data_dir, "diabetes_target.csv.gz"), dtype=np.float64)
if x.shape != (442, 10) or y.shape != (442,):
    sys.exit(f"write_diabetes_npz.py: expected 442 x 10 features and 442 targets, got "
             f"{x.shape} and {y.shape}")
y = y[:, None]
train = slice(0, len(x) - TEST)
x = (x - x[train].mean(axis=0)) / x[train].std(axis=0)
y = (y - y[train].mean(axis=0)) / y[train].std(axis=0)
os.makedirs(out, exist_ok=True)
for name, part in (("train", train), ("test", slice(len(x) - TEST, len(x)))):
    np.savez(os.path.join(out, name + ".npz"), x=x[part].astype(np.float32),
             y=y[part].astype(np.float32))
