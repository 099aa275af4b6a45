#!/usr/bin/env bash
# Progress for Kubeflow Trainer (KEP-2779), against a local HTTPS stand-in for its status server
# (trainer_status_server.py: a CA of this test's own, bearer tokens, Trainer's request schema):
#   posts      a 2-rank run posts its progress from rank 0 only, every body valid, the last one 100% with
#              the run's final accuracy and loss; the token rotates mid-run and the next posts carry
#              the new one; run_end counts the posts
#   bad token  refused (401): training finishes, one warning, run_end counts the failures
#   down       nothing listens at the URL: the same
#   slow       the server never answers: the posts time out and training finishes
#   hostile    a URL with a password, a server whose message holds terminal escapes and a forged line: the
#              warning shows neither the password nor a raw control character
#   plain http a token is never sent in the clear: nothing is posted, one warning says why
# Each case prints the run's training time beside the baseline run without a server.
# Usage: trainer_status_test.sh DTRAIN MPIEXEC [MPIEXEC_FLAGS]
set -uo pipefail
dtrain=$1
mpiexec=$2
mpi_flags=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
servers=()
cleanup() {
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
. "$here/../../scripts/mpi_env.sh"
# shellcheck source=../support/checks.sh
. "$here/../support/checks.sh"
path=/apis/trainer.kubeflow.org/v1alpha1/namespaces/study/trainjobs/dtrain-mnist/status
run=(--workload mnist --synthetic --device cpu --backend mpi --epochs 2 --max-steps 30 --log-interval 5
     --eval-samples 500 --progress off --checkpoint=false)

# A CA and a server certificate for 127.0.0.1 signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=dtrain test CA" 2>/dev/null &&
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null &&
  printf 'subjectAltName=IP:127.0.0.1\n' >san.ext &&
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
    -extfile san.ext 2>/dev/null || { echo "FAIL: openssl could not make the test certificates"; exit 1; }

# start_server NAME MODE: a server in the background, its port in $port, its log NAME.jsonl.
start_server() {
  /usr/bin/python3 "$here/trainer_status_server.py" --cert server.pem --key server.key --tokens "$1.tokens" \
    --log "$1.jsonl" --port-file "$1.port" --mode "$2" &
  servers+=($!)
  for _ in $(seq 1 100); do [ -s "$1.port" ] && break; sleep 0.1; done
  port=$(cat "$1.port")
}
# status_run NAME URL TOKEN_FILE [DTRAIN_ARGS...]: a 2-rank run pointed at the server, output NAME.out.
status_run() {
  local name=$1 url=$2 token=$3
  shift 3
  env KUBEFLOW_TRAINER_SERVER_URL="$url" KUBEFLOW_TRAINER_SERVER_TOKEN="$work/$token" \
    KUBEFLOW_TRAINER_SERVER_CA_CERT="$work/ca.pem" \
    timeout 300 "$mpiexec" -np 2 $mpi_flags "$dtrain" "${run[@]}" --log-dir "logs-$name" "$@" >"$name.out" 2>&1
}
# The run_end record's "train_s of epoch 1, posts, failures" of the run log under logs-NAME.
figures() {
  /usr/bin/python3 - "logs-$1" <<'PY'
import glob, json, sys
records = [json.loads(l) for p in glob.glob(sys.argv[1] + "/*/events.jsonl") for l in open(p)]
end = next(r for r in records if r["event"] == "run_end")
epoch = next(r for r in records if r["event"] == "epoch_end")
print(f'{epoch["train_s"]:.2f}', end.get("trainer_status_posts", "none"), end.get("trainer_status_failures", "none"))
PY
}

# --- the baseline: no server asked for -------------------------------------------------------------------
timeout 300 "$mpiexec" -np 2 $mpi_flags "$dtrain" "${run[@]}" --log-dir logs-base >base.out 2>&1
read -r base_s base_posts _ <<<"$(figures base)"
if [ "$base_posts" = none ] && ! grep -q "Kubeflow Trainer" base.out; then
  pass "without KUBEFLOW_TRAINER_SERVER_URL nothing is posted (training ${base_s} s)"
else
  fail "baseline run: posts '$base_posts'"; cat base.out
fi

# --- posts, and a token that rotates mid-run ---------------------------------------------------------------
echo t1 >ok.tokens
echo t1 >client-token
start_server ok ok
status_run ok "https://127.0.0.1:$port$path" client-token &
job=$!
for _ in $(seq 1 600); do grep -q '"accepted": true' ok.jsonl 2>/dev/null && break; sleep 0.1; done
echo t2 >client-token  # the kubelet's rotation: a new token in the file, the old one revoked
echo t2 >ok.tokens
wait "$job"
rc=$?
if grep -q "built without libcurl" ok.out; then
  echo "SKIP: this dtrain was built without libcurl (DTRAIN_WITH_CURL): $(grep -o 'KUBEFLOW.*' ok.out | head -1)"
  exit 77
fi
read -r ok_s ok_posts ok_failed <<<"$(figures ok)"
katib=$(grep -o '{metricName: accuracy, metricValue: [0-9.]*};{metricName: loss, metricValue: [0-9.]*}' ok.out | tail -1)
if [ "$rc" -eq 0 ] && /usr/bin/python3 - ok.jsonl "$path" "$ok_posts" "$ok_failed" "$katib" <<'PY'
import json, re, sys
posts = [json.loads(l) for l in open(sys.argv[1])]
path, counted, failed, katib = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
problems = [p["problems"] for p in posts if p["problems"]]
assert not problems, problems
assert all(p["path"] == path and p["content_type"] == "application/json" for p in posts), posts[0]
assert all(p["accepted"] for p in posts), [(p["token"], p["accepted"]) for p in posts]
# Rank 0 alone posts: the server saw exactly what run_end counts.
assert counted == str(len(posts)) and failed == "0", (counted, failed, len(posts))
assert len(posts) >= 2 and posts[0]["token"] == "t1" and posts[-1]["token"] == "t2", [p["token"] for p in posts]
first, last = posts[0]["body"]["trainerStatus"], posts[-1]["body"]["trainerStatus"]
assert first["progressPercentage"] < 100 and any(m["name"] == "train_loss" for m in first["metrics"]), first
assert last["progressPercentage"] == 100 and last["estimatedRemainingSeconds"] == 0, last
final = {m["name"]: float(m["value"]) for m in last["metrics"]}
accuracy, loss = map(float, re.findall(r"metricValue: ([0-9.]+)", katib))
assert abs(final["accuracy"] - accuracy) < 1e-4 and abs(final["loss"] - loss) < 1e-4, (final, katib)
print(f"{len(posts)} posts, progress {[p['body']['trainerStatus']['progressPercentage'] for p in posts]}, last {last}")
PY
then
  pass "rank 0 posts valid progress (the last 100% with the Katib line's figures), the rotated token is read afresh, run_end counts $ok_posts (training ${ok_s} s, baseline ${base_s} s)"
else
  fail "progress posts (exit $rc, run_end posts '$ok_posts' failures '$ok_failed')"; cat ok.out; cat ok.jsonl
fi

# --- failures: a refused token, a server that is not there, one that never answers -------------------------
# expect_failure NAME WHAT PATTERN: the run finished, said one warning matching PATTERN, counted failures.
expect_failure() {
  local name=$1 what=$2 pattern=$3 rc=$4
  read -r s posts failed <<<"$(figures "$name")"
  local warnings
  warnings=$(grep -c "progress for Kubeflow Trainer's status server was not posted" "$name.out")
  if [ "$rc" -eq 0 ] && [ "$warnings" -eq 1 ] && grep -q "$pattern" "$name.out" && [ "$posts" = 0 ] &&
     [ "$failed" -ge 1 ] && grep -q "metricName: accuracy" "$name.out"; then
    pass "$what: training finishes, one warning, run_end counts $failed failed posts (training ${s} s, baseline ${base_s} s)"
  else
    fail "$what (exit $rc, $warnings warnings, posts '$posts' failures '$failed')"; cat "$name.out"
  fi
}
echo t1 >bad.tokens
echo wrong >bad-token
start_server bad ok
status_run bad "https://127.0.0.1:$port$path" bad-token
expect_failure bad "a token the server refuses" "answered HTTP 401: Unauthorized" $?

closed=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
status_run down "https://127.0.0.1:$closed$path" client-token
expect_failure down "no server at the URL" "Could not connect\|Couldn't connect\|Connection refused" $?

echo t2 >slow.tokens
start_server slow slow
start=$SECONDS
status_run slow "https://127.0.0.1:$port$path" client-token
rc=$?
expect_failure slow "a server that never answers (the run took $((SECONDS - start)) s)" "timed out\|Timeout" $rc

# --- a password in the URL and a hostile server's text; a token over plain http ------------------------------
echo t1 >hostile.tokens
start_server hostile hostile
status_run hostile "https://dtrain:s3cret@127.0.0.1:$port$path" client-token
rc=$?
expect_failure hostile "a server answering with terminal escapes" 'answered HTTP 500: \\x1b\[2J\\x1b\[31mpwned\\x0adtrain: error: forged line\\x07' $rc
if ! grep -q "s3cret" hostile.out && grep -q "https://dtrain:\*\*\*@127.0.0.1" hostile.out && ! grep -q $'\x1b' hostile.out &&
   ! grep -q "^dtrain: error: forged line" hostile.out; then
  pass "the URL's password is never printed (shown as ***), and the server's control characters are escaped"
else
  fail "hostile server: password or control characters printed"; cat -v hostile.out
fi
status_run plain "http://127.0.0.1:$closed$path" client-token
rc=$?
read -r plain_s plain_posts _ <<<"$(figures plain)"
if [ "$rc" -eq 0 ] && [ "$(grep -c "is not https, and the bearer token in KUBEFLOW_TRAINER_SERVER_TOKEN's file would cross the network in the clear" plain.out)" -eq 1 ] &&
   [ "$plain_posts" = none ] && grep -q "metricName: accuracy" plain.out; then
  pass "a token is never sent over plain http: nothing posted, one warning at the start (training ${plain_s} s)"
else
  fail "plain http (exit $rc, posts '$plain_posts')"; cat plain.out
fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
