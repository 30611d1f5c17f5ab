#!/bin/bash
# The busiest rank replayed alone (bench rank) at
# P = 64, 256, 512 on a generated 1M-node graph, next to plan's prediction
# from rates calibrated at P = 4, 16 and 32 on the same graph.
# Writes results/scaling/replay.tsv and plan-g1m.json.
# Usage (repository root, after make build): bash slurm/bench/replay.sh [WORKDIR]
set -e
S=$PWD/bin/sancus
OUT=$PWD/results/scaling
W=${1:-/tmp/sancus-scaling}
mkdir -p "$W" && cd "$W"
[ -f g1m/test.txt ] || $S gen --out g1m --nodes 1000000 --edges 10000000 --quiet
$S plan --data g1m --calibrate --calibrate-ranks 4,16,32 --nodes 64 --ranks-per-node 8 --max-ranks 512 --out plan.json > plan.txt 2> plan.err
read SP GE BU < <(python3 -c 'import json; r=json.load(open("plan.json"))["rates"]; print(r["SpMMGflops"], r["GEMMGflops"], r["BlockUs"])')
for P in 64 256 512; do
  uptime > r$P.load
  $S bench rank --data g1m --parts $P --epochs 10 --spmm-gflops $SP --gemm-gflops $GE --block-us $BU --out r$P.json > r$P.txt
  uptime >> r$P.load
done
cp plan.json "$OUT/plan-g1m.json"
python3 - "$OUT/replay.tsv" <<'PY'
import json, sys
plan = json.load(open("plan.json")); rt = plan["rates"]
out = open(sys.argv[1], "w")
out.write("# bash slurm/bench/replay.sh (gen --nodes 1000000 --edges 10000000; %s; bench rank --data g1m --parts P --epochs 10 at the calibrated rates)\n" % plan["command"])
out.write("# rates %s: sparse %.3f GFLOP/s, GEMM %.3f GFLOP/s, %.3f us a peer block; GCN 2 layers hidden 16, fp32, one thread a rank\n" % (plan["rates_from"], rt["SpMMGflops"], rt["GEMMGflops"], rt["BlockUs"]))
out.write("ranks\trank\trows\tnnz\treplay_mean_ms\treplay_min_ms\tpredicted_compute_ms\treplay_sent_bytes\tcounted_sent_bytes\treplay_recv_bytes\tcounted_recv_bytes\tload_before_after\n")
for p in (64, 256, 512):
    r = json.load(open("r%d.json" % p)); c = r["counted"]
    load = " / ".join(l.split("load average:")[1].split(",")[0].strip() for l in open("r%d.load" % p))
    out.write("%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\t%s\n" % (p, r["rank"], r["rows"], r["nnz"], r["compute_ms"], r["min_ms"],
              r["predicted_compute_ms"], r["bytes_sent"], c["Sent"], r["bytes_recv"], c["Recv"], load))
PY
