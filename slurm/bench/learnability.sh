#!/usr/bin/env bash
# Are the generated graphs learnable, and what does the ÂX shortcut cost?
# For each generator at its defaults (BASE: which of planted, dcsbm, cora,
# citeseer; all by default) and the --like presets given in LIKES (name or
# name:scale, e.g. "arxiv products:0.1"), five seeds (the graph's and the run's), a 2-layer GCN at the
# Kipf-Welling settings (sancus train's defaults: hidden 16, dropout 0.5,
# Adam 0.01, weight decay 5e-4, 200 epochs), with --precompute (dropout on
# ÂX) and --precompute=false (dropout on X, the paper's model); test
# accuracy at the best validation epoch, then mean and std per graph.
# TRAIN adds flags to every run (e.g. "--model sage": GraphSAGE, whose
# --precompute reads D⁻¹AX).
#   usage: slurm/bench/learnability.sh OUTDIR
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/learnability}
epochs=${EPOCHS:-200}
mkdir -p "$out"
runs=$out/runs.tsv
printf 'graph\tseed\tprecompute\ttest_acc\n' >"$runs"
# graph name, then gen's flags
graphs=()
for b in ${BASE-planted dcsbm cora citeseer}; do
	case $b in
	planted | dcsbm) graphs+=("$b --model $b") ;;
	*) graphs+=("testdata/$b -") ;;
	esac
done
for l in ${LIKES:-}; do
	case $l in
	*:*) graphs+=("${l%%:*}-like-x${l#*:} --like ${l%%:*} --scale ${l#*:}") ;;
	*) graphs+=("$l-like --like $l") ;;
	esac
done
for entry in "${graphs[@]}"; do
	read -r name flags <<<"$entry"
	for seed in 1 2 3 4 5; do
		d=$name
		if [ "$flags" != - ]; then
			d=$tmp/$name-$seed
			# shellcheck disable=SC2086
			"$bin" gen $flags --seed $seed --out "$d" --quiet >/dev/null
		fi
		for pre in true false; do
			# shellcheck disable=SC2086
			"$bin" train --data "$d" --seed $seed --epochs "$epochs" --precompute=$pre ${TRAIN:-} --quiet --out "$tmp/r.json" >/dev/null
			printf '%s\t%d\t%s\t%s\n' "$(basename "$name")" $seed $pre \
				"$(result "$tmp/r.json" "r['test_acc_at_best_val']")" >>"$runs"
		done
		[ "$flags" != - ] && rm -rf "$d"
	done
done
python3 - "$runs" "$out/table.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
out = open(sys.argv[2], "w")
out.write("graph\tprecompute\tmean_test_acc\tstd\tseeds\tpre_minus_plain\n")
graphs = list(dict.fromkeys(r["graph"] for r in rows))
for g in graphs:
    acc = {p: [float(r["test_acc"]) for r in rows if r["graph"] == g and r["precompute"] == p] for p in ("true", "false")}
    gap = statistics.mean(acc["true"]) - statistics.mean(acc["false"])
    for p in ("true", "false"):
        out.write("%s\t%s\t%.4f\t%.4f\t%d\t%+.4f\n" % (g, p, statistics.mean(acc[p]), statistics.stdev(acc[p]), len(acc[p]), gap))
out.close()
print(open(sys.argv[2]).read())
EOF
