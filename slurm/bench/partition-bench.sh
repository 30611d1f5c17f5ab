#!/usr/bin/env bash
# Partitioner benchmark: edge cut, replication factor, balance, time and
# peak memory of contiguous, random, SPRING, GREM and METIS (gpmetis, via
# --partitioner file) on wordnet, metis/mdual, metis/copter2 and a generated
# power-law (R-MAT) graph, for P = 4 and 8. GREM runs twice: with the
# default chunk (1M edges: the whole sub-problem on these graphs) and with
# chunks of 5% of the edges, within the paper's 1-10% (grem@0.05).
#   usage: slurm/bench/partition-bench.sh OUTDIR   (needs Debian's metis package)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/partition}
shared=${SHARED:-../shared/datasets}
mkdir -p "$out"
"$bin" gen --out "$tmp/rmat" --generator rmat --nodes 262144 --edges 2000000 --features 16 --feature-nnz 4 --classes 8 >/dev/null
graphs="$tmp/rmat"
# The real graphs come from ../shared beside the checkout; without it the
# table holds the generated graph alone, and says so.
if [ -d "$shared/wordnet" ]; then
	graphs="$shared/wordnet $shared/metis/mdual.graph $shared/metis/copter2.graph $graphs"
else
	echo "partition-bench: $shared is missing: wordnet and the METIS meshes are left out (set SHARED=DIR)" >&2
fi
table=$out/partition.tsv
printf 'dataset\tpartitioner\tP\tedge_cut\treplication\treplication_full\trow_balance\tnnz_balance\tseconds\tpeak_mb\n' >"$table"
for g in $graphs; do
	name=$(basename "$g")
	metisg=$g
	case $g in *.graph) ;; *)
		metisg=$tmp/$name.graph
		"$bin" export-metis --data "$g" --out "$metisg"
		;;
	esac
	for p in 4 8; do
		for part in contiguous random spring grem "grem --chunk-frac 0.05"; do
			# shellcheck disable=SC2086 # the partitioner carries its flags
			"$bin" partition-stats --data "$g" --parts "$p" --partitioner $part --row | grep '^ROW' | cut -f2- |
				sed "s|^[^\t]*|$name|" >>"$table"
		done
		/usr/bin/time -f '%e %M' -o "$tmp/time" gpmetis "$metisg" "$p" >/dev/null
		read -r secs kb <"$tmp/time"
		"$bin" partition-stats --data "$g" --parts "$p" --partitioner file --parts-file "$metisg.part.$p" \
			--external-seconds "$secs" --external-peak-mb "$(echo "$kb / 1024" | bc -l)" --row |
			grep '^ROW' | cut -f2- | sed "s|^[^\t]*|$name|; s|\tfile\t|\tmetis\t|" >>"$table"
	done
done
column -t -s $'\t' "$table"
