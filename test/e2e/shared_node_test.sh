#!/usr/bin/env bash
# The checkpoint's copy in memory on a node that users share (docs/failures.md, "The copy of checkpoints in
# memory"), with real processes of two users (setpriv) and a memory directory made as /dev/shm is (1777):
#   (a) another user pre-creates the victim's per-user directory with links and a checkpoint in it: the
#       victim's --resume refuses the directory (warning, disk only), writes through no link, resumes nothing
#       planted, deletes nothing of the other user's
#   (b) the per-user directory is a link to another run's checkpoints: refused, those checkpoints untouched
#   (c) the copy is private: 0700 directories, 0600 files; the other user can neither list nor read it;
#       with $XDG_RUNTIME_DIR (checkpoint.memory_dir auto) it goes there
#   (d) a run deleted and started again under its name does not resume the old run's copy; the start
#       removes that copy
#   (e) root: a directory another user made for uid 0 is refused too, and a root-owned file stays whole
#   (f) killed during its first disk write (emulated: the disk's checkpoints removed): --resume without
#       --run-name finds the run from its copy in memory and resumes it
#   (g) a full disk at a stop: the copy in memory, the only whole state, is kept; after making room,
#       --resume continues from it
#   (h) dtrain --remove-memory-copies removes the copies whose state is on disk too (a run stopped by a
#       signal keeps one for its restart), not a live run's
# Needs root (to act as two users, and to mount the full disk's tmpfs): exits 77 (skipped) without it.
# Usage: shared_node_test.sh DTRAIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP: acting as two users needs root and setpriv (util-linux)"
  exit 77
