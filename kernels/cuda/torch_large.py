#!/usr/bin/env python3
"""GCN and GraphSAGE (hidden 16, 20 epochs, training steps alone) in plain
PyTorch on one dataset read once: slurm/bench/torch_gnn.py's models and timing,
for graphs whose reading costs more than their training
(kernels/cuda/gpu-host.sh large)."""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "slurm"))
import torch_gnn  # noqa: E402

t0 = time.time()
data = torch_gnn.load(sys.argv[1])
print("PyTorch read the graph in %.0f s" % (time.time() - t0), flush=True)
if torch.cuda.is_available():
    data = torch_gnn.on_cuda(data)
for kind in ("gcn", "sage"):
    acc, ms = torch_gnn.run(data, kind, 1, 20, 16, 2, 0.01, 5e-4, 0.5, train_only=True)
    print("torch %s: %.2f ms/epoch (torch %s)" % (kind, ms, torch.__version__), flush=True)
