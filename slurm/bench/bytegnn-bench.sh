#!/usr/bin/env bash
# ByteGNN's partitioner against the others at P = 4 and 8 on the 100k
# products-like graph (gen --like products --scale 0.04083: 99,994 nodes,
# 2.53M edges, every node in the 10/10/80 split) and on Cora (training
# nodes first, a third of the nodes in no split): each split's balance
# (max/mean over the parts of the training, validation and test counts),
# the edge cut, and the share of sampled neighbours that are local
# (expected, fanouts 15,10 from the training nodes; partition-stats
# --fanouts) and HopGNN's R_micro (the share of each micrograph's
# vertices in its root's part), with the partitioning seconds, as prepare would cut the
# shards (--balance-by auto). grem-whole is GREM with one chunk holding
# every edge: recursive multilevel bisection, METIS's method; METIS itself
# (gpmetis) joins when installed. products-h95 is the same graph drawn with
# homophily 0.95 (--homophily 0.95: METIS-like cuts 5% of its edges, as
# METIS does real ogbn-products, where 0.807 cuts 18%): the locality
# behind HopGNN's Table 1.
#   usage: slurm/bench/bytegnn-bench.sh OUTDIR   (writes OUTDIR/splits.tsv)
#   env: PS ("4 8")
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/bytegnn}
mkdir -p "$out"
g=$tmp/products-100k
"$bin" gen --like products --scale 0.04083 --out "$g" --quiet | tee "$out/graph.txt"
h=$tmp/products-h95
"$bin" gen --like products --scale 0.04083 --homophily 0.95 --out "$h" --quiet | tee -a "$out/graph.txt"
table=$out/splits.tsv
printf 'dataset\tpartitioner\tP\ttrain_balance\tval_balance\ttest_balance\tedge_cut\tsampled_local\tmicrograph_local\tseconds\n' >"$table"
# row DATA NAME FLAGS...: one line of the table.
row() {
	local data=$1 name=$2
	shift 2
	"$bin" partition-stats --data "$data" --parts "$p" --fanouts 15,10 --row "$@" >"$tmp/out"
	paste <(grep '^ROW-SPLITS' "$tmp/out" | cut -f4-) <(grep '^ROW	' "$tmp/out" | cut -f10) |
		sed "s|^|$(basename "$data")\t$name\t|" >>"$table"
}
for d in "$g" "$h" testdata/cora; do for p in ${PS:-4 8}; do
	for part in contiguous random spring grem bytegnn; do
		row "$d" "$part" --partitioner "$part"
	done
	row "$d" grem-whole --partitioner grem --chunk-edges 100000000
	row "$d" bytegnn-refine4 --partitioner bytegnn --refine 4
	if command -v gpmetis >/dev/null; then
		"$bin" export-metis --data "$d" --out "$tmp/g.graph"
		/usr/bin/time -f '%e' -o "$tmp/time" gpmetis "$tmp/g.graph" "$p" >/dev/null
		row "$d" metis --partitioner file --parts-file "$tmp/g.graph.part.$p" --external-seconds "$(cat "$tmp/time")"
	else
		echo "bytegnn-bench: no gpmetis (Debian's metis): METIS left out" >&2
	fi
done; done
column -t -s $'\t' "$table"
