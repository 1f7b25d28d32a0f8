#!/usr/bin/env bash
# Issue 6, the whole measurement in one command on a GPU machine: build a
# papers100M-sized dataset in memory inside loaderd, then one epoch of
# GraphSAGE [15,10,5] batch 1024 through the real Python client, next to the
# loader's ceiling, the CPU-gather pipeline and the GPU-resident table, and the
# MPS / SM-cap variants; prints the table (docs/training.md reads it).
#
#   scripts/bench-train.sh [SCALE [SEED]]          # default 1 0
#   run(command: "scripts/bench-train.sh", carry: [".gpu"], kind: nvidia-h200)
#
# Build the daemon here first (the GPU machine has no Go):
#   go build -ldflags="-s -w" -o .gpu/bin/loaderd ./cmd/loaderd
#
# Phases, in priority order; one that would not fit the time left is skipped
# and says so (BUDGET_S, default 525 s, counts from the start, build included):
#   main    loaderd (default 16-SM gather cap, no MPS) with --table-socket:
#           pcie, loader only, training only (batches pre-loaded on the
#           GPU), loaderd training, training only again, training only
#           over another epoch's batches each once (train_fresh: new
#           shapes, as loaderd's epoch has), resident (c), CPU gather (b);
#           trainers ask for SLOTS slots (default 6: GPU fills sweep up to 3
#           batches); MAIN_VARIANTS picks the runs, in order; NAME@K runs
#           NAME again (e.g. pcie,train_only,loaderd,train_only@2,loaderd@2:
#           the table pairs loaderd@2 with train_only@2 and prints the
#           training-only spread, for machines whose steps drift)
#   DAEMON_FLAGS are extra flags for every loaderd (e.g. "--prefetch 4")
#   DTYPE=float16 (or bfloat16) generates the features in that type: half the
#   table and the PCIe bytes (the model computes in float32)
#   every loaderd runs with --gpu-timing (its fills' GPU phases a batch are
#   in the table); NO_TIMING=1 leaves it off
#   FILL_TRACE=1: every loaderd writes a line per fill (--fill-trace) into
#   $OUT/NAME.fills and the trainer records its steps on the wall clock
#   (--step-trace); the table then says how long steps beside a fill took
#   against steps clear of one, per feed (train_mixed: loaderd's and
#   training only's)
#   cache   a new loaderd with --gpu-cache $CACHE (default 20% of the
#           feature bytes; CACHE= skips it): loader only and loaderd training,
#           PHASE_BATCHES batches each
#   slots2  (NO_SLOTS2=1 skips it) the same daemon, trainers with 2 slots (one batch a GPU pass):
#           loader only and loaderd training, PHASE_BATCHES batches each
#   MPS_ALL=1 runs every phase under one MPS control daemon (no mps phase)
#   mps     (NO_MPS=1 skips it) a new loaderd and the trainer under our own MPS control daemon:
#           loader only and loaderd training, PHASE_BATCHES batches each
#   allsms  a new loaderd with --gather-sms -1 (no cap): the same
# Every daemon build counts (a new daemon regenerates the dataset).
# Output in $OUT (default /tmp/bench-train): table.md, main.json, slots2.json,
# mps.json, allsms.json, meta.json, logs.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
SCALE=${1:-1}
SEED=${2:-0}
BUDGET_S=${BUDGET_S:-525}
PHASE_BATCHES=${PHASE_BATCHES:-300}
SLOTS=${SLOTS:-6}
MAIN_VARIANTS=${MAIN_VARIANTS:-pcie,loader,train_only,loaderd,train_only@2,train_fresh,resident,cpu}
read -r -a DAEMON_FLAGS <<< "${DAEMON_FLAGS:-}" # extra loaderd serve flags, e.g. "--prefetch 4"
OUT=${OUT:-/tmp/bench-train}
PY=${PYTHON:-python3}
LOADERD=${LOADERD:-}
if [ -z "$LOADERD" ]; then
	if [ -x .gpu/bin/loaderd ]; then LOADERD=$root/.gpu/bin/loaderd; else LOADERD=$root/bin/loaderd; fi
