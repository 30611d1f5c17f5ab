#!/usr/bin/env bash
# Every model's epoch next to plain PyTorch on one graph, and next to its
# memory-bound time: the 100k-node / 1M-edge planted graph with 128
# features and a 60/20/20 split (most rows train), in one process and at
# P = 2 under mpirun, each round taking turns with PyTorch
# (slurm/bench/torch_gnn.py --train-only, as many threads as cores) and the STREAM
# triad and GEMM peak. With --profile-kernels a run reports its training
# steps' compulsory bytes (step_mb); over the round's triad rate they are
# the epoch's memory-bound time. It also reports them and the products'
# flops by class: per class the larger of bytes over the triad and flops
# over the round's GEMM peak (the best of sancus's GEMM and OpenBLAS's, from
# SANCUS_OPENBLAS where built), summed, is the epoch's roofline time.
#   usage: slurm/bench/models-vs-torch.sh OUTDIR "MPIRUN [flags]" [ROUNDS] [EPOCHS] [TORCH_EPOCHS]
# Writes OUTDIR/runs/*.json, OUTDIR/rounds.tsv (one row per run),
# OUTDIR/summary.tsv (medians over the rounds) and OUTDIR/bound.txt (sancus
# bench triad's memory-bound and roofline arithmetic for the last round).
. "$(dirname "$0")/common.sh" || exit
out=$1 mpirun=${2:-$mpirun} rounds=${3:-3} epochs=${4:-12} tepochs=${5:-4}
peakbin=${SANCUS_OPENBLAS:-bin/sancus-openblas} # bench triad's GEMM peak, OpenBLAS's included
[ -x "$peakbin" ] || { echo "no $peakbin (make openblas): the GEMM peak is sancus's own" >&2; peakbin=$bin; }
data=${DATA:-data/planted-100k-t60}
[ -e "$data/test.txt" ] || "$bin" gen --out "$data" --nodes 100000 --edges 1000000 --features 128 --classes 16 \
	--train 0.6 --val 0.2 --seed 1 --quiet
py=$(torch_python)
[ -n "$py" ] || echo "no PyTorch (make torch installs Debian's): its column stays empty" >&2
mkdir -p "$out/runs"
for np in 1 2; do "$bin" prepare --data "$data" --parts "$np" --out "$tmp/P$np" --quiet >/dev/null; done
# name|sancus flags|torch_gnn.py flags
models=(
	"gcn-2x16|--model gcn --hidden 16|--model gcn --hidden 16"
	"sage-2x16|--model sage --hidden 16|--model sage --hidden 16"
	"gat-2x8x8|--model gat --heads 8 --hidden 8|--model gat --heads 8 --hidden 8"
	"sage-3x256|--model sage --hidden 256 --layers 3|--model sage --hidden 256 --layers 3"
)
# fields prints a run's ms per epoch, its rank 0's step bytes per epoch
# (MB) and its roofline ms per epoch at the round's triad and GEMM peak.
fields() {
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))["result"]
k, n, gbs, peak = r["per_rank"][0], len(r["curve"]), float(sys.argv[2]), float(sys.argv[3])
mb, gf = k.get("step_kernel_mb", {}), k.get("step_kernel_gflop", {})
roof = sum(max(mb[c] / n / gbs, gf.get(c, 0) / n / peak * 1e3) for c in mb)
print("%s\t%.2f\t%.2f" % (r["mean_epoch_ms"], k.get("step_mb", 0) / n, roof))' "$1" "$gbs" "$peak"
}
printf 'round\tmodel\trun\tms_per_epoch\tstep_mb_per_epoch\troofline_ms\n' >"$out/rounds.tsv"
for r in $(seq "$rounds"); do
	"$peakbin" bench triad >"$tmp/triad"
	gbs=$(sed -n 's/^triad \([0-9.]*\) GB\/s.*/\1/p' "$tmp/triad")
	peak=$(sed -n 's/^gemm peak \([0-9.]*\) GFLOP\/s.*/\1/p' "$tmp/triad")
	printf '%d\ttriad\tGB/s\t%s\t\t\n' "$r" "$gbs" >>"$out/rounds.tsv"
	printf '%d\tgemm-peak\tGFLOP/s\t%s\t\t\n' "$r" "$peak" >>"$out/rounds.tsv"
	for m in "${models[@]}"; do
		IFS='|' read -r name flags tflags <<<"$m"
		read -ra args <<<"--epochs $epochs --eval-every 0 --quiet --profile-kernels $flags"
		f=$out/runs/$name-P1-r$r.json
		"$bin" train --shards "$tmp/P1" "${args[@]}" --out "$f" </dev/null >/dev/null
		printf '%d\t%s\tsancus P=1\t%s\n' "$r" "$name" "$(fields "$f")" >>"$out/rounds.tsv"
		f=$out/runs/$name-P2-r$r.json
		$mpirun -np 2 "$bin" train --shards "$tmp/P2" "${args[@]}" --out "$f" </dev/null >/dev/null
		printf '%d\t%s\tsancus P=2\t%s\n' "$r" "$name" "$(fields "$f")" >>"$out/rounds.tsv"
		if [ -n "$py" ]; then
			read -ra targs <<<"$tflags"
			ms=$($py slurm/bench/torch_gnn.py "$data" "${targs[@]}" --seeds 1 --epochs "$tepochs" --train-only 2>/dev/null |
				sed -n 's/.*, \([0-9.]*\) ms\/epoch.*/\1/p')
			printf '%d\t%s\tpytorch\t%s\t\t\n' "$r" "$name" "$ms" >>"$out/rounds.tsv"
		fi
	done
