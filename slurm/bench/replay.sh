#!/bin/bash
# The busiest rank replayed alone (bench rank's replay, one kernel thread)
# on a generated 1M-node graph: plan --calibrate fits its rates at
# P = 8, 32, 128, 1024 and checks them at P = 64, 256, 512, which it does
# not fit. All seven replays are built first, then step one after the
# other, ROUNDS times, so the fitted and the checked ranks share the
# machine's load; each P's least step is compared (its median beside it).
# Writes results/scaling/replay.tsv and plan-g1m.json.
# Usage (repository root, after make build): bash slurm/bench/replay.sh [WORKDIR]
# (ROUNDS=30; about 2.8 GB resident at most, in the P = 1024 set-up; 3.5 min
# at load 1, most of it set-up).
set -e
S=$PWD/bin/sancus
OUT=$PWD/results/scaling
W=${1:-/tmp/sancus-scaling}
ROUNDS=${ROUNDS:-30}
mkdir -p "$W" && cd "$W"
[ -f g1m/test.txt ] || $S gen --out g1m --nodes 1000000 --edges 10000000 --quiet
$S plan --data g1m --calibrate --calibrate-ranks 8,32,128,1024 --validate-ranks 64,256,512 --calibrate-rounds "$ROUNDS" \
  --nodes 64 --ranks-per-node 8 --max-ranks 512 --out plan.json > plan.txt 2> plan.err
cp plan.json "$OUT/plan-g1m.json"
python3 - "$OUT/replay.tsv" <<'PY'
import json, sys
plan = json.load(open("plan.json")); cal = plan["calibration"]; rt = cal["rates"]
out = open(sys.argv[1], "w")
out.write("# bash slurm/bench/replay.sh (gen --nodes 1000000 --edges 10000000; %s)\n" % plan["command"])
out.write("# rates %s: %.3f GFLOP/s sparse, %.3f GFLOP/s GEMM, %.3f us a peer block, %.3f ns a row value passed, %.3f ns a byte packed; GCN 2 layers hidden 16, fp32\n"
          % (plan["rates_from"], rt["SpMMGflops"], rt["GEMMGflops"], rt["BlockUs"], rt.get("PassNs", 0), rt.get("ByteNs", 0)))
out.write("# load average %.1f to %.1f while the %d rounds ran\n" % (cal["load_least"], cal["load_most"], cal["rounds"]))
out.write("ranks\trole\trank\trows\tnnz\tgflop\tpeer_blocks\trow_values_passed\treplay_least_ms\treplay_median_ms\tpredicted_ms\tleast_over_predicted\treplay_sent_bytes\tcounted_sent_bytes\treplay_recv_bytes\tcounted_recv_bytes\n")
for p in sorted(cal["points"], key=lambda p: p["ranks"]):
    w, c = p["work"], p["counted"]
    out.write("%d\t%s\t%d\t%d\t%d\t%.4f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%d\t%d\n" % (p["ranks"], "fitted" if p["fitted"] else "checked", p["rank"], p["rows"], p["nnz"],
              (w["SpMM"] + w["GEMM"]) / 1e9, w["Blocks"], w["PassedValues"], p["least_ms"], p["median_ms"], p["predicted_ms"], p["least_ms"] / p["predicted_ms"],
              p["bytes_sent"], c["Sent"], p["bytes_recv"], c["Recv"]))
PY
