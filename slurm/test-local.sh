#!/usr/bin/env bash
# End-to-end test against a real (local, single-node) Slurm:
#   1. sbatch slurm/train.sbatch with 4 tasks on Cora; check its results JSON;
#   2. a walltime warning: SIGUSR1 to the batch script, whose job
#      checkpoints, exits 85, is requeued and resumes; then a scancel,
#      which checkpoints and ends CANCELLED, not requeued again; its
#      checkpoint resumes bit-identical to an uninterrupted run;
#   3. sbatch slurm/strong-scaling.sbatch P = 1, 2, 4 on a small generated
#      graph; check the CSV and the PNGs;
#   4. one injected fault (slurm/chaos-slurm.sh; make chaos runs more).
# Needs root (or sudo) the first time, to install Slurm and munge.
set -euo pipefail
cd "$(dirname "$0")/.."
export SANCUS_SLURM_DIR=${SANCUS_SLURM_DIR:-$(mktemp -d /tmp/sancus-slurm-XXXX)}
cluster=slurm/local-cluster.sh
command -v python3 >/dev/null || { apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3; }
trap '$cluster stop' EXIT
eval "$($cluster start)"
cora=${CORA:-testdata/cora}
bin/sancus --help >/dev/null 2>&1 || { echo "build bin/sancus first (make build)"; exit 1; }
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { # file python-expression
	python3 - "$1" "$2" <<'PY' || fail "$1: $2"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["result"]
ok = eval(sys.argv[2])
sys.exit(0 if ok else 1)
PY
}

# started JOB LOG LINE [SECONDS] waits (180 s by default, far past a loaded
# machine's need) until the job's ranks train: rank 0 says where it starts
# ("starting from epoch", or "resumed from" after a requeue) only after
# every rank has joined MPI, and so listens for the stop signals. (A
# signal sent while the job runs but its tasks still start is lost.)
# gone JOB SECONDS waits until it left the queue.
started() {
	for _ in $(seq $((${4:-180} * 2))); do
		grep -q "$3" "$2" 2>/dev/null && return 0
		sleep 0.5
	done
	fail "job $1 did not start training ('$3'): $(tail -5 "$2" 2>&1)"
}
gone() {
	for _ in $(seq $(($2 * 2))); do
		[ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0
		sleep 0.5
	done
	return 1
}

echo "== 1. sbatch slurm/train.sbatch, 4 tasks, Cora"
job=$(DATA=$cora EPOCHS=60 NAME=ci-train sbatch --parsable --wait --ntasks=4 slurm/train.sbatch) || fail "train job failed: $(cat results/ci-train/*/slurm-*.out 2>/dev/null | tail -20)"
res=results/ci-train/$job/result.json
[ -f "$res" ] || fail "no $res"
[ -s "results/ci-train/$job/slurm-$job.out" ] && [ ! -e "results/slurm-sancus-train-$job.out" ] ||
	fail "the job's log is not beside its results: $(ls results/ci-train/$job results/slurm-*.out 2>&1)"
check "$res" 'r["ranks"] == 4 and d["launcher"] == "pmix" and d["job_id"] == "'"$job"'" and len(r["curve"]) == 60 and r["test_acc_at_best_val"] > 0.7'
echo "ok: $res"

echo "== 2. the walltime warning (SIGUSR1 to the batch script): checkpoint, exit 85, requeue, resume; then a scancel"
# The job trains until it is stopped, so each signal lands mid-run on a
# machine of any speed: the walltime warning requeues it, and a scancel
# then ends it CANCELLED, not requeued, with its checkpoint kept.
job=$(DATA=$cora EPOCHS=1000000000 CHECKPOINT_EVERY=0 NAME=ci-requeue TRAIN_ARGS="--eval-every 50" sbatch --parsable --ntasks=2 slurm/train.sbatch)
out=results/ci-requeue/$job/slurm-$job.out # one log for both starts
started "$job" "$out" "starting from epoch"
scancel --batch --signal=USR1 "$job" # what --signal=B:USR1@600 sends before the walltime
started "$job" "$out" "resumed from" 360 # Slurm holds a requeued job 2 minutes before it starts again
grep -q "requeueing job $job" "$out" || fail "job was not requeued: $(tail -20 "$out")"
grep -q "restart 1" "$out" || fail "job did not restart: $(tail -20 "$out")"
scancel "$job"
gone "$job" 120 || fail "cancelled job $job is still queued: $(squeue -j "$job")"
state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z]*')
restarts=$(scontrol show job "$job" | grep -o 'Restarts=[0-9]*')
[ "$state" = JobState=CANCELLED ] && [ "$restarts" = Restarts=1 ] || fail "job $job after requeue and scancel: $state $restarts"
[ "$(grep -c "requeueing job" "$out")" = 1 ] || fail "cancelled job $job was requeued: $(tail -20 "$out")"
ck=results/ci-requeue/$job/checkpoints
latest=$(cat "$ck/LATEST") || fail "cancelled job $job left no checkpoint: $(tail -20 "$out")"
echo "ok: job $job requeued once, then $state with its checkpoint after epoch $latest"
# Its checkpoint, resumed 5 epochs further, ends where an uninterrupted
# run of the same training ends (two in-process ranks train as two MPI
# ranks do), to the bit.
ref=$(mktemp -d)
srun --mpi=pmix -n 2 bin/sancus train --data "$cora" --epochs $((latest + 5)) --eval-every 50 --quiet --resume \
	--checkpoint-dir "$ck" --save-weights "$ref/resumed.w" --out "$ref/resumed.json" >/dev/null || fail "resuming job $job's checkpoint failed"
bin/sancus train --data "$cora" --epochs $((latest + 5)) --ranks 2 --eval-every 50 --quiet --save-weights "$ref/ref.w" --out "$ref/r.json" >/dev/null
cmp -s "$ref/resumed.w" "$ref/ref.w" || fail "job $job's checkpoint resumed to epoch $((latest + 5)): weights differ from an uninterrupted run"
rm -rf "$ref"
echo "ok: its checkpoint resumed to epoch $((latest + 5)), weights bit-identical to an uninterrupted run"

echo "== 3. strong scaling P = 1, 2, 4 on a generated graph"
data=$(mktemp -d)/g
bin/sancus gen --out "$data" --nodes 20000 --edges 200000 --features 64 --classes 8 >/dev/null
job=$(DATA=$data PS="1 2 4" EPOCHS=30 NAME=ci-strong sbatch --parsable --wait --ntasks=4 slurm/strong-scaling.sbatch) || fail "scaling job failed"
dir=results/ci-strong/$job
[ "$(wc -l <"$dir/summary.csv")" -eq 4 ] || fail "$dir/summary.csv: $(cat "$dir/summary.csv")"
for png in scaling.png compute_vs_comm.png accuracy.png; do
	[ -s "$dir/$png" ] || fail "no $dir/$png"
done
[ -s "$dir/slurm-$job.out" ] || fail "no $dir/slurm-$job.out"
echo "ok: $dir/summary.csv and plots"
echo "== 4. fault injection: SIGKILL to a random task of a running step, resume bit-identical"
bash slurm/chaos-slurm.sh 1 /dev/null

rm -rf "$(dirname "$data")" results/ci-train results/ci-requeue results/ci-strong results/slurm-sancus-*.out
echo "slurm tests passed"
