#!/usr/bin/env bash
# Directories on disk that users share (docs/failures.md, "Shared directories"), with real processes of two
# users (setpriv) in one group, and a group-writable project directory (mode 2775) as a team's volume is,
# which the kernel's protected_symlinks does not cover:
#   (a) a checkpoint directory another user made: refused (exit 2), naming it, its owner and
#       --allow-shared-dirs; nothing written there
#   (b) with --allow-shared-dirs, the other user's links under the lock's and run_id's names, a temporary's
#       (as earlier versions named them) and a checkpoint's: the lock link is refused naming the path, and
#       once it is gone nothing is written through the rest; a checkpoint name that is a link is named at
#       the start
#   (c) a run directory another user made in a shared --log-dir (a fixed --run-name), with a link as its
#       run log: refused naming the option; with it, the run log link is refused; a run of its own in the
#       same --log-dir trains
#   (d) a shared directory of torchrun's error file, with links under its name and its old temporary's: the
#       error file is written by a rename, through none of them
#   (e) a run_id that is a FIFO, a device or a 1 GB sparse file ends a --resume's start within a second
#   (f) a directory under a checkpoint's name is named at the start, not met at the end of an epoch
# After each case the victim's own files are as they were. Needs root (to act as two users): exits 77
# (skipped) without it.
# Usage: shared_disk_test.sh DTRAIN
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
  echo "SKIP: acting as two users needs root and setpriv (util-linux)"
  exit 77