fi
mkdir -p "$OUT"
t_start=$(date +%s)
t_end=$((t_start + BUDGET_S))
work=$(mktemp -d /tmp/gnnloader-bt.XXXXXX)
logs=$OUT/logs.txt
: > "$logs"
spec=synthetic:papers100M:$SCALE:$SEED${DTYPE:+:$DTYPE}
# Set per phase only (EXTRA's cpus.train= / cpus.daemon=), never inherited.
unset DAEMON_CPUS TRAIN_CPUS
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
dpid=""
mps_dir=""

# exec_on_cpus LIST CMD...: replaces the shell with CMD, its CPU affinity set
# to LIST (taskset's syntax, e.g. 0-1 or 2,4-15; empty: unchanged). Call it
# in a subshell (a background job or a pipe's part), so that $! is CMD's pid.
exec_on_cpus() {
	local cpus=$1
	shift
	if [ -z "$cpus" ]; then
		exec "$@"
	elif command -v taskset > /dev/null; then
		exec taskset -c "$cpus" "$@"
	else
		exec $PY -c 'import os, sys
cpus = set()
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    cpus.update(range(int(a), int(b or a) + 1))
os.sched_setaffinity(0, cpus)
os.execvp(sys.argv[2], sys.argv[2:])' "$cpus" "$@"
	fi
}

log() { echo "[bench-train $(($(date +%s) - t_start))s] $*" | tee -a "$logs"; }
left() { echo $((t_end - $(date +%s))); }

cleanup() {
	stop_daemon
	stop_mps
	rm -rf "$work"
}
trap cleanup EXIT

