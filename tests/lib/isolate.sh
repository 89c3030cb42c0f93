#!/usr/bin/env bash
# tests/lib/isolate.sh COMMAND [ARG...] - run COMMAND in a PID namespace of
# its own (its /proc shows only its processes) with a /dev/shm of its own, so
# that a suite that counts, sweeps or dumps every heapctl process it can see
# sees only its own (a daemon of the initial PID namespace still sees its
# processes): tests/run.sh runs such suites this way, in the pool.
# Everything in the namespace dies with COMMAND (or with this script:
# --kill-child), so a suite's time limit still ends all of it.
# tests/run.sh calls it only where it found that such namespaces can be
# made (as root); elsewhere unshare says why not.
set -u
exec unshare --pid --fork --kill-child --mount-proc bash -c '
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || { echo "isolate.sh: cannot mount a /dev/shm of its own" >&2; exit 125; }
exec "$@"' isolate "$@"
