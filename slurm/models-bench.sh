#!/usr/bin/env bash
# ms per epoch and MB sent per rank per epoch of every model at hidden 16
# and 256 (2 layers; GraphSAGE also 3 layers at 256), P = 1, 2 and 4 under
# mpirun, on one graph. A GAT's hidden width is its 8 heads' together.
#   usage: slurm/models-bench.sh DATA OUTDIR "MPIRUN [flags]" [EPOCHS]
# Writes OUTDIR/models.tsv.
set -euo pipefail
data=$1 out=$2 mpirun=$3 epochs=${4:-20}
bin=${SANCUS:-bin/sancus}
name=$(basename "$data")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for np in 1 2 4; do
	"$bin" prepare --data "$data" --parts "$np" --out "$tmp/P$np" >/dev/null
	for run in "gcn 2 16" "gcn 2 256" "sage 2 16" "sage 2 256" "sage 3 256" "gat 2 16" "gat 2 256"; do
		set -- $run
		width=(--hidden "$3")
		[ "$1" = gat ] && width=(--heads 8 --hidden $(($3 / 8)))
		$mpirun -np "$np" "$bin" train --shards "$tmp/P$np" --model "$1" --layers "$2" "${width[@]}" \
			--epochs "$epochs" --eval-every 0 --quiet --out "$out/$name-$1-L$2-H$3-P$np.json" </dev/null >/dev/null
	done
done
python3 - "$out" "$name" <<'PY'
import json, glob, os, sys
out, name = sys.argv[1], sys.argv[2]
with open(os.path.join(out, "models.tsv"), "w") as f:
    f.write("model\tlayers\thidden\tP\tms_per_epoch\tMB_per_rank_per_epoch\tcomm_wait_share\tpeak_rss_mb\tcompulsory_mb\tfinal_test_acc\n")
    for p in sorted(glob.glob(os.path.join(out, name + "-*.json"))):
        d = json.load(open(p))
        r, c = d["result"], d["config"]
        P = r["ranks"]
        mb = sum(x["bytes_sent"] for x in r["per_rank"]) / P / len(r["curve"]) / 1e6
        tot = sum(x["compute_s"] + x["comm_wait_s"] for x in r["per_rank"])
        wait = sum(x["comm_wait_s"] for x in r["per_rank"]) / tot if tot else 0
        rss = max(x["peak_rss_mb"] for x in r["per_rank"])
        comp = max(x.get("compulsory_mb", 0) for x in r["per_rank"])
        hidden = c["Hidden"] * (c["Heads"] if r.get("model") == "gat" else 1)
        f.write("%s\t%d\t%d\t%d\t%.1f\t%.3f\t%.2f\t%.0f\t%.0f\t%.4f\n" % (r.get("model", "gcn"), c["Layers"], hidden, P, r["mean_epoch_ms"], mb, wait, rss, comp, r["final_test_acc"]))
print(open(os.path.join(out, "models.tsv")).read())
PY
