#!/bin/bash
# Strong scaling from `sancus plan`, P = 1 ... 4096, GCN 3x256 fp32, on the
# generated 1M-node graph (as replay.sh makes it) and a products-shaped
# graph (gen --like products --scale 0.25: 612,257 nodes, power-law
# degrees, 100 features, 47 classes). Rates calibrated here by replaying
# the busiest rank at P = 4, 8, 16, 64, 256, 1024 on the 1M graph (and
# checked at 32, 128, 512, not fitted); the same flop rate is
# then predicted with three costs a peer block: the calibrated one, 5 us,
# and 0 (flops and the network alone). Beside it: GCN 2x16 measured at
# P = 1, 2, 4 (in-process ranks, one kernel thread each).
# Writes results/scaling/strong-scaling.tsv, strong-measured.tsv and
# results/scaling/strong/plan-*.json.
# Usage (repository root, after make build): bash slurm/bench/strong-scaling.sh [WORKDIR]
set -e
S=$PWD/bin/sancus
OUT=$PWD/results/scaling
W=${1:-/tmp/sancus-strong}
mkdir -p "$W" "$OUT/strong" && cd "$W"
[ -f g1m/test.txt ] || $S gen --out g1m --nodes 1000000 --edges 10000000 --quiet
[ -f prod/test.txt ] || $S gen --like products --scale 0.25 --out prod --quiet
M=(--model gcn --layers 3 --hidden 256)
C=(--nodes 128 --ranks-per-node 32 --link-gbs 25 --latency-us 2 --max-ranks 4096)
uptime > calibrate.load
$S plan --data g1m "${M[@]}" "${C[@]}" --calibrate --calibrate-ranks 4,8,16,64,256,1024 --validate-ranks 32,128,512 --out plan-g1m-cal.json > plan-g1m-cal.txt 2> plan-g1m-cal.err
uptime >> calibrate.load
read -r R B RN BN < <(python3 -c 'import json; r=json.load(open("plan-g1m-cal.json"))["rates"]; print(r["SpMMGflops"], r["BlockUs"], r.get("PassNs", 0), r.get("ByteNs", 0))')
for g in g1m prod; do
  for b in cal 5 0; do
    [ "$b" = cal ] && bu=$B || bu=$b
    [ "$g$b" = g1mcal ] && continue
    $S plan --data "$g" "${M[@]}" "${C[@]}" --spmm-gflops "$R" --gemm-gflops "$R" --block-us "$bu" --pass-ns "$RN" --byte-ns "$BN" --out "plan-$g-$b.json" > "plan-$g-$b.txt"
  done
done
for P in 1 2 4; do
  uptime > m$P.load
  $S train --data g1m --ranks $P --threads 1 --model gcn --hidden 16 --layers 2 --epochs 6 --eval-every 6 --quiet --out m$P.json > m$P.txt
  uptime >> m$P.load
done
cp plan-*.json "$OUT/strong/"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
t = open(out + "/strong-scaling.tsv", "w")
t.write("# bash slurm/bench/strong-scaling.sh: sancus plan --model gcn --layers 3 --hidden 256 --nodes 128 --ranks-per-node 32 --link-gbs 25 --latency-us 2 --max-ranks 4096 (--calibrate --calibrate-ranks 4,8,16,64,256,1024 --validate-ranks 32,128,512 on g1m; then the calibrated --spmm-gflops/--gemm-gflops, --pass-ns and --byte-ns, --block-us cal|5|0)\n")
t.write("graph\tblock_us\tranks\tnodes\tepoch_ms\tcompute_ms\tcomm_ms\texposed_ms\tmb_in_out_per_rank\tmessages_per_rank\tmemory_mb_per_rank\n")
for g in ("g1m", "prod"):
    for b in ("cal", "5", "0"):
        d = json.load(open("plan-%s-%s.json" % (g, b)))
        for r in d["rows"]:
            t.write("%s\t%.2f\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%d\t%.1f\n" % (g, d["rates"]["BlockUs"], r["ranks"], r["nodes"], r["epoch_ms"],
                    r["compute_ms"], r["comm_ms"], r["exposed_ms"], r["mb_per_rank"], r["messages_per_rank"], r["memory_mb_per_rank"]))
m = open(out + "/strong-measured.tsv", "w")
m.write("# sancus train --data g1m --ranks P --threads 1 --model gcn --hidden 16 --layers 2 --epochs 6 (epoch 1 a warm-up)\n")
m.write("ranks\tleast_ms\tmean_ms_epochs_2_6\tload_before_after\n")
for p in (1, 2, 4):
    c = [e["ms"] for e in json.load(open("m%d.json" % p))["result"]["curve"]][1:]
    load = " / ".join(l.split("load average:")[1].split(",")[0].strip() for l in open("m%d.load" % p))
    m.write("%d\t%.1f\t%.1f\t%s\n" % (p, min(c), sum(c) / len(c), load))
PY
