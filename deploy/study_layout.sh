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
  : >"$dir/labels.yaml.tmp"
  for key in "${keys[@]}"; do
    value=${values[$key]}
    if [[ "$value" =~ ^-?[0-9]+$ ]]; then
      printf '%s: %s\n' "$key" "$value" >>"$dir/labels.yaml.tmp"
    else
      printf '%s: "%s"\n' "$key" "$value" >>"$dir/labels.yaml.tmp"
    fi
  done
  mv "$dir/labels.yaml.tmp" "$dir/labels.yaml"
}

# study_now: seconds since the epoch, to the millisecond.
study_now() {
  date +%s.%3N
}

# study_write_result DIR EXIT_CODE STARTED FINISHED [RESULT]: DIR/result.yaml. STARTED and FINISHED come
# from study_now; RESULT defaults to succeeded (exit code 0) or failed.
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
  } >"$dir/result.yaml"
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

# study_launch DIR LABEL CMD...: one run of a study on this machine: CMD into DIR/command.txt, run under
# bash's `time` with its output in DIR/launcher.log and stdin not its own (mpirun would forward it to
# rank 0), DIR/result.yaml written (exit 124: timeout), and a line saying how it went. LABEL names the
# run ("size 2 rep 1"). Returns CMD's exit status.
study_launch() {
  local dir=$1 label=$2 started code real result=""
  shift 2
  printf '%q ' "$@" >"$dir/command.txt"
  echo >>"$dir/command.txt"
  echo "$STUDY_RUNNER: $label -> $dir"
  started=$(study_now)
  set +e
  { time "$@" ; } >"$dir/launcher.log" 2>&1 </dev/null
  code=$?
  set -e
  [ "$code" -eq 124 ] && result=timeout
  study_write_result "$dir" "$code" "$started" "$(study_now)" "$result"
  real=$(awk '$1 == "real" {print $2}' "$dir/launcher.log" | tail -n 1)
  if [ "$code" -ne 0 ]; then
    echo "$STUDY_RUNNER: $label failed (exit $code); see $dir/launcher.log" >&2
  else
    echo "$STUDY_RUNNER: $label: real $real"
  fi
  return "$code"
}