# start_daemon NAME PORT FLAGS...: starts loaderd, waits for its socket,
# sets dpid and build_s (launch to listening: generation, pinning, start).
start_daemon() {
	local name=$1 port=$2
	shift 2
	rm -f "$work/$name.sock" "$work/$name.table"
	local t0
	t0=$(date +%s.%N)
	local table=(--table-socket "$work/$name.table")
	[ -n "${NOTABLE:-}" ] && table=()
	# The fills' GPU phases a batch in the table (NO_TIMING=1: off).
	local timing=(--gpu-timing)
	[ -n "${NO_TIMING:-}" ] && timing=()
	# FILL_TRACE=1: a line per fill into $OUT/NAME.fills, lined up in the
	# table with the steps of each run (the trainer's --step-trace).
	[ -n "${FILL_TRACE:-}" ] && timing+=(--fill-trace "$OUT/$name.fills")
	# Leading NAME=value arguments are the daemon's environment (e.g.
	# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 in an EXTRA phase).
	local envs=()
	while [ $# -gt 0 ] && [[ $1 =~ ^[A-Z_][A-Z0-9_]*= ]]; do
		envs+=("$1")
		shift
	done
	exec_on_cpus "${DAEMON_CPUS:-}" env "${envs[@]}" "${DAEMON_BIN:-$LOADERD}" serve --dataset "$spec" --socket "$work/$name.sock" "${table[@]}" \
		--metrics-addr "127.0.0.1:$port" --memory-budget 64GiB "${timing[@]}" "${DAEMON_FLAGS[@]}" "$@" > "$work/$name.log" 2>&1 &
	dpid=$!
	while [ ! -S "$work/$name.sock" ] || { [ -z "${NOTABLE:-}" ] && [ ! -S "$work/$name.table" ]; }; do
		if ! kill -0 "$dpid" 2> /dev/null; then
			log "loaderd ($name) exited before listening:"
			tail -20 "$work/$name.log" | tee -a "$logs"
			dpid=""
			return 1
		fi
		if [ "$(left)" -le 0 ]; then
			log "loaderd ($name) not listening before the time limit"
			return 1
		fi
		sleep 0.2
	done
	build_s=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
	log "loaderd ($name) listening after ${build_s} s (pid $dpid)"
	grep -E "dataset ready|feature table pinned|GPU ready" "$work/$name.log" | tee -a "$logs"
}

stop_daemon() {
	if [ -n "$dpid" ]; then
		kill -TERM "$dpid" 2> /dev/null
		wait "$dpid" 2> /dev/null
		dpid=""
	fi
}

stop_mps() {
	if [ -n "$mps_dir" ]; then
		echo quit | CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe nvidia-cuda-mps-control > /dev/null 2>&1
		sleep 1
		cat "$mps_dir"/log/*.log >> "$logs" 2> /dev/null
		rm -rf "$mps_dir"
		mps_dir=""
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	fi
}

# start_mps: our own MPS control daemon; every CUDA process started after it
# (daemons and trainers) is its client, so their kernels share the SMs at
# once instead of taking turns in time slices.
start_mps() {
	mps_dir=$(mktemp -d /tmp/gnnloader-mps.XXXXXX)
	mkdir -p "$mps_dir/pipe" "$mps_dir/log"
	export CUDA_MPS_PIPE_DIRECTORY=$mps_dir/pipe CUDA_MPS_LOG_DIRECTORY=$mps_dir/log
	if nvidia-cuda-mps-control -d; then
		log "MPS control daemon started"
		return 0
	fi
	log "MPS control daemon did not start"
	rm -rf "$mps_dir"
	mps_dir=""
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
	return 1
}

# bench NAME PORT ARGS...: the Python trainer against daemon NAME (results
# in $OUT/NAME.json, or $OUT/$JSON_AS.json).
bench() {
	local name=$1 port=$2
	shift 2
	local table=(--table-socket "$work/$name.table")
	[ -n "${NOTABLE:-}" ] && table=()
	# TRAIN_ENV: NAME=value words for the trainer's environment (EXTRA's train.NAME=value).
	local tenv=()
	read -r -a tenv <<< "${TRAIN_ENV:-}"
	local trace=()
	[ -n "${FILL_TRACE:-}" ] && trace=(--step-trace)
	exec_on_cpus "${TRAIN_CPUS:-}" env "${tenv[@]}" $PY examples/bench_train.py --socket "$work/$name.sock" "${table[@]}" \
		--metrics-url "http://127.0.0.1:$port/metrics" --daemon-pid "$dpid" --json-out "$OUT/${JSON_AS:-$name}.json" \
		--hard-end "$((t_end - 10))" "${trace[@]}" "$@" 2>&1 | sed -u 's/^\(.\{2000\}\).*/\1/' | tee -a "$logs"
}

{
	echo "command: scripts/bench-train.sh $SCALE $SEED (BUDGET_S=$BUDGET_S PHASE_BATCHES=$PHASE_BATCHES SLOTS=$SLOTS MAIN_VARIANTS=$MAIN_VARIANTS DAEMON_FLAGS=${DAEMON_FLAGS[*]:-} MPS_ALL=${MPS_ALL:-} EXTRA=${EXTRA:-} PRIO=${PRIO:-} DTYPE=${DTYPE:-} GNNLOADER_RECEIVE_THREAD=${GNNLOADER_RECEIVE_THREAD:-})"
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM"
	# Which CPUs share a core (for cpus.train= / cpus.daemon=).
	lscpu -p=CPU,CORE,SOCKET,NODE 2> /dev/null | grep -v '^#' | tr '\n' ' ' | sed 's/^/cpus (cpu,core,socket,node): /; s/$/\n/' 
	nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader 2> /dev/null
	echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2> /dev/null); shmem THP: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2> /dev/null)"
	$PY -c 'import torch; print("torch", torch.__version__)' 2> /dev/null
} | tee -a "$logs"

# MPS_ALL=1: every phase under one MPS control daemon (the mps phase is then
# the main one).
if [ -n "${MPS_ALL:-}" ]; then
	start_mps || log "MPS_ALL: running without MPS"
fi

# --- main phase -------------------------------------------------------------
main_build=""
if start_daemon main 9471; then
	main_build=$build_s
	pinned=$(grep -o 'msg="feature table pinned" bytes=[0-9]*' "$work/main.log" | grep -o '[0-9]*$')
	bench main 9471 --variants "$MAIN_VARIANTS" --slots "$SLOTS"
	if [ -n "$mps_dir" ]; then
		echo get_server_list | nvidia-cuda-mps-control 2>&1 | sed 's/^/MPS servers: /' | tee -a "$logs"
	fi
	hwm=$(awk '/VmHWM/ {print $2 * 1024}' "/proc/$dpid/status" 2> /dev/null)
	if [ -z "${NO_SLOTS2:-}" ] && [ "$(left)" -gt 60 ]; then
		JSON_AS=slots2 bench main 9471 --label slots2 --slots 2 --variants loader,loaderd --max-batches "$PHASE_BATCHES" --no-eval
	else
		log "slots2 phase skipped: $(left) s left"
	fi
	stop_daemon
	cat "$work/main.log" >> "$logs"
