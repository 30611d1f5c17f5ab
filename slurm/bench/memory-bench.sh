#!/usr/bin/env bash
# The pre-training memory estimate against measured peak RSS.
#   usage: slurm/bench/memory-bench.sh DATADIR OUTDIR "MPIRUN [flags]" [TABLES]
# TABLES: "1m" (a planted 1M-node, 10M-edge graph, 128 features, 16
# classes: GCN, GraphSAGE and GAT at hidden 16 and 256, P = 1 and 2),
# "gat256" (GAT-256, which the 1M graph cannot hold, on the same graph at
# 50k nodes, P = 1) and/or "products" (gen --like products --scale 0.25:
# 612k nodes, about 29.5M nonzeros of Â; a 3-layer GCN-256 at P = 1, 2 and
# 4, with sancus plan's prediction). Each run trains 2 epochs (an
# evaluation each) under a per-process address-space limit, LIMIT_GB
# (default 16) shared by the ranks on the host, so a wrong estimate fails one
# run rather than the machine; a run the estimate refuses is recorded as
# refused with the GB it asked. Writes OUTDIR/memory-1m.tsv,
# OUTDIR/memory-gat256.tsv and OUTDIR/memory-products.tsv.
. "$(dirname "$0")/common.sh" || exit
datadir=$1 out=$2 mpirun=${3:-$mpirun}
tables=${4:-"1m gat256 products"}
limit_gb=${LIMIT_GB:-16}
mkdir -p "$out" "$datadir"

prepared() { # data np
	[ -e "$1-P$2/meta.json" ] || "$bin" prepare --data "$1" --parts "$2" --out "$1-P$2" --quiet >/dev/null
}

# run NAME NP SHARDS ARGS...: one training run's result JSON, or a
# refusal's message in NAME.refused.
run() {
	local name=$1 np=$2 shards=$3
	shift 3
	rm -f "$out/$name.json" "$out/$name.refused"
	# Address space runs ahead of resident memory (the runtime's
	# reservations, MPI's segments): 2 GB a rank beyond its share.
	if ! (ulimit -v $(((limit_gb * 1024 / np + 2048) * 1024)) && ranks "$np" "$bin" train --shards "$shards" --epochs 2 --quiet \
		--out "$out/$name.json" "$@" </dev/null >"$out/$name.log" 2>&1); then
		grep -o 'needs [0-9.]* GB for .*' "$out/$name.log" | head -1 >"$out/$name.refused" || true
		[ -s "$out/$name.refused" ] || { cat "$out/$name.log" >&2; return 1; }
	fi
}

# row NAME LABEL...: the TSV row of a run: the largest rank's estimated
# and measured peak, their ratio, and each component, measured (estimated).
row() {
	python3 - "$out" "$@" <<'PY'
import json, os, sys
out, name, labels = sys.argv[1], sys.argv[2], sys.argv[3:]
j = os.path.join(out, name + ".json")
if not os.path.exists(j):
    msg = open(os.path.join(out, name + ".refused")).read().strip()
    print("\t".join(labels + ["refused", "", "", "", "", "", "", "", "", msg]))
    sys.exit()
ranks = json.load(open(j))["result"]["per_rank"]
r = max(ranks, key=lambda x: x["peak_rss_mb"])
m, e = r["memory"], r["memory"]["estimate"]
parts = ["graph", "own", "activations", "caches", "eval", "exchange", "model"]
cols = ["%.0f" % e["peak_mb"], "%.0f" % r["peak_rss_mb"], "%.2f" % (e["peak_mb"] / r["peak_rss_mb"]),
        "%.0f" % r["compulsory_mb"], "%.0f" % e["load_mb"]]
cols += ["%.0f (%.0f)" % (m[p + "_mb"], e[p + "_mb"]) for p in parts]
print("\t".join(labels + cols))
PY
}
header="estimate_mb	peak_rss_mb	estimate_over_peak	compulsory_mb	load_estimate_mb	graph_mb(est)	own_mb(est)	activations_mb(est)	caches_mb(est)	eval_mb(est)	exchange_mb(est)	model_mb(est)"

for t in $tables; do
	case $t in
	1m)
		data=$datadir/planted-1m
		[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --nodes 1000000 --edges 10000000 --features 128 --classes 16 --seed 1 --quiet
		tsv=$out/memory-1m.tsv
		echo -e "model\thidden\tP\t$header" >"$tsv"
		for np in 1 2; do
			prepared "$data" "$np"
			for model in gcn sage gat; do
				for hidden in 16 256; do
					run "1m-$model-$hidden-P$np" "$np" "$data-P$np" --model "$model" --hidden "$hidden"
					row "1m-$model-$hidden-P$np" "$model" "$hidden" "$np" | tee -a "$tsv"
				done
			done
		done
		;;
	gat256)
		data=$datadir/planted-50k
		[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --nodes 50000 --edges 500000 --features 128 --classes 16 --seed 1 --quiet
		tsv=$out/memory-gat256.tsv
		echo -e "model\thidden\tP\t$header" >"$tsv"
		prepared "$data" 1
		run "50k-gat-256-P1" 1 "$data-P1" --model gat --hidden 256
		row "50k-gat-256-P1" gat 256 1 | tee -a "$tsv"
		;;
	products)
		data=$datadir/products-q
		[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --like products --scale 0.25 --seed 1 --quiet
		tsv=$out/memory-products.tsv
		"$bin" plan --data "$data" --model gcn --layers 3 --hidden 256 --spmm-gflops 1 --gemm-gflops 1 \
			--nodes 1 --ranks-per-node 4 --max-ranks 4 --out "$out/plan-products.tsv" >/dev/null
		echo -e "P\tplan_mb\tplan_over_peak\t$header" >"$tsv"
		for np in 1 2 4; do
			prepared "$data" "$np"
			run "products-gcn256-P$np" "$np" "$data-P$np" --model gcn --layers 3 --hidden 256
			plan=$(awk -F'\t' -v p="$np" '$1 == p && $3 == "fp32" {print $11}' "$out/plan-products.tsv")
			r=$(row "products-gcn256-P$np" "$np")
			peak=$(cut -f3 <<<"$r")
			echo -e "$np\t$plan\t$(python3 -c "print('%.2f' % ($plan / $peak))")\t$(cut -f2- <<<"$r")" | tee -a "$tsv"
		done
		;;
	esac
done
