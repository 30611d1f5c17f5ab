#!/usr/bin/env python3
"""Plain PyTorch reference for sancus's models (GCN, GraphSAGE-mean, GAT) on a
dataset directory as sancus reads it (graph.mtx, features.mtx, labels.txt,
train/val/test.txt): the same normalization, widths, dropout, optimizer,
weight decay and epochs. Prints the mean test accuracy at the best
validation epoch over seeds, to set next to sancus's in the same run.

    python3 slurm/bench/torch_gnn.py testdata/cora --model sage --seeds 5
    python3 slurm/bench/torch_gnn.py testdata/cora --model gat --hidden 8 --heads 8 \
        --dropout 0.6 --lr 0.005

Debian's python3-torch is enough (no GPU, no torch_geometric). With
--device cuda everything lives on the GPU (Â as sparse CSR for GCN and
GraphSAGE), and each epoch is timed to the GPU's end of it. With
--train-only or on a GPU the mean leaves the first epoch out as warm-up,
as sancus's mean and kernels/cuda/torch_gcn.py do.
"""
import argparse
import os
import time

import numpy as np
import torch


def read_mtx(path):
    """Coordinates (0-based) and values of a Matrix Market file, parsed by
    numpy: a 4M-node graph's 40M lines in seconds, not minutes."""
    with open(path) as f:
        banner = f.readline().lower().split()
        pattern = banner[3] == "pattern"
        line = f.readline()
        while not line.strip() or line.startswith("%"):
            line = f.readline()
        shape = tuple(int(v) for v in line.split()[:2])
        body = np.fromstring(f.read(), sep=" ")
    body = body.reshape(-1, 2 if pattern else 3)
    rows, cols = body[:, 0].astype(np.int64) - 1, body[:, 1].astype(np.int64) - 1
    vals = np.ones(len(rows), np.float32) if pattern else body[:, 2].astype(np.float32)
    return rows, cols, vals, shape, banner[-1] == "symmetric"


def read_ints(path):
    with open(path) as f:
        return torch.from_numpy(np.fromstring(f.read(), sep=" ").astype(np.int64))


