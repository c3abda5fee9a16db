#!/usr/bin/env bash
# Stop, by PID, the daemons that start_cluster.sh started (it records them in $STATE/*.pid).
# Never kills by name: a cluster this script did not start is left alone.
STATE=${STATE:-/tmp/slurm-ci/state}
status=0
for d in slurmd slurmctld munged; do
  f="$STATE/$d.pid"
  [ -f "$f" ] || continue
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      echo "killed $d ($pid) after 15 s"
    else
      echo "stopped $d ($pid)"
    fi
  fi
  rm -f "$f"
done
exit $status
