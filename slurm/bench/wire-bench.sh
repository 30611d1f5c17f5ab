#!/usr/bin/env bash
# Bytes on the wire at equal accuracy: every wire width, with and without
# staleness and deltas, against float32 with no staleness, under mpirun.
#   usage: slurm/bench/wire-bench.sh DATA OUTDIR "MPIRUN [flags]" "P..." [EPOCHS] [PARTITIONER] [LR]
# PARTITIONER (contiguous, grem, metis) orders the rows before sharding;
# the float32 dense broadcast of contiguous rows (SANCUS as published) is
# always measured too. Writes OUTDIR/wire.tsv: MB sent per rank per epoch
# (training traffic: blocks, flags and the weight-gradient allreduce), test
# accuracy at the best validation epoch, ms per epoch.
. "$(dirname "$0")/common.sh" || exit
data=$1 out=$2 mpirun=${3:-$mpirun} ps=$4 epochs=${5:-200} part=${6:-contiguous} lr=${7:-0.01}
name=$(basename "$data")
mkdir -p "$out"
for np in $ps; do
	"$bin" prepare --data "$data" --parts "$np" --out "$tmp/contiguous-$np" >/dev/null
	case $part in
	grem) "$bin" prepare --data "$data" --parts "$np" --partitioner grem --out "$tmp/$part-$np" >/dev/null ;;
	metis)
		"$bin" prepare --data "$data" --parts "$np" --partitioner file --parts-file "$(metis_parts "$data" "$np")" --out "$tmp/$part-$np" >/dev/null
		;;
	esac
	run() { # label shards flags...
		local label=$1 shards=$2
		shift 2
		$mpirun -np "$np" "$bin" train --shards "$shards" --epochs "$epochs" --lr "$lr" --quiet --eval-every 5 \
			--out "$out/$name-P$np-$label.json" "$@" </dev/null >/dev/null
	}
	s=$tmp/$part-$np
	run dense-fp32-none "$tmp/contiguous-$np" --dense-bcast
	run fp32-none "$s"
	run bf16 "$s" --wire bf16
	run int8 "$s" --wire int8
	run int4 "$s" --wire int4
	run int2 "$s" --wire int2
	run int4-int2grad "$s" --wire int4 --wire-grad int2
	run int2-H0.03 "$s" --wire int2 --staleness variation-gap --eps 0.03
	run int4-delta-H0.03 "$s" --wire int4 --wire-delta --staleness variation-gap --eps 0.03
	run auto0.1 "$s" --wire auto --wire-error 0.1
	run int2-bf16allreduce "$s" --wire int2 --wire-allreduce bf16
	run int4-E1-bf16allreduce "$s" --wire int4 --staleness epoch-fixed --eps 1 --wire-allreduce bf16
done
python3 - "$out" "$name" <<'PY'
import json, glob, os, sys
out, name = sys.argv[1], sys.argv[2]
rows = []
for p in sorted(glob.glob(os.path.join(out, name + "-P*.json"))):
    d = json.load(open(p))
    r = d["result"]
    label = os.path.basename(p)[len(name) + 1:-5]
    P = r["ranks"]
    mb = sum(x["bytes_sent"] for x in r["per_rank"]) / P / len(r["curve"]) / 1e6
    rows.append((P, label, mb, r["test_acc_at_best_val"], r["mean_epoch_ms"], r.get("wire_bits") or {}))
with open(os.path.join(out, "wire.tsv"), "w") as f:
    f.write("P\tconfig\tMB_per_rank_per_epoch\tvs_fp32_none\ttest_acc\tacc_vs_fp32_pt\tms_per_epoch\twire_bits\n")
    for P, label, mb, acc, ms, bits in rows:
        base = next(x for x in rows if x[0] == P and x[1].startswith("P%d-fp32-none" % P) or (x[0] == P and x[1] == "P%d-fp32-none" % P))
        f.write("%d\t%s\t%.3f\t%.1fx\t%.4f\t%+.2f\t%.1f\t%s\n" % (P, label, mb, base[2] / mb, acc, 100 * (acc - base[3]), ms,
                ",".join("%s=%g" % kv for kv in sorted(bits.items()))))
print(open(os.path.join(out, "wire.tsv")).read())
PY
