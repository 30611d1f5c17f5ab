#!/usr/bin/env bash
# Scaling in graph size: generated planted graphs of 100k/1M, 400k/4M,
# 1.6M/16M and 4M/40M nodes/edges (128 features, 16 classes), 10 epochs of
# the 2-layer GCN at P = 1 and P = 2 under mpirun: ms/epoch, ms per million
# nonzeros of Â, peak RSS against the compulsory bytes, and prepare's peak
# RSS against the shards it writes. At P = 1 the same run with --full-output
# (the last layer at every row, as before it computed only the training
# rows) is the baseline next to it. P = 4 runs once per size for its memory
# only: four ranks on a 2-core machine say nothing about time.
#   usage: slurm/bench/scale-bench.sh DATADIR OUTDIR "MPIRUN [flags]" [SIZES]
# SIZES: nodes:edges pairs (default the four above). Writes OUTDIR/scale.tsv.
. "$(dirname "$0")/common.sh" || exit
datadir=$1 out=$2 mpirun=${3:-$mpirun}
sizes=${4:-"100000:1000000 400000:4000000 1600000:16000000 4000000:40000000"}
mkdir -p "$out" "$datadir"
rm -f "$out"/run-*.json "$out"/prepare-*.json
tsv=$out/scale.tsv
echo -e "nodes\tedges\tnnz_ahat\tP\tms_per_epoch\tms_per_M_nnz\trounds_ms\tpeak_rss_mb\tcompulsory_mb\trss_over_compulsory\tbase_rss_mb\tprepare_rss_mb\tprepare_compulsory_mb\tprepare_rss_over_compulsory\tfull_output_ms_per_epoch\tfull_output_ms_per_M_nnz" >"$tsv"
train() { # n np name args...
	local n=$1 np=$2 name=$3
	shift 3
	ranks "$np" "$bin" train --shards "$datadir/planted-$n-P$np" --epochs 10 --eval-every 0 --quiet \
		--out "$out/run-$n-$name.$round.json" "$@" </dev/null >/dev/null
}
for size in $sizes; do
	n=${size%:*} m=${size#*:}
	data=$datadir/planted-$n
	[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --nodes "$n" --edges "$m" --features 128 --classes 16 --seed 1 >/dev/null
	for np in 1 2 4; do
		rm -rf "$datadir/planted-$n-P$np"
		"$bin" prepare --data "$data" --parts "$np" --out "$datadir/planted-$n-P$np" >/dev/null
		cp "$datadir/planted-$n-P$np/meta.json" "$out/prepare-$n-P$np.json"
	done
	# The timed runs take turns, three rounds, and each reports its median
	# round: these VMs swing by up to 50% for seconds at a time.
	for round in 1 2 3; do
		train "$n" 1 P1
		train "$n" 1 P1-full-output --full-output
		train "$n" 2 P2
	done
	round=1
	train "$n" 4 P4
	rm -rf "$datadir/planted-$n-P"[124]
	python3 - "$out" "$n" "$m" >>"$tsv" <<'PY'
import glob, json, os, sys
out, n, m = sys.argv[1], sys.argv[2], int(sys.argv[3])
nnz = 2 * m + int(n)  # symmetric edges and self loops (duplicates merged by gen are few)
def median(name):
    rs = sorted((json.load(open(p))["result"] for p in glob.glob(os.path.join(out, "run-%s-%s.*.json" % (n, name)))),
                key=lambda r: r["mean_epoch_ms"])
    return rs[len(rs) // 2], [r["mean_epoch_ms"] for r in rs]
full, _ = median("P1-full-output")
for np_ in (1, 2, 4):
    r, rounds = median("P%d" % np_)
    meta = json.load(open(os.path.join(out, "prepare-%s-P%d.json" % (n, np_))))
    ranks = r["per_rank"]
    rss = max(x["peak_rss_mb"] for x in ranks)
    comp = max(x["compulsory_mb"] for x in ranks)
    base = max(x.get("base_rss_mb", 0) for x in ranks)
    ms = r["mean_epoch_ms"]
    timed = np_ < 4  # four ranks on two cores: memory only
    cols = [n, str(m), "%d" % nnz, str(np_), "%.1f" % ms if timed else "", "%.2f" % (ms / (nnz / 1e6)) if timed else "",
            " / ".join("%.1f" % x for x in rounds) if timed else "", "%.0f" % rss, "%.0f" % comp, "%.2f" % (rss / comp), "%.0f" % base,
            "%.0f" % meta["peak_rss_mb"], "%.0f" % meta["compulsory_mb"], "%.2f" % (meta["peak_rss_mb"] / meta["compulsory_mb"])]
    f = full["mean_epoch_ms"]
    cols += ["%.1f" % f, "%.2f" % (f / (nnz / 1e6))] if np_ == 1 else ["", ""]
    print("\t".join(cols))
PY
	tail -3 "$tsv"
done
cat "$tsv"
