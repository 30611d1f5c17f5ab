#!/usr/bin/env bash
# Fault injection under Slurm: SIGKILL, SIGSTOP, SIGTERM or SIGINT to a random task
# of an `srun --mpi=pmix -n 3` training step at a random epoch, FAULTS times
# (cycling through the four). Each time every task must exit within 30 s
# with the cause named, and the step resumed from its checkpoints must end
# with weights bit-identical to an uninterrupted run. Uses the running local
# cluster when SLURM_CONF is set, else starts one (slurm/local-cluster.sh).
#   usage: slurm/chaos-slurm.sh [FAULTS] [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
faults=${1:-6} log=${2:-/dev/stdout}
if [ -z "${SLURM_CONF:-}" ]; then
	export SANCUS_SLURM_DIR=${SANCUS_SLURM_DIR:-$(mktemp -d /tmp/sancus-slurm-XXXX)}
	trap 'slurm/local-cluster.sh stop' EXIT
	eval "$(slurm/local-cluster.sh start)"
fi
fail() { echo "FAIL: $*" >&2; exit 1; }
# finished reports whether fault run F's step ran to its end: its "done:"
# line or its results, waited for a moment after srun returns, whose last
# lines can reach the log after it.
finished() {
	for _ in $(seq 20); do
		grep -q "^done:" "$work/run-$1.log" 2>/dev/null || [ -s "$work/r-$1.json" ] && return 0
		sleep 0.1
	done
	return 1
}
work=$(mktemp -d)
# Large enough that an epoch takes milliseconds, so a fault lands mid-run.
bin/sancus gen --out "$work/g" --nodes 12000 --edges 100000 --features 64 --feature-nnz 8 --classes 8 >/dev/null
train=(bin/sancus train --data "$work/g" --epochs 120 --hidden 64 --staleness variation-gap --checkpoint-every 7 --comm-timeout 6s)
srun --mpi=pmix -n 3 "${train[@]}" --quiet --checkpoint-dir "$work/ck-ref" --save-weights "$work/ref.w" --out "$work/ref.json" >/dev/null
: >"$work/chaos.log"
signals=(KILL STOP TERM INT)
f=0 missed=0
while [ "$f" -lt "$faults" ]; do
	sig=${signals[$((f % 4))]} victim=$((RANDOM % 3)) at=$((10 + RANDOM % 80))
	out=$work/run-$f.log
	rm -f "$work/r-$f.json" # a missed attempt's
	SANCUS_CHAOS_RUN=$f srun --mpi=pmix -n 3 "${train[@]}" --checkpoint-dir "$work/ck-$f" --save-weights "$work/w-$f" --out "$work/r-$f.json" >"$out" 2>&1 &
	step=$!
	until grep -q "$(printf 'epoch %4d' "$at")" "$out" 2>/dev/null; do
		kill -0 "$step" 2>/dev/null || fail "fault $f: the step ended before epoch $at: $(tail -5 "$out")"
		sleep 0.05
	done
	pid=""
	for _ in $(seq 100); do # the task may still be starting on a busy node
		# One grep over every process's environment, then the few of this
		# run: a grep a process took longer than the epochs left.
		for e in $(grep -lzx "SANCUS_CHAOS_RUN=$f" /proc/[0-9]*/environ 2>/dev/null); do
			if grep -qzx "SLURM_PROCID=$victim" "$e" 2>/dev/null; then
				pid=$(basename "$(dirname "$e")")
			fi
		done
		[ -n "$pid" ] || ! kill -0 "$step" 2>/dev/null && break
		sleep 0.05
	done
	if [ -z "$pid" ]; then
		wait "$step" || true
		finished "$f" && [ "$missed" -lt 5 ] && { missed=$((missed + 1)); continue; }
		fail "fault $f: no process for task $victim: $(tail -5 "$out")"
	fi
	start=$(date +%s.%N)
	if ! kill -"$sig" "$pid" 2>/dev/null; then # the task ended meanwhile
		wait "$step" || true
		finished "$f" && [ "$missed" -lt 5 ] && { missed=$((missed + 1)); continue; }
		fail "fault $f: task $victim (pid $pid) vanished before the signal: $(tail -5 "$out")"
	fi
	set +e
	wait "$step"
	rc=$?
	set -e
	if [ "$rc" -eq 0 ] && finished "$f" && [ "$missed" -lt 5 ]; then
		missed=$((missed + 1)) # the step finished before the signal landed: again
		continue
	fi
	took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	case $sig in
	KILL) cause="task $victim" ;;
	STOP) cause="timed out" ;;
	TERM | INT) cause="checkpoint committed" ;;
	esac
	printf 'fault %2d: SIG%-4s to task %d (pid %s), seen at epoch %3d: the step ended after %5.1fs with status %d\n' $((f + 1)) "$sig" "$victim" "$pid" "$at" "$took" "$rc" >>"$work/chaos.log"
	awk -v t="$took" 'BEGIN { exit !(t < 30) }' || fail "fault $f: the step took ${took}s to end"
	[ "$rc" -ne 0 ] || fail "fault $f: the step exited 0"
	grep -q "$cause" "$out" || fail "fault $f: the output does not say '$cause': $(tail -20 "$out")"
	printf '          cause: %s\n' "$(grep -m1 "$cause" "$out")" >>"$work/chaos.log"
	srun --mpi=pmix -n 3 "${train[@]}" --quiet --resume --checkpoint-dir "$work/ck-$f" --save-weights "$work/w-$f" --out "$work/r-$f.json" >"$out.resume" 2>&1 ||
		fail "fault $f: resume failed: $(tail -20 "$out.resume")"
	printf '          %s\n' "$(grep -m1 resume "$out.resume")" >>"$work/chaos.log"
	cmp -s "$work/w-$f" "$work/ref.w" || fail "fault $f: resumed weights differ from the uninterrupted run"
	echo "          resumed to epoch 120: weights bit-identical to the uninterrupted run" >>"$work/chaos.log"
	f=$((f + 1))
done
cat "$work/chaos.log" >"$log"
rm -rf "$work"
echo "slurm fault injection: $faults faults, every one recovered"