def load(d):
    r, c, _, (n, _), _ = read_mtx(os.path.join(d, "graph.mtx"))
    keep = r != c  # both directions, each edge once, no self loops
    key = np.unique(np.concatenate([r[keep] * n + c[keep], c[keep] * n + r[keep]]))
    src, dst = torch.from_numpy(key // n), torch.from_numpy(key % n)
    fr, fc, fv, (fn, f), _ = read_mtx(os.path.join(d, "features.mtx"))
    x = torch.zeros(n, f)
    x[torch.from_numpy(fr), torch.from_numpy(fc)] = torch.from_numpy(fv)
    x = x / x.sum(1, keepdim=True).clamp(min=1e-12)
    labels = read_ints(os.path.join(d, "labels.txt"))
    split = [read_ints(os.path.join(d, s + ".txt")) for s in ("train", "val", "test")]
    return n, src, dst, x, labels, split


def on_cuda(data):
    """load's data on the GPU, which then holds every tensor made."""
    torch.set_default_device("cuda")
    n, src, dst, x, y, split = data
    return n, src.cuda(), dst.cuda(), x.cuda(), y.cuda(), [s.cuda() for s in split]


def adjacency(n, src, dst, kind):
    if kind == "gcn":  # D^-1/2 (A+I) D^-1/2
        loops = torch.arange(n)
        s, t = torch.cat([src, loops]), torch.cat([dst, loops])
        deg = torch.zeros(n).index_add_(0, s, torch.ones(len(s)))
        v = deg[s].rsqrt() * deg[t].rsqrt()
    else:  # mean over neighbours, no self loop
        s, t = src, dst
        deg = torch.zeros(n).index_add_(0, s, torch.ones(len(s)))
        v = 1 / deg[s]
    a = torch.sparse_coo_tensor(torch.stack([s, t]), v, (n, n)).coalesce()
    return a.to_sparse_csr() if a.is_cuda else a


class Net(torch.nn.Module):
    def __init__(self, kind, dims, dropout):
        super().__init__()
        self.kind, self.dropout = kind, dropout
        self.w = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
        self.root = torch.nn.ModuleList(torch.nn.Linear(a, b, bias=False) for a, b in zip(dims, dims[1:])) if kind == "sage" else None
        for m in self.modules():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    torch.nn.init.zeros_(m.bias)

    def forward(self, a, h):
        for l, w in enumerate(self.w):
            h = torch.nn.functional.dropout(h, self.dropout, self.training)
            z = torch.sparse.mm(a, w(h) - w.bias) + w.bias
            if self.root is not None:
                z = z + self.root[l](h)
            h = torch.relu(z) if l < len(self.w) - 1 else z
        return h


class GAT(torch.nn.Module):
    """Veličković et al.: per head e_ij = LeakyReLU_0.2(a_l.Wh_i + a_r.Wh_j)
    over j in N(i) and i, softmax per row, attention dropout; hidden layers
    concatenate heads and apply ELU, the output layer averages its heads."""

    def __init__(self, dims, heads, dropout, att_dropout):
        super().__init__()
        self.heads, self.dropout, self.att_dropout = heads, dropout, att_dropout
        last = len(dims) - 2
        self.f = [dims[l + 1] // heads[l] if l < last else dims[l + 1] for l in range(len(heads))]
        self.w = torch.nn.ParameterList()
        self.al, self.ar, self.b = torch.nn.ParameterList(), torch.nn.ParameterList(), torch.nn.ParameterList()
        for l, (a, b) in enumerate(zip(dims, dims[1:])):
            hf = heads[l] * self.f[l]
            w = torch.empty(a, hf)
            torch.nn.init.xavier_uniform_(w)
            self.w.append(torch.nn.Parameter(w))
            for att in (self.al, self.ar):
                v = torch.empty(heads[l], self.f[l])
                torch.nn.init.xavier_uniform_(v)  # fan (heads, f), as PyG's GATConv
                att.append(torch.nn.Parameter(v))
            self.b.append(torch.nn.Parameter(torch.zeros(b)))

    def forward(self, edges, h):
        i, j = edges
        n = h.shape[0]
        for l in range(len(self.w)):
            H, F = self.heads[l], self.f[l]
            h = torch.nn.functional.dropout(h, self.dropout, self.training)
            u = (h @ self.w[l]).view(n, H, F)
            el, er = (u * self.al[l]).sum(-1), (u * self.ar[l]).sum(-1)
            e = torch.nn.functional.leaky_relu(el[i] + er[j], 0.2)  # edges × heads
            m = torch.full((n, H), -float("inf")).scatter_reduce(0, i[:, None].expand(-1, H), e, "amax")
            p = (e - m[i]).exp()
            s = torch.zeros(n, H).index_add_(0, i, p)
            a = torch.nn.functional.dropout(p / s[i], self.att_dropout, self.training)
            out = torch.zeros(n, H, F).index_add_(0, i, a[:, :, None] * u[j])
            if l < len(self.w) - 1:
                h = torch.nn.functional.elu(out.reshape(n, H * F) + self.b[l])
            else:
                h = out.mean(1) + self.b[l]
        return h


def run(data, kind, seed, epochs=200, hidden=16, layers=2, lr=0.01, wd=5e-4, dropout=0.5, heads=8, out_heads=1, att_dropout=None,
        train_only=False):
    n, src, dst, x, y, (tr, va, te) = data
    torch.manual_seed(seed)
    classes = int(y.max()) + 1
    if kind == "gat":  # every parameter decays, as in the GAT paper (and sancus)
        loops = torch.arange(n)
        a = (torch.cat([src, loops]), torch.cat([dst, loops]))
        dims = [x.shape[1]] + [hidden * heads] * (layers - 1) + [classes]
        net = GAT(dims, [heads] * (layers - 1) + [out_heads], dropout, dropout if att_dropout is None else att_dropout)
        opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=wd)
    else:
        a = adjacency(n, src, dst, kind)
        dims = [x.shape[1]] + [hidden] * (layers - 1) + [classes]
        net = Net(kind, dims, dropout)
        first = [net.w[0].weight] + ([net.root[0].weight] if net.root is not None else [])
        rest = [p for p in net.parameters() if all(p is not q for q in first)]
        opt = torch.optim.Adam([{"params": first, "weight_decay": wd}, {"params": rest, "weight_decay": 0}], lr=lr)
    best, test_at_best, t0 = -1, 0, time.time()
    cuda, times = x.is_cuda, []
    for _ in range(epochs):
        if cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        net.train()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(a, x)[tr], y[tr])
        loss.backward()
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t1)
        if train_only:  # time the training step alone, as sancus's ms/epoch does
            continue
        net.eval()
        with torch.no_grad():
            pred = net(a, x).argmax(1)
        v = (pred[va] == y[va]).float().mean().item()
        if v > best:
            best, test_at_best = v, (pred[te] == y[te]).float().mean().item()
    if (cuda or train_only) and len(times) > 1:  # the first epoch left out, as sancus's mean does
        return test_at_best, sum(times[1:]) / (len(times) - 1) * 1000
    return test_at_best, (time.time() - t0) / epochs * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--model", default="gcn", choices=["gcn", "sage", "gat"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=200)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--out-heads", type=int, default=1)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--train-only", action="store_true", help="time training steps only (no evaluation: accuracy is not measured)")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    data = load(args.data)
    if args.device == "cuda":
        data = on_cuda(data)
    accs, ms = [], []
    for s in range(1, args.seeds + 1):
        acc, t = run(data, args.model, s, args.epochs, args.hidden, args.layers, args.lr, args.weight_decay,
                     args.dropout, args.heads, args.out_heads, train_only=args.train_only)
        accs.append(acc)
        ms.append(t)
    print("%s %s: mean test accuracy %.4f over %d seeds (%s), %.1f ms/epoch (torch %s)" % (
        os.path.basename(args.data.rstrip("/")), args.model, sum(accs) / len(accs), len(accs),
        " ".join("%.3f" % a for a in accs), sum(ms) / len(ms), torch.__version__))


if __name__ == "__main__":
    main()
