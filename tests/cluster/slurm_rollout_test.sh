#!/usr/bin/env bash
# A real single-node Slurm cluster (Debian's slurmctld, slurmd and munge, all
# on localhost, all under this user, all in a temporary directory) runs
# scripts/slurm/kforge-rollout.sbatch: two rollout workers (CPU backend,
# the built-in template policy) stream their trajectories over CurveZMQ to a
# `kforge receive` that admits only the job's worker key. Passes when the
# receiver holds every trajectory, from both workers, exactly once.
#
#   slurm_rollout_test.sh KFORGE SOURCE_DIR
#
# Cost: about 5 s to bring the cluster up, then the rollouts (2 workers x 1
# group x 2 episodes of 2 turns of one bundled task): 2 min 52 s on two
# shared, heavily loaded cores.
set -euo pipefail
KFORGE=$(readlink -f "$1")
SRC=$(readlink -f "$2")
WORKERS=2
GROUP_SIZE=2
EXPECTED=$((WORKERS * GROUP_SIZE))

fail() {
  echo "slurm_rollout_test: FAIL: $*" >&2
  exit 1
}
for tool in munged mungekey slurmctld slurmd sbatch sinfo scontrol; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin
  command -v "$tool" >/dev/null || fail "$tool not found: install Debian's slurm-wlm and munge (./run installs them)"
done

DIR=$(mktemp -d "${TMPDIR:-/tmp}/kforge-slurm-XXXXXX")
chmod 755 "$DIR"  # munged wants its socket's directory searchable
RECEIVER_PID=
cleanup() {
  local code=$?
  [ -n "$RECEIVER_PID" ] && kill "$RECEIVER_PID" 2>/dev/null
  for d in slurmd slurmctld munged; do
    [ -f "$DIR/$d.pid" ] && kill "$(cat "$DIR/$d.pid")" 2>/dev/null
  done
  if [ "$code" -ne 0 ]; then
    for log in "$DIR"/log/*.log "$DIR"/run/*.log "$DIR"/job-*.out "$DIR"/receiver.err; do
      [ -f "$log" ] && { echo "----- $log"; tail -n 40 "$log"; }
    done
  fi
  sleep 1
  rm -rf "$DIR"
  exit "$code"
}
trap cleanup EXIT
mkdir -p "$DIR"/{log,state,spool,keys,run}

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# munge: a key of our own and a socket in $DIR.
dd if=/dev/urandom of="$DIR/munge.key" bs=1024 count=1 status=none
chmod 400 "$DIR/munge.key"
munged --force -S "$DIR/munge.sock" --key-file="$DIR/munge.key" --log-file="$DIR/log/munged.log" \
  --pid-file="$DIR/munged.pid" --seed-file="$DIR/munged.seed"
for _ in $(seq 50); do [ -S "$DIR/munge.sock" ] && break; sleep 0.1; done
[ -S "$DIR/munge.sock" ] || fail "munged did not start"

HOST=$(hostname -s)
USER_NAME=$(id -un)
cat >"$DIR/slurm.conf" <<EOF
ClusterName=kforgetest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.sock
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=kforge Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$DIR/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  sinfo -h -o '%t' 2>/dev/null | grep -qx idle && break
  sleep 0.2
done
sinfo -h -o '%t' | grep -qx idle || fail "the node did not become idle: $(sinfo 2>&1)"

# CurveZMQ: the trainer's pair, and the pair the job gives its workers.
"$KFORGE" keygen --out "$DIR/keys/trainer" >/dev/null
"$KFORGE" keygen --out "$DIR/keys/worker" >/dev/null

"$KFORGE" receive --bind tcp://127.0.0.1:0 --out "$DIR/received.jsonl" --count "$EXPECTED" \
  --curve-secret "$DIR/keys/trainer.key_secret" --curve-clients "$DIR/keys/worker.key" \
  >"$DIR/receiver.json" 2>"$DIR/receiver.err" &
RECEIVER_PID=$!
for _ in $(seq 100); do [ -s "$DIR/receiver.json" ] && break; sleep 0.1; done
ENDPOINT=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["endpoint"])' \
  "$DIR/receiver.json") || fail "the receiver did not start"

cat >"$DIR/rollout.yaml" <<EOF
env: cpu
tasks: $SRC/examples
task_ids: [example/affine_relu6]
order: sequential
groups: 1
group_size: $GROUP_SIZE
concurrency: $GROUP_SIZE
episode: {max_turns: 2}
policy:
  kind: template
  template: {mode: auto, explore_turns: 1, seed: 0}
EOF

export KFORGE_BIN=$KFORGE KFORGE_TRAINER=$ENDPOINT KFORGE_KEYS=$DIR/keys KFORGE_ROLLOUT_CONFIG=$DIR/rollout.yaml
export KFORGE_ENV=cpu KFORGE_WORKERS_PER_NODE=$WORKERS KFORGE_RUN_DIR=$DIR/run
# The template asks for 8-GPU nodes; this cluster has one node, no GPUs.
# The key exchange must not go through the shared filesystem: the workers
# read the copies sbcast made.
timeout 600 sbatch --wait --job-name=kftest --nodes=1 --gpus-per-node=0 --ntasks-per-node=$WORKERS \
  --cpus-per-task=1 --output="$DIR/job-%j.out" --chdir="$DIR" "$SRC/scripts/slurm/kforge-rollout.sbatch" \
  >"$DIR/sbatch.out" || fail "the job failed: $(cat "$DIR/sbatch.out")"

# The receiver exits once it holds EXPECTED trajectories.
for _ in $(seq 300); do kill -0 "$RECEIVER_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$RECEIVER_PID" 2>/dev/null && fail "the receiver is still waiting: $(wc -l <"$DIR/received.jsonl") of $EXPECTED"
RECEIVER_PID=
/usr/bin/python3 - "$DIR" "$EXPECTED" <<'EOF'
import json, pathlib, sys
d, expected = pathlib.Path(sys.argv[1]), int(sys.argv[2])
rows = [json.loads(l) for l in (d / "received.jsonl").read_text().splitlines() if l.strip()]
assert len(rows) == expected, f"{len(rows)} trajectories received, expected {expected}"
ids = [r.get("id") or r.get("trajectory_id") for r in rows]
assert len(set(map(str, ids))) == len(rows), f"a trajectory arrived twice: {ids}"
written = sum(len((d / "run" / f"trajectories-{i}.jsonl").read_text().splitlines()) for i in range(2))
assert written == expected, f"the workers wrote {written} trajectories, expected {expected}"
for i in range(2):
    spool = d / "run" / "spool" / f"worker-{i}"
    assert spool.is_dir(), f"worker {i} (SLURM_PROCID {i}) did not stream: no {spool}"
# Each rank rolls out with its own seed (the template passes --seed from the
# rank), so the two ranks' episodes have disjoint seeds.
seeds = [set() for _ in range(2)]
for i in range(2):
    for line in (d / "run" / f"trajectories-{i}.jsonl").read_text().splitlines():
        seeds[i].add(json.loads(line)["info"]["seed"])
assert seeds[0] and seeds[1] and not (seeds[0] & seeds[1]), f"ranks share episode seeds: {seeds}"
print(f"slurm_rollout_test: {len(rows)} trajectories from 2 Slurm tasks received over CurveZMQ")
EOF
