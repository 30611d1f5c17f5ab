#!/usr/bin/env bash
# Time to accuracy on an emulated link (slurm/emu-link.sh): P ranks under
# mpirun in a network namespace, TCP over its loopback, the loopback capped
# at each rate by tbf ("none": the same namespace and TCP, no cap, so the
# link alone differs). On a generated 100k graph (GEN: gen's flags;
# default a degree-corrected block model, whose accuracy takes epochs),
# every configuration trains the same epochs at the same learning rate; a
# run's time to accuracy is the training seconds (evaluation excluded)
# until its validation accuracy first reaches 99% of the best validation
# accuracy of sparse fp32 without staleness at the same rate and model.
#   usage: slurm/bench/link-bench.sh OUTDIR   (root: ip netns, tc)
#   env: RATES ("1gbit none"), PS ("2"), MODELS ("gcn"), EPOCHS and LR (by
#        model: GCN 300 epochs at 0.05, GraphSAGE and GAT 60 at 0.01),
#        GEN ("--generator dcsbm"), CONFIGS (names of the configurations below; all),
#        TURNS (1: each configuration runs that many times, the configurations
#        taking turns; training is deterministic, so the turns differ in time
#        alone, and the summary reports the median turn's times)
. "$(dirname "$0")/common.sh" || exit
out=${1:-results/bench/link}
rates=${RATES:-1gbit none}
ps=${PS:-2}
models=${MODELS:-gcn}
turns=${TURNS:-1}
emu=slurm/emu-link.sh
mkdir -p "$out"
# shellcheck disable=SC2086 # GEN carries gen's flags
"$bin" gen ${GEN:---generator dcsbm} --out "$tmp/g" --quiet >/dev/null
# name, then train flags (the configurations compared)
# (fp32 is named: given no --wire, ranks that share no memory choose by
# the link, and the default configuration is that choice)
configs=(
	"cagnet-1d --dense-bcast --precompute=false --staleness none --wire fp32"
	"sancus-paper --dense-bcast --precompute=false --staleness variation-gap --wire fp32"
	"sparse-fp32 --staleness none --wire fp32"
	"sparse-vgap --staleness variation-gap --wire fp32"
	"sparse-epoch-fixed --staleness epoch-fixed --wire fp32"
	"sparse-int8 --staleness none --wire int8"
	"sparse-int4 --staleness none --wire int4"
	"sparse-int2 --staleness none --wire int2"
	"sparse-int2-delta-bf16ar --staleness none --wire int2 --wire-delta --wire-allreduce bf16"
	"default --name default"
)
for model in $models; do
	case $model in
	gcn) mflags=(--model gcn --hidden 16 --layers 2) epochs=300 lr=0.05 ;;
	sage) mflags=(--model sage --hidden 256 --layers 3) epochs=60 lr=0.01 ;;
	gat) mflags=(--model gat --hidden 8 --heads 8 --layers 2) epochs=60 lr=0.01 ;;
	*) echo "link-bench: unknown model $model (gcn, sage, gat)" >&2 && exit 2 ;;
	esac
	epochs=${EPOCHS:-$epochs} lr=${LR:-$lr}
	for p in $ps; do
		for rate in $rates; do
			d=$out/$model-P$p-$rate
			mkdir -p "$d"
			for turn in $(seq "$turns"); do
				for c in "${configs[@]}"; do
					read -r name flags <<<"$c"
					[ -z "${CONFIGS:-}" ] || [[ " $CONFIGS " == *" $name "* ]] || continue
					echo "== $model P=$p $rate $name (turn $turn)"
					f=$d/$name.json
					if [ "$turn" -gt 1 ]; then # beside the directory, so its charts show one line a configuration
						mkdir -p "$out/turns/${d##*/}" && f=$out/turns/${d##*/}/$name-$turn.json
					fi
					# shellcheck disable=SC2086 # the configuration carries its flags
					"$emu" with --rate "$rate" --name sancus-bench -- $mpirun -np "$p" \
						"$bin" train --data "$tmp/g" --epochs "$epochs" --lr "$lr" --eval-every 5 "${mflags[@]}" $flags \
						--quiet --out "$f" >/dev/null ||
						echo "link-bench: $model P=$p $rate $name exited $? (its JSON says how it ended)" >&2
				done
			done
		done
	done
done
python3 - "$out" <<'EOF' | tee "$out/summary.tsv"
import glob, json, os, re, sys
out = sys.argv[1]
print("\t".join(["model_P_rate", "config", "ms_per_epoch", "compute_ms", "exposed_comm_ms", "mb_per_rank_per_epoch",
                 "test_acc", "time_to_target_s", "vs_sparse_fp32", "vs_cagnet", "turns", "time_to_target_range_s"]))
for d in sorted(glob.glob(os.path.join(out, "*-P*-*"))):
    turns = {}  # configuration: its runs (TURNS)
    for f in glob.glob(os.path.join(d, "*.json")):
        turns[os.path.basename(f)[:-5]] = [json.load(open(f))["result"]]
    for f in sorted(glob.glob(os.path.join(out, "turns", os.path.basename(d), "*.json"))):
        m = re.fullmatch(r"(.+)-[0-9]+\.json", os.path.basename(f))  # NAME-TURN.json
        if m and m.group(1) in turns:
            turns[m.group(1)].append(json.load(open(f))["result"])
    if "sparse-fp32" not in turns:
        continue
    target = 0.99 * turns["sparse-fp32"][0]["best_val_acc"]
    def tta(r):
        t = 0.0
        for e in r["curve"]:
            t += e["ms"] / 1000
            if e.get("evaluated") and e["val_acc"] >= target:
                return t
        return float("nan")
    # Each configuration by its median turn (the lower of two middles).
    runs = {name: sorted(rs, key=tta)[(len(rs) - 1) // 2] for name, rs in turns.items()}
    ref = tta(runs["sparse-fp32"])
    cag = tta(runs["cagnet-1d"]) if "cagnet-1d" in runs else float("nan")  # not run: "nan"
    for name, r in sorted(runs.items(), key=lambda kv: tta(kv[1])):
        n = len(r["curve"])
        ranks = r["per_rank"]
        comp = sum(x["compute_s"] for x in ranks) / len(ranks) / n * 1000
        wait = sum(x["comm_wait_s"] for x in ranks) / len(ranks) / n * 1000
        mb = sum(x["bytes_sent"] for x in ranks) / len(ranks) / n / 1e6
        t = tta(r)
        ts = [tta(x) for x in turns[name]]
        print("%s\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.4f\t%.2f\t%.2f\t%.2f\t%d\t%.2f-%.2f" % (os.path.basename(d), name, r["mean_epoch_ms"], comp, wait, mb,
              r["test_acc_at_best_val"], t, ref / t if t == t else float("nan"), cag / t if t == t else float("nan"),
              len(ts), min(ts), max(ts)))
EOF
# Charts per model, P and rate: accuracy against training time, time to
# accuracy, compute against exposed communication (sancus report).
for d in "$out"/*-P*-*/; do
	"$bin" report --out "$d/charts" "$d" >/dev/null || echo "link-bench: no charts for $d" >&2
done