done
python3 - "$out" <<'PY'
import csv, os, statistics as st, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "rounds.tsv")), delimiter="\t"))
med = lambda xs: st.median(xs) if xs else float("nan")
triad = med([float(r["ms_per_epoch"]) for r in rows if r["model"] == "triad"])
peak = med([float(r["ms_per_epoch"]) for r in rows if r["model"] == "gemm-peak"])
get = lambda m, run, k: [float(r[k]) for r in rows if r["model"] == m and r["run"] == run and r[k]]
# Paired: each round's epoch over that round's bound (its own triad) or
# roofline, the median of those ratios; the columns before set medians
# from different rounds against each other.
rtriad = {r["round"]: float(r["ms_per_epoch"]) for r in rows if r["model"] == "triad"}
def paired(m, over):
    return med([float(r["ms_per_epoch"]) / over(r) for r in rows if r["model"] == m and r["run"] == "sancus P=1" and r["step_mb_per_epoch"]])
with open(os.path.join(out, "summary.tsv"), "w") as f:
    f.write("model\tsancus_P1_ms\tsancus_P2_ms\tP2_over_P1\tpytorch_ms\tsancus_P1_of_pytorch\tstep_mb\tbound_ms\tP1_over_bound\troofline_ms\tP1_over_roofline\tP1_over_bound_paired\tP1_over_roofline_paired\n")
    for m in dict.fromkeys(r["model"] for r in rows if r["model"] not in ("triad", "gemm-peak")):
        p1, p2, pt = med(get(m, "sancus P=1", "ms_per_epoch")), med(get(m, "sancus P=2", "ms_per_epoch")), med(get(m, "pytorch", "ms_per_epoch"))
        mb = med(get(m, "sancus P=1", "step_mb_per_epoch"))
        bound = mb / triad  # MB / (GB/s) = ms
        roof = med(get(m, "sancus P=1", "roofline_ms"))  # each round's at that round's rates
        pb = paired(m, lambda r: float(r["step_mb_per_epoch"]) / rtriad[r["round"]])
        pr = paired(m, lambda r: float(r["roofline_ms"]))
        f.write("%s\t%.1f\t%.1f\t%.2f\t%.1f\t1/%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n" % (m, p1, p2, p2 / p1, pt, pt / p1, mb, bound, p1 / bound, roof, p1 / roof, pb, pr))
    f.write("# triad %.2f GB/s, GEMM peak %.1f GFLOP/s (medians of %d rounds)\n" % (triad, peak, len([r for r in rows if r["model"] == "triad"])))
print(open(os.path.join(out, "summary.tsv")).read())
PY
# The same arithmetic as sancus prints it, for the last round's one-process runs.
"$peakbin" bench triad "$out"/runs/*-P1-r"$rounds".json | tee "$out/bound.txt"
