#!/usr/bin/python3
"""A stand-in for Kubeflow Trainer's status server (KEP-2779, Trainer 2.3's pkg/statusserver): HTTPS with a
certificate of the test's own CA, bearer tokens, and the request schema Trainer's API applies
(UpdateTrainJobStatusRequest: trainerStatus with progressPercentage 0..100, estimatedRemainingSeconds >= 0,
at most 256 metrics of a name and a text value of 1..64 characters each, lastUpdatedTime RFC 3339). Every
request is appended to --log as one JSON line: the path, the token, whether it was accepted, the body and
what was wrong with it.

  trainer_status_server.py --cert server.pem --key server.key --tokens tokens.txt --log posts.jsonl \\
      --port-file port [--mode ok|slow|refuse|hostile]

--tokens names a file of the tokens accepted now, one per line, read at every request, so that a test
revokes a token by rewriting it. ok: 200 for a valid request with an accepted token, 401 for a bad token,
422 for a bad body (metav1.Status-style JSON, as Trainer answers); slow: no answer for 30 s; refuse: 403;
hostile: 500 with a message of terminal escape sequences and a newline that would forge a log line.
"""
import argparse
import datetime
import http.server
import json
import os
import ssl
import sys
import threading
import time

PATH = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/study/trainjobs/dtrain-mnist/status"


def problems(body):
    """What Trainer's decoding and the TrainJob status schema would refuse in `body`."""
    if not isinstance(body, dict) or set(body) != {"trainerStatus"} or not isinstance(body["trainerStatus"], dict):
        return ["the body must be {\"trainerStatus\": {...}}"]
    status = body["trainerStatus"]
    found = []
    unknown = set(status) - {"progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime"}
    if unknown:
        found.append(f"unknown fields {sorted(unknown)}")
    percent = status.get("progressPercentage")
    if percent is not None and (not isinstance(percent, int) or isinstance(percent, bool) or not 0 <= percent <= 100):
        found.append(f"progressPercentage {percent!r} is not an integer in [0, 100]")
    left = status.get("estimatedRemainingSeconds")
    if left is not None and (not isinstance(left, int) or isinstance(left, bool) or not 0 <= left < 2**31):
        found.append(f"estimatedRemainingSeconds {left!r} is not an int32 >= 0")
    metrics = status.get("metrics", [])
    if not isinstance(metrics, list) or len(metrics) > 256:
        found.append("metrics must be a list of at most 256")
        metrics = []
    for m in metrics:
        if not isinstance(m, dict) or set(m) != {"name", "value"} or not all(
                isinstance(m[k], str) and 1 <= len(m[k]) <= 64 for k in ("name", "value")):
            found.append(f"metric {m!r} must be a name and a text value of 1 to 64 characters")
    when = status.get("lastUpdatedTime")
    try:
        datetime.datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError):
        found.append(f"lastUpdatedTime {when!r} is not RFC 3339 UTC")
    return found


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--mode", choices=["ok", "slow", "refuse", "hostile"], default="ok")
    args = p.parse_args()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def reply(self, code, payload):
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            auth = self.headers.get("Authorization", "")
            token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
            with open(args.tokens) as f:
                accepted = {line.strip() for line in f if line.strip()}
            try:
                body = json.loads(raw)
                found = problems(body)
            except ValueError as e:
                body, found = raw.decode(errors="replace"), [f"not JSON: {e}"]
            record = {"time": time.time(), "path": self.path, "token": token, "accepted": token in accepted,
                      "content_type": self.headers.get("Content-Type"), "body": body, "problems": found}
            with lock, open(args.log, "a") as f:
                f.write(json.dumps(record) + "\n")
            if args.mode == "slow":
                time.sleep(30)
                return
            if args.mode == "hostile":
                return self.reply(500, {"kind": "Status", "status": "Failure", "code": 500,
                                        "message": "\x1b[2J\x1b[31mpwned\ndtrain: error: forged line\x07"})
            if args.mode == "refuse":
                return self.reply(403, {"kind": "Status", "status": "Failure", "message": "Forbidden", "code": 403})
            if self.path != PATH:
                return self.reply(404, {"kind": "Status", "status": "Failure", "message": "Not found", "code": 404})
            if token not in accepted:
                return self.reply(401, {"kind": "Status", "status": "Failure", "message": "Unauthorized", "code": 401})
            if found:
                return self.reply(422, {"kind": "Status", "status": "Failure", "message": "; ".join(found), "code": 422})
            self.reply(200, body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