else
	cat "$work/main.log" >> "$logs" 2> /dev/null
	# Without a shareable table (e.g. the driver refusing to register the
	# memfd) the headline still runs: loader only and loaderd training.
	log "main daemon failed: again without --table-socket (no (b), (c))"
	if NOTABLE=1 start_daemon main 9471; then
		main_build=$build_s
		NOTABLE=1
		pinned=$(grep -o 'msg="feature table pinned" bytes=[0-9]*' "$work/main.log" | grep -o '[0-9]*$')
		bench main 9471 --variants pcie,loader,loaderd --slots "$SLOTS"
		hwm=$(awk '/VmHWM/ {print $2 * 1024}' "/proc/$dpid/status" 2> /dev/null)
		stop_daemon
		cat "$work/main.log" >> "$logs"
	fi
fi
printf '{"meta": {"build_s": %s, "pinned_bytes": %s, "daemon_hwm": %s, "spec": "%s", "cache": "%s"}}\n' \
	"${main_build:-null}" "${pinned:-null}" "${hwm:-null}" "$spec" "${CACHE-20%}" > "$OUT/meta.json"

# --- cache: a new loaderd with --gpu-cache CACHE (default 20%) ---------------
need=$(awk -v b="${main_build:-60}" 'BEGIN {printf "%d", b + 60}')
if [ -n "${CACHE-20%}" ] && [ "$(left)" -gt "$need" ]; then
	if start_daemon cache 9474 --gpu-cache "${CACHE-20%}"; then
		grep -E "GPU cache" "$work/cache.log" | tee -a "$logs"
		bench cache 9474 --label cache --variants loader,loaderd --max-batches "$PHASE_BATCHES" --no-eval --slots "$SLOTS"
		stop_daemon
		cat "$work/cache.log" >> "$logs"
	fi
else
	log "cache phase skipped: $(left) s left, a daemon build and the runs need about $need s"
fi

