#!/usr/bin/env bash
# Scaling in graph size: generated planted graphs of 100k/1M, 400k/4M,
# 1.6M/16M and 4M/40M nodes/edges (128 features, 16 classes), 10 epochs of
# the 2-layer GCN at P = 1 and P = 2 under mpirun: ms/epoch, ms per million
# nonzeros of Â, peak RSS against the compulsory bytes, and prepare's peak
# RSS against the shards it writes. At P = 1 the same run with --full-output
# (the last layer at every row, as before it computed only the training
# rows) is the baseline next to it.
#   usage: slurm/scale-bench.sh DATADIR OUTDIR "MPIRUN [flags]" [SIZES]
# SIZES: nodes:edges pairs (default the four above). Writes OUTDIR/scale.tsv.
set -euo pipefail
datadir=$1 out=$2 mpirun=$3
sizes=${4:-"100000:1000000 400000:4000000 1600000:16000000 4000000:40000000"}
bin=${SANCUS:-bin/sancus}
mkdir -p "$out" "$datadir"
tsv=$out/scale.tsv
echo -e "nodes\tedges\tnnz_ahat\tP\tms_per_epoch\tms_per_M_nnz\tpeak_rss_mb\tcompulsory_mb\trss_over_compulsory\tprepare_rss_mb\tprepare_compulsory_mb\tbase_rss_mb\tfull_output_ms_per_epoch\tfull_output_ms_per_M_nnz" >"$tsv"
for size in $sizes; do
	n=${size%:*} m=${size#*:}
	data=$datadir/planted-$n
	[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --nodes "$n" --edges "$m" --features 128 --classes 16 --seed 1 >/dev/null
	for np in 1 2; do
		shards=$datadir/planted-$n-P$np
		rm -rf "$shards"
		"$bin" prepare --data "$data" --parts "$np" --out "$shards" >/dev/null
		launch="$mpirun -np $np"
		[ "$np" = 1 ] && launch= # mpirun -np 1 would bind the rank to one core
		$launch "$bin" train --shards "$shards" --epochs 10 --eval-every 0 --quiet \
			--out "$out/run-$n-P$np.json" </dev/null >/dev/null
		full=none
		if [ "$np" = 1 ]; then
			full=$out/run-$n-P1-full-output.json
			"$bin" train --shards "$shards" --epochs 10 --eval-every 0 --quiet --full-output --out "$full" </dev/null >/dev/null
		fi
		python3 - "$out/run-$n-P$np.json" "$n" "$m" "$np" "$shards/meta.json" "$full" >>"$tsv" <<'PY'
import json, sys
path, n, m, np_, meta, full = sys.argv[1:]
meta = json.load(open(meta))
r = json.load(open(path))["result"]
nnz = 2 * int(m) + int(n)  # symmetric edges and self loops (duplicates merged by gen are few)
rss = max(x["peak_rss_mb"] for x in r["per_rank"])
comp = max(x["compulsory_mb"] for x in r["per_rank"])
base = max(x.get("base_rss_mb", 0) for x in r["per_rank"])
ms = r["mean_epoch_ms"]
fms = json.load(open(full))["result"]["mean_epoch_ms"] if full != "none" else None
tail = "\t%.1f\t%.2f" % (fms, fms / (nnz / 1e6)) if fms else "\t\t"
print("%s\t%s\t%d\t%s\t%.1f\t%.2f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f%s" % (n, m, nnz, np_, ms, ms / (nnz / 1e6), rss, comp, rss / comp, meta["peak_rss_mb"], meta["compulsory_mb"], base, tail))
PY
		rm -rf "$shards"
	done
	tail -2 "$tsv"
done
cat "$tsv"