fi
binary=$(readlink -f "$1")
work=$(mktemp -d)
cleanup() {
  pkill -9 -f "$work/" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
chmod 755 "$work"
cp "$binary" "$work/dtrain"
chmod 755 "$work/dtrain"
dtrain=$work/dtrain
victim=23456
other=34567
team=45678
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
home=$work/victim
mkdir -m 700 "$home"
chown "$victim:$victim" "$home"
proj=$work/proj
mkdir -m 2775 "$proj"
chown "0:$team" "$proj"
as_victim() { (cd "$home" && HOME=$home setpriv --reuid="$victim" --regid="$victim" --groups="$team" "$@"); }
as_other() { (cd "$proj" && setpriv --reuid="$other" --regid="$other" --groups="$team" "$@"); }
fast=(--workload mnist --synthetic --epochs 1 --max-steps 6 --eval-samples 100 --progress off --device cpu --backend mpi
      --tensorboard=false --sample-interval-s 0 --checkpoint-memory-dir '')
# The victim's own files, which no case may change: its notes and a private file.
as_victim sh -c 'echo "my notes" > notes && echo secret > private && chmod 600 private'
intact() { [ "$(cat "$home/notes")" = "my notes" ] && [ "$(cat "$home/private")" = secret ] && [ "$(stat -c %s "$home/private")" -eq 7 ]; }
# plant DIR NAME...: links named NAME in DIR, made by the other user, to the victim's private file.
plant() {
  local dir=$1 name
  shift
  for name in "$@"; do as_other ln -sfn "$home/private" "$dir/$name"; done
}

# --- (a) a checkpoint directory another user made -------------------------------------------------------------
as_other mkdir -m 2775 "$proj/ck"
as_victim "$dtrain" "${fast[@]}" --log-dir logs --checkpoint-dir "$proj/ck" >a.out 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "checkpoint.dir '$proj/ck' is owned by uid $other, not by this user (uid $victim)" a.out &&
   grep -q -- "--allow-shared-dirs (log.allow_shared_dirs)" a.out && [ -z "$(ls -A "$proj/ck")" ] && intact; then
  pass "(a) a checkpoint directory another user made is refused (exit 2), naming it, its owner and --allow-shared-dirs"
else
  fail "(a) exit $rc"; cat a.out; ls -la "$proj/ck"
fi

# --- (b) links in a shared checkpoint directory, with --allow-shared-dirs -------------------------------------
plant "$proj/ck" .dtrain.lock run_id checkpoint-epoch-000001.pt.tmp checkpoint-epoch-000001-step-00000003.pt.tmp progress
as_victim "$dtrain" "${fast[@]}" --log-dir logs --checkpoint-dir "$proj/ck" --allow-shared-dirs >b1.out 2>&1
rc1=$?
as_other rm "$proj/ck/.dtrain.lock"
as_victim "$dtrain" "${fast[@]}" --log-dir logs --checkpoint-dir "$proj/ck" --allow-shared-dirs --checkpoint-every-steps 3 >b2.out 2>&1
rc2=$?
written=$(ls "$proj/ck" | grep -c '^checkpoint-epoch-.*\.safetensors$')
if [ "$rc1" -eq 2 ] && grep -q "the lock file '$proj/ck/.dtrain.lock' is a symbolic link, which dtrain does not follow; remove it" b1.out &&
   [ "$rc2" -eq 0 ] && [ "$written" -ge 2 ] && [ ! -L "$proj/ck/run_id" ] && [ ! -L "$proj/ck/progress" ] &&
   [ -L "$proj/ck/checkpoint-epoch-000001.pt.tmp" ] && intact; then
  pass "(b) a shared checkpoint directory's planted links: the lock's refused by name; run_id, progress and the temporaries' written through none ($written checkpoints of its own)"
else
  fail "(b) exit $rc1 then $rc2, $written checkpoints"; cat b1.out; tail -5 b2.out; ls -la "$proj/ck"; cat "$home/private"
fi
# A link under a checkpoint's name, newer than any: named at the start of a --resume, passed over, never read.
as_other ln -s "$home/private" "$proj/ck/checkpoint-epoch-000099.safetensors"
as_victim "$dtrain" "${fast[@]}" --epochs 2 --log-dir logs --checkpoint-dir "$proj/ck" --allow-shared-dirs --resume >b3.out 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q "^passed over .*'$proj/ck/checkpoint-epoch-000099.safetensors' (a symbolic link)" b3.out &&
   grep -q "^resumed .* from $proj/ck/checkpoint-epoch-000001" b3.out && intact; then
  pass "(b) a link under a checkpoint's name is named at the start of a --resume, passed over and not read"
else
  fail "(b) checkpoint link: exit $rc"; grep -v "^  " b3.out
fi

# --- (c) a run directory another user made in a shared --log-dir -----------------------------------------------
as_other mkdir -m 2775 "$proj/logs" "$proj/logs/r"
plant "$proj/logs/r" events.jsonl config.yaml torchrun_job
as_victim "$dtrain" "${fast[@]}" --log-dir "$proj/logs" --run-name r --resume >c1.out 2>&1
rc1=$?
as_victim "$dtrain" "${fast[@]}" --log-dir "$proj/logs" --run-name r --resume --allow-shared-dirs >c2.out 2>&1
rc2=$?
as_victim "$dtrain" "${fast[@]}" --log-dir "$proj/logs" >c3.out 2>&1
rc3=$?
own=$(grep -o "^run $proj/logs/[^:]*" c3.out | cut -d' ' -f2)
if [ "$rc1" -eq 2 ] && grep -q "the run directory '$proj/logs/r' is owned by uid $other" c1.out && grep -q -- "--allow-shared-dirs" c1.out &&
   [ "$rc2" -ne 0 ] && grep -q "'$proj/logs/r/events.jsonl' is a symbolic link, which dtrain does not follow; remove it" c2.out &&
   [ "$rc3" -eq 0 ] && [ -f "$own/events.jsonl" ] && [ "$(stat -c %u "$own")" = "$victim" ] &&
   (( (8#$(stat -c %a "$own") & 022) == 0 )) && intact; then
  pass "(c) a run directory another user made is refused (exit 2, naming --allow-shared-dirs); with it, its run log link is refused (exit $rc2); a run of its own in the shared --log-dir trains"
else
  fail "(c) exits $rc1 $rc2 $rc3"; cat c1.out c2.out; tail -3 c3.out
fi

# --- (d) torchrun's error file in a shared directory -------------------------------------------------------------
as_other mkdir -m 2775 "$proj/errors"
plant "$proj/errors" error.json error.json.tmp
as_victim env TORCHELASTIC_RUN_ID=job TORCHELASTIC_ERROR_FILE="$proj/errors/error.json" "$dtrain" --workload no-such-workload \
  >d.out 2>&1
rc=$?
if [ "$rc" -eq 2 ] && [ ! -L "$proj/errors/error.json" ] && grep -q '"errorCode": *2' "$proj/errors/error.json" &&
   [ -L "$proj/errors/error.json.tmp" ] && intact; then
  pass "(d) torchrun's error file in a shared directory: written by a rename, through none of the planted links"
else
  fail "(d) exit $rc"; cat d.out; ls -la "$proj/errors"
fi

# --- (e) a run_id that is not a small regular file ---------------------------------------------------------------
as_victim "$dtrain" "${fast[@]}" --log-dir logs --run-name e >/dev/null 2>&1
ck=$home/logs/e/checkpoints
for kind in fifo device big; do
  rm -f "$ck/run_id"
  case "$kind" in
    fifo) as_victim mkfifo "$ck/run_id"; said="is a FIFO, not a regular file" ;;
    device) mknod "$ck/run_id" c 1 5; said="is a character device, not a regular file" ;;  # /dev/zero's numbers
    big) as_victim truncate -s 1G "$ck/run_id"; said="holds 1073741824 bytes, more than the 64 that such a file holds" ;;
  esac
  started=$(date +%s.%N)
  as_victim timeout 60 "$dtrain" "${fast[@]}" --log-dir logs --run-name e --resume >e.out 2>&1
  rc=$?
  took=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  if [ "$rc" -eq 2 ] && grep -q "'logs/e/checkpoints/run_id' $said; dtrain writes run_id itself" e.out &&
     awk -v t="$took" 'BEGIN { exit !(t < 5) }'; then
    pass "(e) a run_id that $said ends the start in ${took} s (exit 2)"
  else
    fail "(e) $kind run_id: exit $rc after $took s"; cat e.out
  fi
done

# --- (f) a directory under a checkpoint's name ----------------------------------------------------------------------
rm -f "$ck/run_id"
as_victim mkdir "$ck/checkpoint-epoch-000002.safetensors"
as_victim "$dtrain" "${fast[@]}" --epochs 2 --log-dir logs --run-name e --resume >f.out 2>&1
rc=$?
if [ "$rc" -eq 2 ] && grep -q "holds 'logs/e/checkpoints/checkpoint-epoch-000002.safetensors' (a directory) under a checkpoint's name" f.out; then
  pass "(f) a directory under a checkpoint's name is named at the start (exit 2)"
else
  fail "(f) exit $rc"; cat f.out
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
