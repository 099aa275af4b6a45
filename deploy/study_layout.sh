# Sourced by the study runners (deploy/local, deploy/slurm, deploy/k8s): the one layout of a study
# directory that dtrain-report reads (docs/studies.md).
#
#   STUDY/n02-r1/labels.yaml    platform, nodes, ranks, GPUs per node, accelerator, repetition, ...
#   STUDY/n02-r1/command.txt    the launch command
#   STUDY/n02-r1/launcher.log   the launcher's output: dtrain's console (Katib lines) and bash time's lines
#   STUDY/n02-r1/result.yaml    exit code, result, start and end time, the runner's wall time
#   STUDY/n02-r1/logs/          dtrain's --log-dir: <time>-<workload>/events.jsonl, config.yaml, profiles
#
# Functions print errors naming the runner (STUDY_RUNNER) and return non-zero.

STUDY_RUNNER=${STUDY_RUNNER:-study}

# study_run_dir OUT NODES REP: the run's directory, e.g. OUT/n04-r2 (zero-padded, so it sorts by size).
study_run_dir() {
  printf '%s/n%02d-r%d' "$1" "$2" "$3"
}

# study_parse AFTER SPEC... -- ARGS...: the one way the runners read their options. Each SPEC word is an
# option's name: NAME takes a value (--NAME V or --NAME=V) into the variable NAME (dashes as
# underscores), NAME+ a value appended to the array NAME at each use, NAME? is a flag that sets NAME to 1.
# What follows the runner's own `--` (AFTER says what it is, for messages) is left in the array
# study_rest. An unknown option, a value missing, or a value given to a flag is an error listing the
# runner's options (exit 2); nothing has run by then.
study_parse() {
  # Locals start with _: an option's variable of the same name would be set here, not for the runner.
  local _after=$1 _arg _name _var _word _kind _value
  shift
  local -a _spec=()
  while [ "$1" != "--" ]; do _spec+=("$1"); shift; done
  shift
  study_rest=()
  while [ $# -gt 0 ]; do
    _arg=$1
    if [ "$_arg" = "--" ]; then shift; study_rest=("$@"); return 0; fi
    _name=${_arg#--}
    _name=${_name%%=*}
    _kind=""
    if [ "${_arg:0:2}" = "--" ]; then
      for _word in "${_spec[@]}"; do
        case "$_word" in "$_name") _kind=value ;; "$_name+") _kind=list ;; "$_name?") _kind=flag ;; esac
      done
    fi
    if [ -z "$_kind" ]; then
      echo "$STUDY_RUNNER: unknown option '$_arg' (expected $(printf -- '--%s, ' "${_spec[@]}" | sed 's/[+?]//g; s/, $//'), then -- and $_after)" >&2
      exit 2
    fi
    _var=${_name//-/_}
    if [ "$_kind" = flag ]; then
      [ "$_arg" = "--$_name" ] || { echo "$STUDY_RUNNER: --$_name takes no value, got '$_arg'" >&2; exit 2; }
      printf -v "$_var" 1
      shift
      continue
    fi
    if [ "$_arg" != "--$_name" ]; then
      _value=${_arg#*=}
      shift
    elif [ $# -ge 2 ]; then
      _value=$2
      shift 2
    else
      echo "$STUDY_RUNNER: --$_name needs a value" >&2
      exit 2
    fi
    if [ "$_kind" = list ]; then eval "$_var+=(\"\$_value\")"; else printf -v "$_var" '%s' "$_value"; fi
  done
}

# study_check_options OUT "1 2 4" REPS [KEY=VALUE...]: the options every runner takes: --out is given,
# sizes and repetitions are positive integers, every --label is usable. Checked before any run starts.
study_check_options() {
  local out=$1 sizes=$2 reps=$3 size
  shift 3
  [ -n "$out" ] || { echo "$STUDY_RUNNER: --out DIR is required" >&2; return 2; }
  for size in $sizes; do
    case "$size" in
      ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --sizes takes positive integers, got '$size'" >&2; return 2 ;;
    esac
  done
  [ -n "$(echo $sizes)" ] || { echo "$STUDY_RUNNER: --sizes is empty" >&2; return 2; }
  case "$reps" in
    ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --reps takes a positive integer, got '$reps'" >&2; return 2 ;;
  esac
  study_check_labels "$@"
}

# study_check_labels KEY=VALUE...: each is a usable label (runners check --label values before any run).
study_check_labels() {
  local pair key value
  for pair in "$@"; do
    key=${pair%%=*}
    value=${pair#*=}
    [ "$key" != "$pair" ] || { echo "$STUDY_RUNNER: label '$pair' must be KEY=VALUE" >&2; return 2; }
    case "$key" in
      ''|*[!a-z0-9_]*) echo "$STUDY_RUNNER: label name '$key' must be lower-case letters, digits and _" >&2; return 2 ;;
    esac
    case "$value" in
      *'"'*|*'\'*|*$'\n'*) echo "$STUDY_RUNNER: label $key='$value' must not hold quotes, backslashes or newlines" >&2; return 2 ;;
    esac
  done
}

# study_write_labels DIR KEY=VALUE...: DIR/labels.yaml, one flat YAML mapping. A later KEY=VALUE replaces
# an earlier one (a study's --label accelerator=... over the runner's default). Integers stay numbers;
# everything else is a quoted string.
study_write_labels() {
  local dir=$1 pair key value
  shift
  local -a keys=()
  local -A values=()
  study_check_labels "$@" || return
  for pair in "$@"; do
    key=${pair%%=*}
    value=${pair#*=}
    [ -n "${values[$key]+set}" ] || keys+=("$key")
    values[$key]=$value
  done
  for key in "${keys[@]}"; do
    value=${values[$key]}
    if [[ "$value" =~ ^-?[0-9]+$ ]]; then
      printf '%s: %s\n' "$key" "$value"
    else
      printf '%s: "%s"\n' "$key" "$value"
    fi
  done | study_write_file "$dir/labels.yaml"
}

# study_write_file PATH: standard input into PATH, replacing it whole: through a temporary of a random name
# created exclusively beside it (mktemp), then renamed over PATH, so that a link or a file someone else put
# under either name is never written through.
study_write_file() {
  local path=$1 temp
  temp=$(mktemp "$(dirname -- "$path")/.$(basename -- "$path").XXXXXXXXXX") ||
    { echo "$STUDY_RUNNER: cannot create a file in '$(dirname -- "$path")'" >&2; return 2; }
  if ! cat >"$temp" || ! chmod 644 "$temp" || ! mv -fT -- "$temp" "$path"; then
    rm -f -- "$temp"
    echo "$STUDY_RUNNER: cannot write '$path'" >&2
    return 2
  fi
}

# study_shared_by DIR: "" when only this user (and root) can add or replace DIR's entries (it owns DIR, and
# neither its group nor others may write it, or only with the sticky bit; a group that is the user's own
# private group counts as the user), else why not, as dtrain's own check says it (runtime/util/directory.h).
study_shared_by() {
  local dir=$1 owner mode group
  read -r owner mode group < <(stat -L -c '%u %a %G' -- "$dir")
  if [ "$owner" != "$(id -u)" ]; then
    echo "is owned by uid $owner, not by this user (uid $(id -u))"
    return
  fi
  mode=$(printf '%04o' "0$mode")
  (( (8#$mode & 01000) == 0 )) || return 0
  if (( (8#$mode & 0002) != 0 )); then
    echo "can be written by every user (mode $mode) and has no sticky bit"
  elif (( (8#$mode & 0020) != 0 )) && ! { [ "$group" = "$(id -un)" ] && [ "$(stat -L -c %g -- "$dir")" = "$(id -g)" ]; }; then
    echo "can be written by group $group (mode $mode) and has no sticky bit"
  fi
}

# study_make_out OUT [ALLOW_SHARED]: the study directory, made where missing; refused (exit 2, with a sentence
# saying why and what to do) where it cannot be made or written, or where other users could replace what
# the study writes there (study_shared_by), unless ALLOW_SHARED is 1 (the runners' --allow-shared-dirs,
# which they also pass on to dtrain).
study_make_out() {
  local out=$1 allow=${2:-0} error who
  if [ -e "$out" ] && [ ! -d "$out" ]; then
    echo "$STUDY_RUNNER: --out '$out' exists but is not a directory" >&2
    exit 2
  fi
  if ! error=$(mkdir -p -- "$out" 2>&1); then
    echo "$STUDY_RUNNER: cannot create --out '$out': ${error##*: }" >&2
    exit 2
  fi
  [ -w "$out" ] && [ -x "$out" ] || { echo "$STUDY_RUNNER: --out '$out' is not writable by this user (uid $(id -u))" >&2; exit 2; }
  who=$(study_shared_by "$out")
  if [ -n "$who" ] && [ "$allow" != 1 ]; then
    echo "$STUDY_RUNNER: --out '$out' $who: another user could plant links or files there that the study would" \
      "write through or remove. Use a directory of your own (or chmod go-w it), or pass --allow-shared-dirs to use it" \
      "all the same, trusting everyone who can write it (dtrain gets --allow-shared-dirs too)" >&2
    exit 2
  fi
}

# study_new_run_dir DIR: DIR made afresh for a run (mode 0755): an earlier run's DIR of this user's is
# removed first; anything else under that name (a link, another user's directory or file) is not
# followed or removed, but refused (exit 2).
study_new_run_dir() {
  _study_not_in_the_way "$1"
  rm -rf -- "$1"
  study_make_subdir "$1"
}

# _study_not_in_the_way DIR: exit 2 when DIR is there as anything but a directory of this user's.
_study_not_in_the_way() {
  local dir=$1
  if [ -L "$dir" ] || { [ -e "$dir" ] && { [ ! -d "$dir" ] || [ ! -O "$dir" ]; }; }; then
    echo "$STUDY_RUNNER: '$dir' is in the way: $( [ -L "$dir" ] && echo "a symbolic link" || echo "not a directory of this user's") that this study did not make; remove it or choose another --out" >&2
    exit 2
  fi
}

# study_make_subdir DIR: DIR (a directory of the study's own, e.g. OUT/calibration) made where missing
# (mode 0755); one that is there is used only while it is a directory of this user's, not a link (exit 2).
study_make_subdir() {
  local dir=$1 error
  _study_not_in_the_way "$dir"
  [ -d "$dir" ] && return 0
  if ! error=$(mkdir -m 755 -- "$dir" 2>&1); then
    echo "$STUDY_RUNNER: cannot create '$dir': ${error##*: }" >&2
    exit 2
  fi
}

# study_check_cores SIZES CPU_PER_RANK OVERSUBSCRIBE: every size's ranks fit this machine's cores (SIZE x
# CPU_PER_RANK <= nproc), unless OVERSUBSCRIBE is 1 (the runner's --oversubscribe). Exit 2 otherwise:
# ranks that share cores measure the sharing, not scaling.
study_check_cores() {
  local sizes=$1 cpu=$2 oversubscribe=$3 cores size
  cores=$(nproc)
  [ "$oversubscribe" = 1 ] && return 0
  for size in $sizes; do
    if awk -v s="$size" -v c="$cpu" -v n="$cores" 'BEGIN { exit !(s * c > n + 1e-9) }'; then
      echo "$STUDY_RUNNER: --sizes $size needs $(awk -v s="$size" -v c="$cpu" 'BEGIN { print s * c }') cores" \
        "($size ranks x $cpu), this machine has $cores: ranks sharing cores measure the sharing, not scaling." \
        "Use sizes up to $(awk -v c="$cpu" -v n="$cores" 'BEGIN { print int(n / c + 1e-9) }'), or pass --oversubscribe to run them all the same" >&2
      exit 2
    fi
  done
}

# study_now: seconds since the epoch, to the millisecond.
study_now() {
  date +%s.%3N
}

# study_write_result DIR EXIT_CODE STARTED FINISHED [RESULT]: DIR/result.yaml. STARTED and FINISHED come
# from study_now; RESULT defaults to succeeded (exit code 0) or failed (also: timeout, stopped).
study_write_result() {
  local dir=$1 code=$2 started=$3 finished=$4 result=${5:-}
  if [ -z "$result" ]; then
    if [ "$code" -eq 0 ]; then result=succeeded; else result=failed; fi
  fi
  {
    printf 'result: "%s"\n' "$result"
    printf 'exit_code: %s\n' "$code"
    printf 'started: "%s"\n' "$(date -u -d "@$started" +%Y-%m-%dT%H:%M:%S.%3NZ)"
    printf 'finished: "%s"\n' "$(date -u -d "@$finished" +%Y-%m-%dT%H:%M:%S.%3NZ)"
    printf 'wall_s: %s\n' "$(awk -v a="$started" -v b="$finished" 'BEGIN { printf "%.3f", b - a }')"
  } | study_write_file "$dir/result.yaml"
}

# study_timed_run DIR CMD...: runs CMD under bash's `time` (whose `real` line analysis tools read) and
# records its outcome in DIR/result.yaml; returns CMD's exit status. For job scripts that run in a study.
study_timed_run() {
  local dir=$1 started code
  shift
  started=$(study_now)
  set +e
  time "$@"
  code=$?
  set -e
  study_write_result "$dir" "$code" "$started" "$(study_now)"
  return "$code"
}

# study_bounded TIMED TIMEOUT_S CMD...: CMD, with the caller's output and no stdin, in a session of its own
# (setsid), where a terminal's Ctrl-C does not reach it: mpirun answers a SIGINT with SIGTERM and SIGKILL to
# the ranks within two seconds, too soon for a checkpoint. A stop is relayed instead as
# scripts/mpirun_local.sh relays it: SIGUSR2 to CMD (mpirun, or cluster.sh, which pass it on to the ranks,
# which finish their step, save a checkpoint and exit). Past TIMEOUT_S the same; what is still running
# STUDY_STOP_GRACE_S (default 60) seconds after either is killed with its whole session, and nothing of
# that session outlives CMD. With TIMED 1, CMD runs under bash's `time`. Returns CMD's exit status;
# _study_result says "timeout" when it ran past TIMEOUT_S, "stopped" when the runner was stopped
# (study_trap_stops), else "".
study_bounded() {
  local timed=$1 timeout_s=$2 leader="" shell now deadline kill_at="" pidfile code
  shift 2
  _study_result=""
  _study_busy=1
  pidfile=$(mktemp)  # private (0600, a name of its own): where the subshell says CMD's pid
  # The subshell survives the signals a terminal sends the runner's process group (a trap, not an ignore:
  # CMD must not inherit ignored signals); CMD's own session is out of their reach.
  (
    trap ':' INT TERM HUP
    run() {
      setsid "$@" </dev/null &
      echo $! >"$pidfile"
      # wait returns early for a trapped signal: wait again until CMD is gone.
      while :; do
        wait $!
        status=$?
        kill -0 $! 2>/dev/null || break
      done
      return $status
    }
    if [ "$timed" = 1 ]; then time run "$@"; else run "$@"; fi
  ) </dev/null &
  shell=$!
  deadline=$(( $(date +%s) + timeout_s ))
  while kill -0 "$shell" 2>/dev/null; do
    [ -n "$leader" ] || { leader=$(cat "$pidfile" 2>/dev/null || true); _study_leader=$leader; }
    now=$(date +%s)
    if [ -n "$leader" ] && [ -z "$kill_at" ] && { [ "$now" -ge "$deadline" ] || [ "$_study_stop" -ne 0 ]; }; then
      [ "$_study_stop" -ne 0 ] || _study_result=timeout
      kill -USR2 "$leader" 2>/dev/null || true
      kill_at=$(( now + ${STUDY_STOP_GRACE_S:-60} ))
    fi
    if [ -n "$kill_at" ] && [ "$now" -ge "$kill_at" ]; then
      kill -KILL -- "-$leader" 2>/dev/null || true
    fi
    # A sleep the runner's trap interrupts: a stop is relayed within a moment.
    sleep 0.2 &
    wait $! 2>/dev/null || true
  done
  set +e
  wait "$shell"
  code=$?
  set -e
  # Nothing of CMD's session outlives it: ranks that a killed launcher left, helpers, orphans.
  [ -z "$leader" ] || kill -KILL -- "-$leader" 2>/dev/null || true
  rm -f "$pidfile"
  _study_leader="" _study_busy=""
  if [ "$_study_stop" -ne 0 ]; then _study_result=stopped; elif [ "$_study_result" = timeout ]; then code=124; fi
  return "$code"
}

# study_exit_if_stopped [WHAT]: after a study_bounded CMD, when the runner was stopped: says so and exits
# 128 + the signal, starting nothing more.
study_exit_if_stopped() {
  [ "$_study_stop" -ne 0 ] || return 0
  echo "$STUDY_RUNNER: ${1:+$1 }stopped by SIG$(kill -l "$_study_stop"); no later run started" >&2
  exit $(( 128 + _study_stop ))
}

# study_launch DIR LABEL TIMEOUT_S CMD...: one run of a study on this machine: CMD into DIR/command.txt, run
# by study_bounded under bash's `time` with its output in DIR/launcher.log, DIR/result.yaml written
# (succeeded, failed, timeout with exit status 124, or stopped), and a line saying how it went. LABEL names
# the run ("size 2 rep 1"). Returns CMD's exit status; a stopped runner exits (study_exit_if_stopped).
study_launch() {
  local dir=$1 label=$2 timeout_s=$3 started code real
  shift 3
  { printf '%q ' "$@"; echo; } | study_write_file "$dir/command.txt"
  echo "$STUDY_RUNNER: $label -> $dir"
  started=$(study_now)
  set +e
  study_bounded 1 "$timeout_s" "$@" >"$dir/launcher.log" 2>&1
  code=$?
  set -e
  study_write_result "$dir" "$code" "$started" "$(study_now)" "$_study_result"
  real=$(awk '$1 == "real" {print $2}' "$dir/launcher.log" | tail -n 1)
  study_exit_if_stopped "$label (the ranks exited $code; see $dir/launcher.log):"
  if [ "$code" -ne 0 ]; then
    echo "$STUDY_RUNNER: $label failed (exit $code$( [ "$_study_result" = timeout ] && echo ": it ran past --timeout $timeout_s s")); see $dir/launcher.log" >&2
  else
    echo "$STUDY_RUNNER: $label: real $real"
  fi
  return "$code"
}

# study_trap_stops: a runner's SIGINT, SIGTERM and SIGHUP stop the CMD study_bounded has in progress (see
# there; a second one relays again: dtrain then exits at once) and then the runner, 128 + the signal; with
# nothing in progress, the runner exits at once. Its EXIT trap, if any, runs either way. A runner that
# waits for something else (a Kubernetes job, a Slurm job) sets _study_busy=1 meanwhile and checks
# _study_stop (the signal's number, 0 while none came) to stop it itself.
_study_stop=0
_study_leader=""
_study_busy=""
_study_result=""
study_trap_stops() {
  trap '_study_stopping 2' INT
  trap '_study_stopping 15' TERM
  trap '_study_stopping 1' HUP
}
_study_stopping() {
  if [ "$_study_busy" != 1 ]; then
    echo "$STUDY_RUNNER: stopped by SIG$(kill -l "$1") between runs; no later run started" >&2
    exit $(( 128 + $1 ))
  fi
  if [ "$_study_stop" -ne 0 ] && [ -n "$_study_leader" ]; then kill -USR2 "$_study_leader" 2>/dev/null || true; fi
  _study_stop=$1
}