fi
work=$(mktemp -d)
cleanup() {
  pkill -9 -f "$work/" 2>/dev/null
  umount "$work/full" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
chmod 755 "$work"
cp "$1" "$work/dtrain"
chmod 755 "$work/dtrain"
dtrain=$work/dtrain
victim=23456
other=34567
shm=$work/shm
mkdir -m 1777 "$shm"
home=$work/victim
other_home=$work/other
mkdir -m 755 "$home" "$other_home"
chown "$victim:$victim" "$home"
chown "$other:$other" "$other_home"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
as_victim() { (cd "$home" && HOME=$home setpriv --reuid="$victim" --regid="$victim" --clear-groups "$@"); }
as_other() { (cd "$other_home" && HOME=$other_home setpriv --reuid="$other" --regid="$other" --clear-groups "$@"); }
fast=(--workload mnist --synthetic --epochs 1 --max-steps 10 --eval-samples 100 --progress off --device cpu --backend mpi
      --tensorboard=false --sample-interval-s 0)
long=(--workload mnist --synthetic --epochs 1 --max-steps 100000 --eval-samples 100 --progress off --device cpu
      --backend mpi --tensorboard=false --sample-interval-s 0 --checkpoint-every-steps 2)
# Waits (up to 60 s) until $1 matches a file; prints it.
wait_for() {
  for _ in $(seq 1 600); do
    # shellcheck disable=SC2086
    for f in $1; do [ -e "$f" ] && { echo "$f"; return 0; }; done
    sleep 0.1
  done
  return 1
}
mode_owner() { stat -c '%a %u' "$1"; }

# --- (a) a per-user directory planted by another user ------------------------------------------------------
as_victim sh -c 'echo precious > precious && chmod 600 precious'
as_other "$dtrain" "${fast[@]}" --log-dir logs --run-name planted --checkpoint-memory-dir '' >/dev/null 2>&1
planted=$other_home/logs/planted/checkpoints/checkpoint-epoch-000001.safetensors
mine=$shm/dtrain-$victim
as_other mkdir -m 777 "$mine"
as_other cp "$planted" "$mine/checkpoint-epoch-000099.safetensors"
for name in checkpoint-epoch-000001.pt.tmp checkpoint-epoch-000001-step-00000005.pt.tmp owner run_id; do
  as_other ln -s "$home/precious" "$mine/$name"
done
as_victim "$dtrain" "${fast[@]}" --checkpoint-every-steps 5 --log-dir logs --run-name r --resume \
  --checkpoint-memory-dir "$shm" >"$work/a.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "is not a private directory of this user (owner uid $other, mode 0777" "$work/a.out" &&
   ! grep -q "^resumed" "$work/a.out" && [ "$(cat "$home/precious")" = precious ] && [ "$(mode_owner "$home/precious")" = "600 $victim" ] &&
   [ -f "$mine/checkpoint-epoch-000099.safetensors" ] && [ -L "$mine/owner" ] && [ "$(ls "$mine" | wc -l)" -eq 5 ]; then
  pass "a per-user directory another user planted (links, a checkpoint) is refused: nothing written through it, resumed or deleted"
else
  fail "planted directory (exit $rc)"; cat "$work/a.out"; ls -la "$mine" "$home"
fi

# --- (b) the per-user directory is a link to another run's checkpoints -------------------------------------
rm -rf "$mine"
as_victim "$dtrain" "${fast[@]}" --log-dir logs --run-name kept --checkpoint-memory-dir '' >/dev/null 2>&1
before=$(ls -l --time-style=+%s.%N "$home/logs/kept/checkpoints")
as_other ln -s "$home/logs/kept/checkpoints" "$mine"
as_victim "$dtrain" "${fast[@]}" --checkpoint-every-steps 5 --checkpoint-keep 1 --log-dir logs --run-name r2 --resume \
  --checkpoint-memory-dir "$shm" >"$work/b.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "is a symbolic link or not a directory, which dtrain does not follow" "$work/b.out" &&
   ! grep -q "^resumed" "$work/b.out" && [ "$(ls -l --time-style=+%s.%N "$home/logs/kept/checkpoints")" = "$before" ]; then
  pass "a per-user directory that links to another run's checkpoints is refused; they stay as they were"
else
  fail "linked directory (exit $rc)"; cat "$work/b.out"
fi
rm -f "$mine"

# --- (c) the copy is private -----------------------------------------------------------------------------------
as_victim "$dtrain" "${long[@]}" --log-dir logs --run-name r3 --checkpoint-memory-dir "$shm" >/dev/null 2>&1 &
wait_for "$mine/*-*/checkpoint-epoch-*.safetensors" >/dev/null
# The run goes on writing copies and removing older ones (a copy found a moment ago can be gone by the
# time it is looked at): stopped, it holds still while its copy is examined.
pkill -STOP -f "run-name r3"
copy=$(compgen -G "$mine/*-*/checkpoint-epoch-*.safetensors" | head -n 1)
copy_dir=$(dirname "$copy")
listing=$(as_other ls "$mine" 2>&1)
reading=$(as_other cat "$copy" 2>&1 >/dev/null)
modes="$(mode_owner "$mine") $(mode_owner "$copy_dir") $(mode_owner "$copy")"
pkill -9 -f "run-name r3"
sleep 0.5
if [ -n "$copy" ] && [ "$modes" = "700 $victim 700 $victim 600 $victim" ] && [[ "$listing" == *"Permission denied"* ]] &&
   [[ "$reading" == *"Permission denied"* ]]; then
  pass "the copy is private: 700 and 600 for uid $victim; the other user cannot list or read it"
else
  fail "privacy ('$copy': directory, run directory and copy '$modes'; listing '$listing', reading '$reading')"
fi
xdg=$work/xdg-victim
mkdir -m 700 "$xdg"
chown "$victim:$victim" "$xdg"
as_victim env XDG_RUNTIME_DIR="$xdg" "$dtrain" "${long[@]}" --log-dir logs --run-name xdg >/dev/null 2>&1 &
xdg_copy=$(wait_for "$xdg/dtrain-$victim/*-*/checkpoint-epoch-*.safetensors")
pkill -9 -f "run-name xdg"
if [ -n "$xdg_copy" ]; then
  pass "checkpoint.memory_dir auto: the copy goes to \$XDG_RUNTIME_DIR ($(basename "$(dirname "$(dirname "$xdg_copy")")")/…)"
else
  fail "no copy under \$XDG_RUNTIME_DIR"; ls -laR "$xdg"
fi

# --- (d) a run deleted and started again under its name ----------------------------------------------------------
# r3 was killed: its copy is there. Its directory goes, and a new run takes its name.
rm -rf "$home/logs/r3"
as_victim "$dtrain" "${fast[@]}" --log-dir logs --run-name r3 --resume --checkpoint-memory-dir "$shm" >"$work/d.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && ! grep -q "^resumed" "$work/d.out" && grep -q "removed 1 checkpoint copies in memory that no run can resume from" "$work/d.out" &&
   [ ! -e "$copy_dir" ]; then
  pass "a run deleted and started again under its name starts afresh; its old copy in memory is removed"
else
  fail "stale copy (exit $rc; old copy dir $( [ -e "$copy_dir" ] && echo kept || echo gone))"; cat "$work/d.out"
fi

# --- (e) root ------------------------------------------------------------------------------------------------------
echo "root's" >"$work/root-file"
chmod 600 "$work/root-file"
as_other mkdir -m 777 "$shm/dtrain-0"
as_other ln -s "$work/root-file" "$shm/dtrain-0/checkpoint-epoch-000001.pt.tmp"
(cd "$work" && "$dtrain" "${fast[@]}" --checkpoint-every-steps 5 --log-dir root-logs --run-name r --resume \
  --checkpoint-memory-dir "$shm" >e.out 2>&1)
rc=$?
if [ "$rc" -eq 0 ] && grep -q "'$shm/dtrain-0' is not a private directory of this user (owner uid $other" "$work/e.out" &&
   [ "$(cat "$work/root-file")" = "root's" ]; then
  pass "root refuses a directory another user made for uid 0; its own file stays whole"
else
  fail "root (exit $rc)"; cat "$work/e.out"
fi
rm -rf "$shm/dtrain-0"

# --- (f) killed during the first disk write ---------------------------------------------------------------------
as_victim "$dtrain" "${long[@]}" --log-dir flogs --checkpoint-memory-dir "$shm" >/dev/null 2>&1 &
wait_for "$home/flogs/*/checkpoints/checkpoint-epoch-*.safetensors" >/dev/null
pkill -9 -f "log-dir flogs"
sleep 0.5
rm -f "$home"/flogs/*/checkpoints/checkpoint-epoch-*  # the disk write that never finished
as_victim "$dtrain" "${fast[@]}" --max-steps 100000 --log-dir flogs --resume --checkpoint-memory-dir "$shm" >"$work/f.out" 2>&1 &
resumed=$!
for _ in $(seq 1 300); do grep -q "^resumed" "$work/f.out" && break; sleep 0.1; done
pkill -9 -f "log-dir flogs"
wait "$resumed" 2>/dev/null
if grep -q "^resuming run '" "$work/f.out" && grep -q "^resumed epoch 1 at step .* from $mine/.*, the copy in memory" "$work/f.out"; then
  pass "--resume without --run-name finds a run whose only checkpoint is in memory: $(grep -o 'resumed epoch 1 at step [0-9]*' "$work/f.out")"
else
  fail "resume of a run whose only checkpoint is in memory"; cat "$work/f.out"
fi

# --- (g) a full disk at a stop --------------------------------------------------------------------------------------
full=$work/full
mkdir "$full"
if mount -t tmpfs -o size=24m tmpfs "$full" 2>"$work/mount.err"; then
  # The first checkpoint (about 14 MB) fits; with the filler beside it, the stop's does not.
  (cd "$work" && "$dtrain" "${long[@]}" --checkpoint-every-steps 0 --log-dir "$full" --run-name g \
    --checkpoint-memory-dir "$shm" >g.out 2>&1) &
  job=$!
  for _ in $(seq 1 300); do grep -q '"event":"train_progress"' "$full"/g/events.jsonl 2>/dev/null && break; sleep 0.1; done
  head -c 12M /dev/zero >"$full/filler" 2>/dev/null
  kill -TERM "$(pgrep -f "run-name g" | head -1)"
  wait "$job"
  rc=$?
  copies=$(ls "$shm/dtrain-0"/*-*/checkpoint-epoch-*.safetensors 2>/dev/null | wc -l)
  rm -f "$full/filler"
  (cd "$work" && "$dtrain" "${long[@]}" --max-steps 5 --log-dir "$full" --run-name g --resume --checkpoint-memory-dir "$shm" \
    >g2.out 2>&1)
  rc2=$?
  umount "$full"
  if [ "$rc" -eq 5 ] && [ "$copies" -eq 1 ] && grep -q "is only in this node's memory" "$work/g.out" &&
     [ "$rc2" -eq 0 ] && grep -q "^resumed epoch 1 at step .* the copy in memory" "$work/g2.out"; then
    pass "a full disk at a stop (exit 5) keeps the copy in memory, and --resume continues from it: $(grep -o 'resumed epoch 1 at step [0-9]*' "$work/g2.out")"
  else
    fail "full disk at a stop (exit $rc, $copies copies, resume exit $rc2)"; tail -5 "$work/g.out" "$work/g2.out"
  fi
else
  echo "SKIP: full disk at a stop: cannot mount a tmpfs here ($(cat "$work/mount.err"))"
fi

# --- (h) dtrain --remove-memory-copies ------------------------------------------------------------------------------
# A run stopped by a signal keeps its copy for a restart (its state is on disk too); a live run holds its own.
as_victim "$dtrain" "${long[@]}" --log-dir logs --run-name idle --checkpoint-memory-dir "$shm" >/dev/null 2>&1 &
wait_for "$home/logs/idle/checkpoints/run_id" >/dev/null
idle_copy=$(wait_for "$mine/*-$(cat "$home/logs/idle/checkpoints/run_id")/checkpoint-epoch-*.safetensors")
pkill -TERM -f "run-name idle"
for _ in $(seq 1 100); do pgrep -f "run-name idle" >/dev/null || break; sleep 0.1; done
idle_kept=$(ls "$(dirname "$idle_copy")"/checkpoint-epoch-*.safetensors 2>/dev/null | wc -l)
as_victim "$dtrain" "${long[@]}" --log-dir logs --run-name live --checkpoint-memory-dir "$shm" >/dev/null 2>&1 &
wait_for "$home/logs/live/checkpoints/run_id" >/dev/null
live_copy=$(wait_for "$mine/*-$(cat "$home/logs/live/checkpoints/run_id")/checkpoint-epoch-*.safetensors")
as_victim "$dtrain" --remove-memory-copies --checkpoint-memory-dir "$shm" >"$work/h.out" 2>&1
rc=$?
pkill -9 -f "run-name live"
if [ "$rc" -eq 0 ] && [ "$idle_kept" -eq 1 ] && [ ! -e "$(dirname "$idle_copy")" ] && [ -e "$(dirname "$live_copy")" ] &&
   grep -q "^dtrain: removed [1-9][0-9]* checkpoint copies in memory" "$work/h.out"; then
  pass "--remove-memory-copies removed the copy a stopped run kept (its state is on disk) and kept the live run's: $(head -1 "$work/h.out" | cut -d';' -f1)"
else
  fail "--remove-memory-copies (exit $rc; the stopped run kept $idle_kept, its copy $( [ -e "$(dirname "$idle_copy")" ] && echo remains || echo gone))"
  cat "$work/h.out"
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