# --- extra daemons: EXTRA="label:flags;label:flags" (e.g.
# "cpusample:--sampling cpu;sms8:--gather-sms 8"), each a new loaderd with
# those flags (leading NAME=value words set its environment): loader only and
# loaderd training, PHASE_BATCHES batches each. Leading words (first these,
# in any order, then the daemon's NAME=value words; no value holds a space): slots=N makes
# that phase's trainer ask for N slots instead of SLOTS (e.g. "s16:slots=16"),
# variants=LIST runs those variants instead of loader,loaderd, and
# train.NAME=value sets the trainer's environment (e.g.
# "part:train.CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=88 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=12"),
# procs=N runs the variants in N trainer processes one after another
# (labels LAB, LAB-p2, ..., LAB-pN) against that one daemon, each after the
# first while a minute of the budget is left,
# loaderd=PATH runs that loaderd build (an absolute path to an executable)
# instead of LOADERD (two builds side by side in one run),
# cpus.train=LIST and cpus.daemon=LIST run the trainer or that loaderd on
# those CPUs only (taskset's list syntax, e.g. "pin:cpus.train=0-1
# cpus.daemon=2-15"; the header's cpus line says which CPUs share a core).
# PRIO=1 adds a run of the main daemon's flags with training on a
# high-priority CUDA stream (label prio).
if [ -n "${PRIO:-}" ]; then EXTRA="prio:;${EXTRA:-}"; fi
IFS=';' read -r -a extras <<< "${EXTRA:-}"
port=9480
procs_json=()
for ex in "${extras[@]}"; do
	[ -z "$ex" ] && continue
	lab=${ex%%:*}
	read -r -a exflags <<< "${ex#*:}"
	exslots=$SLOTS exvariants=loader,loaderd excpus_train="" excpus_daemon="" exbin="" exprocs=1
	trainenv=()
	while [ ${#exflags[@]} -gt 0 ]; do
		if [[ ${exflags[0]} =~ ^slots=([0-9]+)$ ]]; then
			exslots=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^variants=([a-z_,@0-9]+)$ ]]; then
			exvariants=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^cpus\.train=([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$ ]]; then
			excpus_train=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^cpus\.daemon=([0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$ ]]; then
			excpus_daemon=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^loaderd=(/.+)$ ]] && [ -x "${BASH_REMATCH[1]}" ]; then
			exbin=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^procs=([1-9][0-9]?)$ ]]; then
			exprocs=${BASH_REMATCH[1]}
		elif [[ ${exflags[0]} =~ ^train\.([A-Z_][A-Z0-9_]*=.*)$ ]]; then
			trainenv+=("${BASH_REMATCH[1]}")
		else
			break
		fi
		exflags=("${exflags[@]:1}")
	done
	trainflags=()
	[ "$lab" = prio ] && trainflags=(--train-stream high)
	port=$((port + 1))
	if [ "$(left)" -gt "$need" ] && DAEMON_BIN=$exbin DAEMON_CPUS=$excpus_daemon start_daemon "$lab" "$port" "${exflags[@]}"; then
		TRAIN_CPUS=$excpus_train JSON_AS=$lab TRAIN_ENV="${trainenv[*]}" bench "$lab" "$port" --label "$lab" --variants "$exvariants" --max-batches "$PHASE_BATCHES" --no-eval --slots "$exslots" "${trainflags[@]}"
		# procs=N: the same variants again in trainer processes 2..N, one
		# after another, against the same daemon (labels LAB-p2, LAB-p3,
		# ...): a trainer's first run told apart from the daemon's first.
		for ((k = 2; k <= exprocs; k++)); do
			if [ "$(left)" -lt 60 ]; then
				log "$lab: trainer processes $k-$exprocs skipped: $(left) s left"
				break
			fi
			TRAIN_CPUS=$excpus_train JSON_AS=$lab-p$k TRAIN_ENV="${trainenv[*]}" bench "$lab" "$port" --label "$lab-p$k" --variants "$exvariants" --max-batches "$PHASE_BATCHES" --no-eval --slots "$exslots" "${trainflags[@]}"
			procs_json+=("$OUT/$lab-p$k.json")
		done
		stop_daemon
		cat "$work/$lab.log" >> "$logs"
	else
		log "$lab phase skipped: $(left) s left"
	fi
done

# --- (d): MPS, and the gather's SM cap off ------------------------------------
need=$(awk -v b="${main_build:-60}" 'BEGIN {printf "%d", b + 60}')
if [ -z "${NO_MPS:-}" ] && [ -z "${MPS_ALL:-}" ] && [ "$(left)" -gt "$need" ] && command -v nvidia-cuda-mps-control > /dev/null; then
	if start_mps; then
		if start_daemon mps 9472; then
			bench mps 9472 --label mps --variants loader,loaderd --max-batches "$PHASE_BATCHES" --no-eval --slots "$SLOTS"
			echo get_server_list | nvidia-cuda-mps-control 2>&1 | sed 's/^/MPS servers: /' | tee -a "$logs"
			stop_daemon
			cat "$work/mps.log" >> "$logs"
		fi
	fi
	stop_mps
else
	log "mps phase skipped: $(left) s left, a daemon build and the runs need about $need s"
fi
if [ -z "${NO_ALLSMS:-}" ] && [ "$(left)" -gt "$need" ]; then
	if start_daemon allsms 9473 --gather-sms -1; then
		bench allsms 9473 --label allsms --variants loader,loaderd --max-batches "$PHASE_BATCHES" --no-eval --slots "$SLOTS"
		stop_daemon
		cat "$work/allsms.log" >> "$logs"
	fi
else
	log "allsms phase skipped: $(left) s left, a daemon build and the runs need about $need s"
fi

log "done"
extra_json=()
for ex in "${extras[@]}"; do [ -n "$ex" ] && extra_json+=("$OUT/${ex%%:*}.json"); done
$PY examples/bench_train.py --render "$OUT/meta.json" "$OUT/main.json" "$OUT/cache.json" "${extra_json[@]}" "${procs_json[@]}" "$OUT/slots2.json" "$OUT/mps.json" "$OUT/allsms.json" 2>&1 |
	tee "$OUT/table.md"
