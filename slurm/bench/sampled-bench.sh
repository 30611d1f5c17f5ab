#!/usr/bin/env bash
# Sampled mini-batches (train --batch sampled) against full-graph training.
# 1. Accuracy: GraphSAGE and GAT (Cora's setting) on Cora and CiteSeer,
#    full-graph and sampled (fanouts 25,10, batch 1000 and 32), five seeds
#    each, 200 epochs; test accuracy at the best validation epoch, mean and
#    std (accuracy.tsv).
# 2. Traffic: a 2-layer GCN on a generated planted graph (NODES, default
#    100,000; 1M edges) at P = 4 under mpirun, EPOCHS epochs (default 10)
#    evaluated after the last only: full-graph, then sampled (fanouts 15,10,
#    batch 1000) with --batch-draw local (sampled ahead, and in turn) and
#    global; each epoch's training ms, bytes rank 0 sends, the feature rows
#    read locally and fetched, and rank 0's sampling time and the part of it
#    the training waited for (traffic.tsv, the mean over epochs after the
#    first). Losses after a few epochs are not compared: a sampled epoch
#    takes many steps, a full-graph epoch one.
# PARTS names the parts to run (default: accuracy traffic).
#   usage: slurm/bench/sampled-bench.sh OUTDIR
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/sampled}
mkdir -p "$out"
parts=" ${PARTS:-accuracy traffic} "
if [[ $parts == *" accuracy "* ]]; then
	acc=$tmp/acc.tsv
	printf 'mode\tseed\ttest_acc\n' >"$acc"
	while IFS='|' read -r model mflags; do
		while IFS='|' read -r name flags; do
			for data in cora citeseer; do
				for seed in 1 2 3 4 5; do
					# shellcheck disable=SC2086
					"$bin" train --data testdata/$data $mflags --seed $seed --eval-every 1 $flags --quiet --out "$tmp/r.json" >/dev/null
					printf '%s, %s%s\t%d\t%s\n' "$data" "$model" "$name" $seed "$(result "$tmp/r.json" "r['test_acc_at_best_val']")" >>"$acc"
				done
			done
		done <<'M'
full-graph|--batch global
sampled 25,10 batch 1000|--batch sampled --fanouts 25,10 --batch-size 1000
sampled 25,10 batch 32|--batch sampled --fanouts 25,10 --batch-size 32
M
	done <<'A'
|--model sage
GAT |--model gat --hidden 8 --heads 8 --dropout 0.6 --lr 0.005
A
	python3 - "$acc" "$out/accuracy.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
out = open(sys.argv[2], "w")
out.write("# GraphSAGE (rows without a model) and GAT (--hidden 8 --heads 8 --dropout 0.6 --lr 0.005) on Cora and CiteSeer (testdata), 200 epochs evaluated each, 5 seeds: slurm/bench/sampled-bench.sh\n")
out.write("mode\tmean_test_acc\tstd\tseeds\n")
for m in dict.fromkeys(r["mode"] for r in rows):
    a = [float(r["test_acc"]) for r in rows if r["mode"] == m]
    out.write(f"{m}\t{statistics.mean(a):.4f}\t{statistics.stdev(a):.4f}\t{' '.join(f'{x:.3f}' for x in a)}\n")
EOF
	cat "$out/accuracy.tsv"
fi
[[ $parts == *" traffic "* ]] || exit 0
nodes=${NODES:-100000}
epochs=${EPOCHS:-10}
g=$tmp/planted
"$bin" gen --nodes "$nodes" --edges $((nodes * 10)) --seed 1 --out "$g" --quiet >/dev/null
tr=$tmp/traffic.tsv
while IFS='|' read -r name flags; do
	# shellcheck disable=SC2086
	ranks 4 "$bin" train --data "$g" --epochs "$epochs" --eval-every 0 $flags --quiet --out "$tmp/r.json" >/dev/null </dev/null
	python3 - "$tmp/r.json" "$name" >>"$tr" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["result"]
c = r["curve"][1:]
ms = sum(e["ms"] for e in c) / len(c)
sent = sum(e["bytes_sent"] for e in c) / len(c)
s = [e.get("sampling") for e in c]
loc = rem = steps = secs = exposed = "-"
if s[0]:
    mean = lambda f: sum(f(x) for x in s) / len(s)
    steps = s[0]["steps"]
    loc, rem = f'{mean(lambda x: x["features_local"]):.0f}', f'{mean(lambda x: x["features_remote"]):.0f}'
    secs, exposed = f'{1e3 * mean(lambda x: x["rank_sample_s"][0]):.1f}', f'{1e3 * mean(lambda x: x["rank_exposed_s"][0]):.1f}'
print(f'{sys.argv[2]}\t{ms:.1f}\t{sent / 1e6:.2f}\t{steps}\t{loc}\t{rem}\t{secs}\t{exposed}')
EOF
done <<'M'
full-graph|--batch global
sampled local|--batch sampled --fanouts 15,10 --batch-size 1000 --batch-draw local
sampled local, in turn|--batch sampled --fanouts 15,10 --batch-size 1000 --batch-draw local --sample-ahead=false
sampled global|--batch sampled --fanouts 15,10 --batch-size 1000 --batch-draw global
M
{
	printf '# GCN, planted graph of %d nodes, %d edges, P = 4 under mpirun, %d epochs: slurm/bench/sampled-bench.sh\n' "$nodes" $((nodes * 10)) "$epochs"
	printf '# per epoch after the first: training ms, MB rank 0 sends, steps, feature rows read locally / fetched (all ranks),\n'
	printf '# rank 0 ms sampling and fetching, and of those ms the training waited for (sampled ahead: less)\n'
	printf 'mode\tepoch_ms\trank0_MB\tsteps\tfeatures_local\tfeatures_remote\trank0_sample_ms\trank0_exposed_ms\n'
	cat "$tr"
} >"$out/traffic.tsv"
cat "$out/traffic.tsv"
