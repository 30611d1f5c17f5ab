#!/usr/bin/env bash
# Cluster-batch against global-batch training on one graph under mpirun:
# ms and MB per rank per epoch, peak memory per rank, and test accuracy
# after equal training time (the shorter run's), with every run's curve
# for `sancus report` (accuracy_vs_time.png).
#   usage: slurm/batch-bench.sh DATA OUTDIR "MPIRUN [flags]" "P..." [K] [PER_STEP] [GLOBAL_EPOCHS] [BATCH_EPOCHS]
set -euo pipefail
data=$1 out=$2 mpirun=$3 ps=$4 k=${5:-1000} per=${6:-100} ge=${7:-100} be=${8:-30}
bin=${SANCUS:-bin/sancus}
name=$(basename "$data")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for np in $ps; do
	"$bin" prepare --data "$data" --parts "$np" --clusters "$k" --out "$tmp/P$np" | tee "$out/prepare-P$np.txt"
	$mpirun -np "$np" "$bin" train --shards "$tmp/P$np" --epochs "$ge" --eval-every 2 --quiet \
		--out "$out/$name-P$np-global.json" </dev/null >/dev/null
	$mpirun -np "$np" "$bin" train --shards "$tmp/P$np" --batch clusters --clusters-per-step "$per" --epochs "$be" --eval-every 1 --quiet \
		--out "$out/$name-P$np-clusters.json" </dev/null >/dev/null
done
python3 - "$out" "$name" <<'PY'
import json, glob, os, sys
out, name = sys.argv[1], sys.argv[2]
runs = {}
for p in sorted(glob.glob(os.path.join(out, name + "-P*.json"))):
    d = json.load(open(p))
    runs[os.path.basename(p)[len(name) + 1:-5]] = d
def acc_at(r, secs):  # test accuracy at the last evaluation within secs of training
    t, acc = 0.0, 0.0
    for e in r["curve"]:
        t += e["ms"] / 1000
        if t > secs:
            break
        if e.get("evaluated"):
            acc = e["test_acc"]
    return acc
rows = []
for P in sorted({int(k.split("-")[0][1:]) for k in runs}):
    g, c = runs.get("P%d-global" % P), runs.get("P%d-clusters" % P)
    if not g or not c:
        continue
    T = min(sum(e["ms"] for e in x["result"]["curve"]) / 1000 for x in (g, c))
    for mode, d in (("global", g), ("clusters", c)):
        r = d["result"]
        mb = sum(x["bytes_sent"] for x in r["per_rank"]) / P / len(r["curve"]) / 1e6
        rss = max(x["peak_rss_mb"] for x in r["per_rank"])
        rows.append((P, mode, r["mean_epoch_ms"], mb, rss, T, acc_at(r, T), r["test_acc_at_best_val"], len(r["curve"])))
with open(os.path.join(out, "batch.tsv"), "w") as f:
    f.write("P\tbatch\tms_per_epoch\tMB_per_rank_per_epoch\tpeak_rss_mb_per_rank\tequal_time_s\ttest_acc_at_equal_time\ttest_acc_at_best_val\tepochs\n")
    for row in rows:
        f.write("%d\t%s\t%.1f\t%.3f\t%.0f\t%.1f\t%.4f\t%.4f\t%d\n" % row)
print(open(os.path.join(out, "batch.tsv")).read())
PY
