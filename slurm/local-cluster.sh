#!/usr/bin/env bash
# A single-node Slurm cluster on localhost for tests and laptops, without
# systemd: munge, slurmctld and slurmd with config and state in one
# directory. The node advertises more CPUs than it has
# (SlurmdParameters=config_overrides), so `srun -n 4` runs on 2 cores.
#
#   slurm/local-cluster.sh install   apt-get the Debian packages (as root)
#   slurm/local-cluster.sh start     start it; prints the SLURM_CONF to export
#   slurm/local-cluster.sh stop      stop the daemons and remove the state
#
# It runs as root; each user (who ran sudo, else root) gets a cluster of
# their own, so two users of one login node never share or stop each
# other's: SANCUS_SLURM_DIR (default /tmp/sancus-slurm-USER), SANCUS_SLURM_PORT
# (default 6817 for root, above it by user id for others; slurmd takes the
# next) and SANCUS_SLURM_CPUS (default 8) adjust it.
set -euo pipefail
owner=${SUDO_USER:-$(id -un)}
dir=${SANCUS_SLURM_DIR:-/tmp/sancus-slurm-$owner}
port=6817
[ "$owner" = root ] || port=$((6817 + 2 * (1 + $(id -u "$owner") % 1000)))
port=${SANCUS_SLURM_PORT:-$port}
cpus=${SANCUS_SLURM_CPUS:-8}
conf=$dir/slurm.conf

install() {
	if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; then
		return
	fi
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge
}

start() {
	# slurmd runs as root; without it the daemons that did start are left
	# running and the caller's eval gets nothing: say so at once instead.
	if [ "$(id -u)" != 0 ]; then
		echo "$0 start: the local cluster's slurmd runs as root: start it as root" >&2
		exit 1
	fi
	install >&2 # stdout is eval'ed by the caller: apt's chatter goes to stderr
	stop_daemons
	mkdir -p "$dir"
	# A directory of another user's (made first, in /tmp) would hold our
	# munge key and state where they can read or replace them.
	if [ "$(stat -c %u "$dir")" != "$(id -u)" ]; then
		echo "$dir belongs to $(stat -c %U "$dir"), not $(id -un): set SANCUS_SLURM_DIR to a directory of your own" >&2
		exit 1
	fi
	mkdir -p "$dir"/{state,spool,log,run,tmp}
	chmod 700 "$dir"
	if [ ! -f "$dir/munge.key" ]; then
		head -c 1024 /dev/urandom >"$dir/munge.key"
		chmod 400 "$dir/munge.key"
	fi
	munged --force --key-file="$dir/munge.key" --socket="$dir/run/munge.sock" \
		--pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/run/munged.seed"
	local host user
	host=$(hostname -s)
	user=$(id -un)
	cat >"$conf" <<CONF
ClusterName=sancus-local
SlurmctldHost=$host(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/run/munge.sock
SlurmUser=$user
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
# Steps' scratch (PMIx's per-step directories too) inside the cluster's
# directory: a step killed hard leaves nothing that a later cluster's job
# of the same id would trip over.
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=$port
SlurmdPort=$((port + 1))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=pmix
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
KillWait=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
	slurmctld -f "$conf"
	slurmd -f "$conf"
	export SLURM_CONF=$conf
	for _ in $(seq 60); do
		if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
			echo "export SLURM_CONF=$conf"
			return
		fi
		scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
		sleep 0.5
	done
	echo "local Slurm did not come up; logs in $dir/log:" >&2
	tail -n 20 "$dir"/log/*.log >&2 || true
	if grep -qs "Address already in use" "$dir"/log/*.log; then
		echo "local-cluster: port $port or $((port + 1)) is taken (another local cluster?): stop it, or start with SANCUS_SLURM_PORT=$((port + 100))" >&2
	fi
	exit 1
}

stop_daemons() {
	for d in slurmd slurmctld munged; do
		local pid=$dir/run/$d.pid
		if [ -f "$pid" ]; then
			kill "$(cat "$pid")" 2>/dev/null || true
		fi
	done
	sleep 0.5
	rm -f "$dir"/run/*.pid
}

case ${1:-} in
install) install ;;
start) start ;;
stop)
	# Jobs first: one still running (a test's job that trains until it is
	# stopped, left by a failure) would outlive the daemons. What is left
	# of them after the daemons end is found by its SLURM_CONF.
	if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid" ]; then
		SLURM_CONF=$conf scancel --full --user="$(id -un)" 2>/dev/null || true
		for _ in $(seq 80); do
			[ -z "$(SLURM_CONF=$conf squeue -h 2>/dev/null)" ] && break
			sleep 0.5
		done
	fi
	stop_daemons
	# A job's tasks carry SLURM_JOB_ID beside the SLURM_CONF; the shell
	# that ran `eval "$(… start)"` and what it started carry SLURM_CONF
	# alone, and are left be.
	for e in $(grep -lzx "SLURM_CONF=$conf" /proc/[0-9]*/environ 2>/dev/null); do
		grep -qz '^SLURM_JOB_ID=' "$e" 2>/dev/null || continue
		pid=$(basename "$(dirname "$e")")
		[ "$pid" = $$ ] || kill -KILL "$pid" 2>/dev/null || true
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 install|start|stop" >&2
	exit 2
	;;
esac
