#!/usr/bin/env bash
# Fault injection under Slurm: SIGKILL, SIGSTOP, SIGTERM or SIGINT to a random task
# of an `srun --mpi=pmix -n 3` training step at a random epoch, FAULTS times
# (cycling through the four). Each time every task must exit within 60 s
# with the cause named, and the step resumed from its checkpoints must end
# with weights bit-identical to an uninterrupted run. Uses the running local
# cluster when SLURM_CONF is set, else starts one (slurm/local-cluster.sh).
#   usage: slurm/chaos-slurm.sh [FAULTS] [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
faults=${1:-6} log=${2:-/dev/stdout}
# A faulted step trains until it is stopped: never leave one running.
step="" own_cluster=""
cleanup() {
	[ -z "$step" ] || kill "$step" 2>/dev/null || true
	[ -z "$own_cluster" ] || slurm/local-cluster.sh stop
}
trap cleanup EXIT
if [ -z "${SLURM_CONF:-}" ]; then
	export SANCUS_SLURM_DIR=${SANCUS_SLURM_DIR:-$(mktemp -d /tmp/sancus-slurm-XXXX)}
	own_cluster=1
	eval "$(slurm/local-cluster.sh start)"
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d)
# Large enough that an epoch takes milliseconds.
bin/sancus gen --out "$work/g" --nodes 12000 --edges 100000 --features 64 --feature-nnz 8 --classes 8 >/dev/null
train=(bin/sancus train --data "$work/g" --hidden 64 --staleness variation-gap --checkpoint-every 7)
# reference TO makes (once) the uninterrupted run to epoch TO and prints
# its weights' path: 120, or past the checkpoint where a slow machine
# trained beyond 120 before the fault landed.
reference() {
	local w=$work/ref-$1.w
	[ -s "$w" ] || srun --mpi=pmix -n 3 "${train[@]}" --epochs "$1" --quiet --checkpoint-dir "$work/ck-ref-$1" --save-weights "$w" --out "$work/ref.json" >/dev/null ||
		fail "the uninterrupted run to epoch $1 failed"
	echo "$w"
}
reference 120 >/dev/null
: >"$work/chaos.log"
signals=(KILL STOP TERM INT)
for ((f = 0; f < faults; f++)); do
	sig=${signals[$((f % 4))]} victim=$((RANDOM % 3)) at=$((10 + RANDOM % 80))
	out=$work/run-$f.log
	# The faulted step trains until the fault ends it, so the fault lands
	# mid-run on a machine of any speed. Only it waits a mere 15 s for a
	# peer, so that a frozen task is seen within the 60 s allowed.
	SANCUS_CHAOS_RUN=$f srun --mpi=pmix -n 3 "${train[@]}" --epochs 1000000000 --comm-timeout 15s \
		--checkpoint-dir "$work/ck-$f" --save-weights "$work/w-$f" --out "$work/r-$f.json" >"$out" 2>&1 &
	step=$!
	# Each wait below is bounded (3 minutes), far past what a loaded
	# machine needs, so that a hang fails with the log instead of eating
	# CI's time.
	for ((i = 0; ; i++)); do
		grep -q "$(printf 'epoch %4d' "$at")" "$out" 2>/dev/null && break
		kill -0 "$step" 2>/dev/null || fail "fault $f: the step ended before epoch $at: $(tail -5 "$out")"
		[ "$i" -lt 3600 ] || { kill "$step"; fail "fault $f: no epoch $at in 3 minutes: $(tail -5 "$out")"; }
		sleep 0.05
	done
	pid=""
	for ((i = 0; i < 3600 && ${#pid} == 0; i++)); do # the task printed an epoch: it is there
		for e in $(grep -lzx "SANCUS_CHAOS_RUN=$f" /proc/[0-9]*/environ 2>/dev/null); do
			if grep -qzx "SLURM_PROCID=$victim" "$e" 2>/dev/null; then
				pid=$(basename "$(dirname "$e")")
			fi
		done
		[ -n "$pid" ] || sleep 0.05
	done
	[ -n "$pid" ] || { kill "$step"; fail "fault $f: no process for task $victim: $(tail -5 "$out")"; }
	start=$(date +%s.%N)
	kill -"$sig" "$pid" || fail "fault $f: task $victim (pid $pid) of a step that trains until stopped vanished: $(tail -5 "$out")"
	set +e
	wait "$step"
	rc=$?
	set -e
	step="" # waited for: the exit trap must not signal a recycled pid
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $sig in
	KILL) cause="task $victim" ;;
	STOP) cause="timed out" ;;
	TERM | INT) cause="checkpoint committed" ;;
	esac
	printf 'fault %2d: SIG%-4s to task %d (pid %s), seen at epoch %3d: the step ended after %5.1fs with status %d\n' $((f + 1)) "$sig" "$victim" "$pid" "$at" "$took" "$rc" >>"$work/chaos.log"
	# How long the step takes to end is the behaviour under test.
	awk -v t="$took" 'BEGIN { exit !(t < 60) }' || fail "fault $f: the step took ${took}s to end"
	[ "$rc" -ne 0 ] || fail "fault $f: the step exited 0"
	grep -q "$cause" "$out" || fail "fault $f: the output does not say '$cause': $(tail -20 "$out")"
	printf '          cause: %s\n' "$(grep -m1 "$cause" "$out")" >>"$work/chaos.log"
	latest=$(cat "$work/ck-$f/LATEST") || fail "fault $f: no checkpoint committed"
	end=$((latest + 1 > 120 ? latest + 1 : 120))
	srun --mpi=pmix -n 3 "${train[@]}" --epochs "$end" --quiet --resume --checkpoint-dir "$work/ck-$f" --save-weights "$work/w-$f" --out "$work/r-$f.json" >"$out.resume" 2>&1 ||
		fail "fault $f: resume failed: $(tail -20 "$out.resume")"
	printf '          %s\n' "$(grep -m1 resume "$out.resume")" >>"$work/chaos.log"
	ref=$(reference "$end")
	cmp -s "$work/w-$f" "$ref" || fail "fault $f: resumed to epoch $end, weights differ from the uninterrupted run"
	echo "          resumed to epoch $end: weights bit-identical to the uninterrupted run" >>"$work/chaos.log"
done
cat "$work/chaos.log" >"$log"
rm -rf "$work"
echo "slurm fault injection: $faults faults, every one recovered"
