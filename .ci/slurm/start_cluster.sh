#!/usr/bin/env bash
# Start a one-node SLURM "cluster" on localhost (munged + slurmctld + slurmd), without systemd, with
# NGPU fake GPUs declared as GRES. Tested on Debian 12 (Slurm 22.05) as root; see ../shared/slurm.md.
#
#   apt-get install -y --no-install-recommends slurm-wlm munge
#   bash .ci/slurm/start_cluster.sh          # prints "started" or "reused" on its last line
#   ...                                      # sbatch / snakemake --profile profiles/slurm
#   bash .ci/slurm/stop_cluster.sh           # stops, by PID, only what this script started
#
# Environment:
#   STATE=/tmp/slurm-ci/state  PID files and daemon output (stop_cluster.sh reads the same)
#   NGPU=4                     fake GPUs: char devices /dev/nvidia0..NGPU-1 (mknod c 195 i)
#   NSHARD=2                   GPU shards per GPU (gres/shard, Slurm >= 22.05): a job asking for
#                              --gres=shard:1 shares its GPU with NSHARD - 1 others; 0: no shards
#   GPU_FILES=/dev/tty[1-4]    existing char devices to use instead, where mknod is not allowed
#   SLURM_CI_FORCE=1           overwrite an /etc/slurm/slurm.conf this script did not write
#
# No accounting (AccountingStorageType=accounting_storage/none): `sacct` does not work, so job status
# must come from `squeue` (profiles/slurm sets slurm-status-command: squeue). MinJobAge=600 keeps
# finished jobs visible to squeue; the plugin needs MinJobAge >= 3 x slurm-init-seconds-before-status-checks
# or it silently falls back to sacct and then never sees the jobs end.
set -euo pipefail
STATE=${STATE:-/tmp/slurm-ci/state}
NGPU=${NGPU:-4}
NSHARD=${NSHARD:-2}
MARKER="# written by .ci/slurm/start_cluster.sh"
mkdir -p "$STATE"

for exe in munged slurmctld slurmd sinfo sbatch; do
  command -v "$exe" >/dev/null || [ -x "/usr/sbin/$exe" ] || {
    echo "start_cluster: $exe not found (apt-get install -y --no-install-recommends slurm-wlm munge)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "start_cluster: must run as root (daemons, /etc/slurm, mknod)" >&2; exit 2; }

# ---------- already running? then use it, start nothing ----------
if scontrol ping 2>/dev/null | grep -q 'is UP'; then
  sinfo
  echo "reused"
  exit 0
fi

# ---------- munge ----------
munge_ok() { [ -S /run/munge/munge.socket.2 ] && munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
if ! munge_ok; then
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
      || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  runuser -u munge -- /usr/sbin/munged --foreground >"$STATE/munged.out" 2>&1 &
  echo $! >"$STATE/munged.pid"   # runuser's pid; SIGTERM to it stops munged too
  for _ in $(seq 50); do munge_ok && break; sleep 0.1; done
  munge_ok || { echo "start_cluster: munged did not come up" >&2; cat "$STATE/munged.out" >&2; exit 1; }
fi

# ---------- fake GPU device files (gres.conf File= must name char/block devices) ----------
if [ -z "${GPU_FILES:-}" ]; then
  for i in $(seq 0 $((NGPU - 1))); do
    [ -e "/dev/nvidia$i" ] || mknod -m 666 "/dev/nvidia$i" c 195 "$i"
  done
  GPU_FILES="/dev/nvidia[0-$((NGPU - 1))]"
fi

# ---------- slurm.conf + gres.conf ----------
if [ -s /etc/slurm/slurm.conf ] && ! grep -qF "$MARKER" /etc/slurm/slurm.conf && [ "${SLURM_CI_FORCE:-0}" != 1 ]; then
  echo "start_cluster: /etc/slurm/slurm.conf was not written by this script; set SLURM_CI_FORCE=1 to replace it" >&2
  exit 2
fi
read -r CPUS SOCK CORES THREADS MEM < <(slurmd -C | head -1 | sed -E \
  's/.*CPUs=([0-9]+).*SocketsPerBoard=([0-9]+).*CoresPerSocket=([0-9]+).*ThreadsPerCore=([0-9]+).*RealMemory=([0-9]+).*/\1 \2 \3 \4 \5/')
MEM=$((MEM * 9 / 10))   # under-report, so the node never drains for "Low RealMemory"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat >/etc/slurm/slurm.conf <<CONF
$MARKER ($(date -u +%FT%TZ))
ClusterName=ci
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.daemonpid
SlurmdPidFile=$STATE/slurmd.daemonpid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# finished jobs stay visible to squeue for 10 min (the plugin needs >= 3 x init-seconds)
MinJobAge=600
# seconds between SIGTERM and SIGKILL at cancellation / time limit (the trainer saves its state)
KillWait=30
# jobs without --mem would otherwise get the whole node's memory
DefMemPerCPU=1024
MailProg=/bin/true
SchedulerParameters=sched_interval=2
MessageTimeout=30
GresTypes=gpu$( [ "$NSHARD" -gt 0 ] && echo ,shard)
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$CPUS SocketsPerBoard=$SOCK CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$MEM Gres=gpu:$NGPU$( [ "$NSHARD" -gt 0 ] && echo ",shard:$((NGPU * NSHARD))") State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
cat >/etc/slurm/gres.conf <<CONF
$MARKER
AutoDetect=off
NodeName=localhost Name=gpu File=$GPU_FILES
CONF
if [ "$NSHARD" -gt 0 ]; then
  echo "NodeName=localhost Name=shard Count=$((NGPU * NSHARD)) File=$GPU_FILES" >>/etc/slurm/gres.conf
fi

# ---------- daemons ----------
/usr/sbin/slurmctld -D -c >"$STATE/slurmctld.out" 2>&1 &   # -c: drop old state (e.g. a stale DRAIN)
echo $! >"$STATE/slurmctld.pid"
/usr/sbin/slurmd -D -N localhost >"$STATE/slurmd.out" 2>&1 &  # -N: node name independent of hostname
echo $! >"$STATE/slurmd.pid"
st=""
for _ in $(seq 120); do
  st=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
  [ "$st" = "idle" ] && break
  sleep 0.5
done
sinfo
if [ "$st" != "idle" ]; then
  echo "start_cluster: node not idle: '$st'" >&2
  tail -20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
  exit 1
fi
echo "started"
