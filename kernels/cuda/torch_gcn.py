#!/usr/bin/env python3
"""The PyTorch baseline for `sancus bench kernels --device cuda`.

A plain 2-layer GCN (Kipf & Welling: hidden 16, dropout 0.5, Adam 0.01,
weight decay 5e-4 on the first layer) on the same dataset directory and the
same normalisation (symmetrised, duplicate edges and self loops dropped,
A+I, D^-1/2 (A+I) D^-1/2, row-normalised features), with Â as a
torch.sparse_csr tensor on the GPU. It reports the mean training-epoch time
(forward, backward, update; evaluation excluded), measured as sancus
measures it: every epoch ends when the GPU is done.

usage: torch_gcn.py DATASET_DIR [--epochs N] [--out FILE]
"""
import argparse
import json
import os
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
import torch


def load(d):
    a = scipy.io.mmread(os.path.join(d, "graph.mtx")).tocsr()
    a = ((a + a.T) > 0).astype(np.float32)
    a.setdiag(0)
    a.eliminate_zeros()
    a = a + sp.eye(a.shape[0], dtype=np.float32, format="csr")
    deg = np.asarray(a.sum(1)).ravel()
    dinv = sp.diags(1 / np.sqrt(deg))
    ahat = (dinv @ a @ dinv).tocsr().astype(np.float32)
    x = scipy.io.mmread(os.path.join(d, "features.mtx")).tocsr().astype(np.float32)
    rs = np.asarray(x.sum(1)).ravel()
    rs[rs == 0] = 1
    x = sp.diags(1 / rs) @ x
    y = np.loadtxt(os.path.join(d, "labels.txt"), dtype=np.int64)
    train = np.loadtxt(os.path.join(d, "train.txt"), dtype=np.int64)
    return ahat, x.toarray(), y, train


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--out", default="")
    args = p.parse_args()
    dev = torch.device("cuda")
    ahat, x, y, train = load(args.data)
    A = torch.sparse_csr_tensor(torch.from_numpy(ahat.indptr.astype(np.int64)),
                                torch.from_numpy(ahat.indices.astype(np.int64)),
                                torch.from_numpy(ahat.data), size=ahat.shape).to(dev)
    X = torch.from_numpy(x).to(dev)
    Y = torch.from_numpy(y).to(dev)
    T = torch.from_numpy(train).to(dev)
    classes = int(y.max()) + 1
    torch.manual_seed(1)
    W1 = torch.nn.Parameter(torch.empty(X.shape[1], 16, device=dev))
    W2 = torch.nn.Parameter(torch.empty(16, classes, device=dev))
    b1 = torch.nn.Parameter(torch.zeros(16, device=dev))
    b2 = torch.nn.Parameter(torch.zeros(classes, device=dev))
    torch.nn.init.xavier_uniform_(W1)
    torch.nn.init.xavier_uniform_(W2)
    opt = torch.optim.Adam([{"params": [W1], "weight_decay": 5e-4}, {"params": [W2, b1, b2]}], lr=0.01)
    f = torch.nn.functional
    times = []
    for ep in range(args.epochs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        opt.zero_grad()
        h = f.relu(A @ (f.dropout(X, 0.5) @ W1) + b1)
        z = A @ (f.dropout(h, 0.5) @ W2) + b2
        loss = f.cross_entropy(z[T], Y[T])
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    ms = float(np.mean(times[1:]))
    r = {"dataset": args.data, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
         "epochs": args.epochs, "mean_epoch_ms": ms, "final_loss": float(loss)}
    print(json.dumps(r))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(r, fh, indent=2)


if __name__ == "__main__":
    main()
