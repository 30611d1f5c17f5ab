#!/usr/bin/env bash
# Graphs shaped like the real ones: on the arxiv-like generated
# graph (gen --like arxiv: 169,343 nodes, 1.17M edges, 40 classes, power-law
# degrees), measured on this machine, each figure beside its baseline from
# the same run:
#   replication.tsv  CATGNN's replication factor of SPRING, DBH, HDRF, GREM
#                    and METIS at P = 4, 8, 16 (and on ../shared's wordnet
#                    and METIS meshes where present)
#   balance.tsv      GCN 2x16 under mpirun at P = 2 and 4 (TURNS, 3), contiguous and
#                    SPRING parts balanced by rows or by nonzeros, taking
#                    turns: ms per epoch and the slowest rank's compute over
#                    the mean
#   partitioners.tsv GCN 2x16 and GraphSAGE 2x128 at P = 2 (and
#                    partitioners-P4.tsv at P = 4; PS picks) with each
#                    partitioner: bytes sent per rank per epoch, test accuracy
#   usage: slurm/bench/powerlaw-bench.sh OUTDIR   (needs Debian's metis package)
# STAGES picks the parts run (default "replication balance partitioners").
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/powerlaw}
shared=${SHARED:-../shared/datasets}
epochs=${EPOCHS:-100}
read -ra mpi <<<"$mpirun --bind-to none"
mkdir -p "$out"
g=$tmp/arxiv
"$bin" gen --like arxiv --out "$g" --quiet | tee "$out/graph.txt"

stages=" ${STAGES:-replication balance partitioners} "
if [[ $stages == *" replication "* ]]; then
echo "== replication factor"
graphs=$g
if [ -d "$shared/wordnet" ]; then
	graphs="$g $shared/wordnet $shared/metis/mdual.graph $shared/metis/copter2.graph"
else
	echo "powerlaw-bench: $shared is missing: wordnet and the METIS meshes are left out (set SHARED=DIR)" >&2
fi
rf=$out/replication.tsv
printf 'dataset\tpartitioner\tP\tedge_cut\treplication\treplication_full\trow_balance\tnnz_balance\tseconds\tpeak_mb\n' >"$rf"
for d in $graphs; do
	for p in 4 8 16; do
		for part in spring dbh hdrf grem; do
			"$bin" partition-stats --data "$d" --parts $p --partitioner $part --balance-by rows --row | grep '^ROW' | cut -f2- |
				sed "s|^[^\t]*|$(basename "$d")|" >>"$rf"
		done
		"$bin" partition-stats --data "$d" --parts $p --partitioner file --parts-file "$(metis_parts "$d" $p)" --balance-by rows --row |
			grep '^ROW' | cut -f2- | sed "s|^[^\t]*|$(basename "$d")|; s|\tfile\t|\tmetis\t|" >>"$rf"
	done
done
column -t -s $'\t' "$rf"
fi

# train DIR P OUT [flags]: one mpirun run, its results JSON at OUT.
train() {
	local d=$1 p=$2 o=$3
	shift 3
	"${mpi[@]}" -np "$p" "$bin" train --shards "$d" --epochs "$epochs" --eval-every 10 --quiet --out "$o" "$@" >/dev/null
}

if [[ $stages == *" balance "* ]]; then
echo "== balance by rows or nonzeros"
bal=$out/balance.tsv
printf 'partitioner\tP\tbalance_by\tturn\tms_per_epoch\tcompute_slowest_over_mean\trow_balance\tnnz_balance\n' >"$bal"
for p in 2 4; do
	for part in contiguous spring; do
		for by in rows nnz; do
			"$bin" prepare --data "$g" --parts $p --partitioner $part --balance-by $by --out "$tmp/s-$part-$p-$by" --quiet >/dev/null
		done
		for turn in $(seq "${TURNS:-3}"); do
			for by in rows nnz; do
				s=$tmp/s-$part-$p-$by
				train "$s" $p "$tmp/r.json"
				printf '%s\t%d\t%s\t%d\t%.2f\t%.3f\t%s\n' $part $p $by $turn "$(result "$tmp/r.json" "r['mean_epoch_ms']")" \
					"$(result "$tmp/r.json" "r['compute_imbalance']")" \
					"$(python3 -c "import json; m=json.load(open('$s/meta.json'))['partition']; print('%.3f\t%.3f' % (m['row_balance'], m['nnz_balance']))")" >>"$bal"
			done
		done
	done
done
column -t -s $'\t' "$bal"
fi

if [[ $stages == *" partitioners "* ]]; then
echo "== partitioners: bytes and accuracy"
for p in ${PS:-2 4}; do
pt=$out/partitioners.tsv
[ "$p" = 2 ] || pt=$out/partitioners-P$p.tsv
printf 'partitioner\tmodel\tbytes_per_rank_per_epoch\ttest_acc\tms_per_epoch\tedge_cut\n' >"$pt"
for part in contiguous random grem spring metis; do
	flags=(--partitioner $part)
	[ $part = metis ] && flags=(--partitioner file --parts-file "$(metis_parts "$g" "$p")")
	"$bin" prepare --data "$g" --parts "$p" "${flags[@]}" --precompute=false --out "$tmp/p-$part-$p" --quiet >/dev/null
	for m in "gcn 16" "sage 128"; do
		set -- $m
		train "$tmp/p-$part-$p" "$p" "$tmp/r.json" --model $1 --hidden $2 --precompute=false
		printf '%s\t%s\t%.0f\t%.4f\t%.1f\t%s\n' $part "$1-$2" \
			"$(result "$tmp/r.json" "sum(x['bytes_sent'] for x in r['per_rank'])/len(r['per_rank'])/len(r['curve'])")" \
			"$(result "$tmp/r.json" "r['test_acc_at_best_val']")" "$(result "$tmp/r.json" "r['mean_epoch_ms']")" \
			"$(python3 -c "import json; print(round(json.load(open('$tmp/p-$part-$p/meta.json'))['partition']['edge_cut_fraction'],4))")" >>"$pt"
	done
done
column -t -s $'\t' "$pt"
done
fi
