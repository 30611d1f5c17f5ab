#!/usr/bin/env bash
# Every training strategy on the same graph and the same shards: full-graph
# SANCUS (the default), cluster-batch, sampled mini-batches drawn in turn
# (DistDGL-like) and sampled ahead of training (ByteGNN-like pipeline), with
# MIGRATE also a model-centric global draw and HopGNN's model migration,
# each but cluster-batch with contiguous, METIS-like (GREM with one chunk:
# multilevel bisection) and ByteGNN partitions. GraphSAGE-mean 2×64 on the
# 100k products-like graph (gen --like products --scale 0.04083), fp32
# wire, P ranks
# over 2 emulated nodes (slurm/emu-nodes.sh) at each link rate. Columns:
# training seconds until the validation accuracy first reached the table's
# target (99% of the best any run reached), MB each rank sent per epoch in
# training (mean over ranks), test accuracy at the best validation epoch.
# Every run evaluates every epoch (full-graph), counted in neither column.
#   usage: slurm/bench/strategies.sh [OUTDIR]   (root: ip netns, tc)
#   env: PS ("4"), RATES ("none 1gbit"), FULL_EPOCHS (40), SAMPLED_EPOCHS (6),
#        MIGRATE (set: add the model-centric global draw and HopGNN's model
#        migration with pre-gathering, on the same global batches)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/strategies}
mkdir -p "$out" "$tmp/runs"
g=$tmp/products-100k
"$bin" gen --like products --scale 0.04083 --out "$g" --quiet >"$out/graph.txt"
full=${FULL_EPOCHS:-40} sampled=${SAMPLED_EPOCHS:-6}
# fp32 on every link: a run left to choose its wire by a probe of a busy
# emulated link would send int8 in one run and int2 in the next.
model=(--model sage --hidden 64 --wire fp32)
samp=(--batch sampled --fanouts 15,10 --batch-size 1000)
for p in ${PS:-4}; do
	declare -A shards=()
	for part in contiguous metis-like bytegnn; do
		flags=(--partitioner "$part")
		[ "$part" != metis-like ] || flags=(--partitioner grem --chunk-edges 100000000)
		"$bin" prepare --data "$g" --parts "$p" "${flags[@]}" --out "$tmp/$part-$p" >/dev/null
		shards[$part]=$tmp/$part-$p
	done
	"$bin" prepare --data "$g" --parts "$p" --clusters $((p * 25)) --out "$tmp/clusters-$p" >/dev/null
	for rate in ${RATES:-none 1gbit}; do
		# run NAME PARTITION SHARDS EPOCHS FLAGS...: one row's run.
		run() {
			local name=$1 part=$2 dir=$3 epochs=$4
			shift 4
			echo "== P=$p $rate $name $part" >&2
			# shellcheck disable=SC2086 # $mpirun carries its flags
			slurm/emu-nodes.sh with --nodes 2 --rate "$rate" --name sancus-strat -- \
				$mpirun -np "$p" "$bin" train --shards "$dir" "${model[@]}" --epochs "$epochs" --eval-every 1 "$@" \
				--quiet --out "$tmp/runs/$p|$rate|$name|$part.json" >/dev/null </dev/null
		}
		for part in contiguous metis-like bytegnn; do
			run full-graph "$part" "${shards[$part]}" "$full"
			run "sampled in turn" "$part" "${shards[$part]}" "$sampled" "${samp[@]}" --sample-ahead=false
			run "sampled ahead" "$part" "${shards[$part]}" "$sampled" "${samp[@]}"
			if [ -n "${MIGRATE:-}" ]; then
				run "sampled, global draw" "$part" "${shards[$part]}" "$sampled" "${samp[@]}" --batch-draw global
				run "model migration" "$part" "${shards[$part]}" "$sampled" "${samp[@]}" --batch-draw global --migrate model --pregather
			fi
		done
		run cluster-batch "grem clusters" "$tmp/clusters-$p" "$full" --batch clusters
	done
done
python3 - "$tmp/runs" "$out/strategies.tsv" <<'EOF'
import glob, json, os, sys
runs = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    p, rate, name, part = os.path.basename(f)[:-5].split("|")
    runs[(p, rate, name, part)] = json.load(open(f))["result"]
target = 0.99 * max(r["best_val_acc"] for r in runs.values())
with open(sys.argv[2], "w") as out:
    out.write(f"# slurm/bench/strategies.sh: GraphSAGE 2x64, 100k products-like graph; target val {target:.4f} (99% of the best run)\n")
    out.write("P\tlink\tstrategy\tpartition\tseconds_to_target\tMB_per_rank_epoch\ttest_acc\tepochs\n")
    for (p, rate, name, part), r in runs.items():
        t, reached = 0.0, "-"
        for e in r["curve"]:
            t += e["ms"] / 1e3
            if e["val_acc"] >= target:
                reached = f"{t:.2f}"
                break
        ranks = r["per_rank"]
        mb = sum(x["bytes_sent"] for x in ranks) / len(ranks) / len(r["curve"]) / 1e6
        out.write(f"{p}\t{rate}\t{name}\t{part}\t{reached}\t{mb:.2f}\t{r['test_acc_at_best_val']:.4f}\t{len(r['curve'])}\n")
EOF
column -t -s $'\t' "$out/strategies.tsv"
