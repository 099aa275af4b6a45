#!/usr/bin/python3
"""Validates every TrainJob (and, for mpirun and torchrun --max-restarts, its TrainingRuntime) that deploy/k8s/render_trainjob.py can
render, offline, as validate_manifests.py does for MPIJobs:

1. against Kubeflow Trainer v2.3's CRDs (shared/schemas), strict: unknown fields are errors;
2. against Trainer's rules that the schemas do not express, read from its v2.3.0 source (the TrainJob
   webhook and the torch and MPI plugins): the runtimeRef names a runtime that exists (Trainer's
   `torch-distributed` ClusterTrainingRuntime, or the TrainingRuntime rendered beside the job, in its
   namespace); no reserved variable in trainer.env (PET_* for torch, the OMPI_MCA_* Trainer sets for
   MPI); an MPI runtime has the `node` and `launcher` replicated jobs, containers named `node`, exactly
   one replicated job marked as the trainer's ancestor, and mlPolicy.numNodes 1 for its launcher; a torch
   runtime has mlPolicy.torch alone and one replicated job, `node`, the ancestor, container `node`; patches
   address replicated jobs and containers the runtime has; one patch per manager;
3. against dtrain's contract: torchrun with Debian's log flags and `--no_python dtrain`, NCCL on GPUs and
   Gloo on CPUs; `time mpirun --hostfile /etc/mpi/hostfile -np workers x slots` with sshd's port; GPUs only
   on the nodes; /dev/shm; --stop-timeout-s 10 s inside the grace period; GKE's node selector; Kueue's label;
4. for OpenShift, the restricted Pod Security Standard;
5. the restart rules of dtrain's runtimes (on mpirun's launcher, on torchrun's nodes), against the rules
   Kubernetes' API server (a Pod failure policy's) and JobSet's webhook (v0.8: failure policy rules)
   check, and against docs/failures.md: the exit statuses that fail the job at once are exactly those its
   table says a retry cannot fix.
It proves that the checks bite (a misspelt field, a wrong runtimeRef, a reserved variable) and feeds the
renderer broken inputs. Given DTRAIN (and Debian's torchrun), it also runs a rendered torchrun TrainJob's
command as two pods would, with the PET_* variables Trainer's torch plugin sets, and checks that they
train as one job of world size 2.

Usage: validate_trainjobs.py TRAINJOB_CRD TRAININGRUNTIME_CRD [DTRAIN]
"""
import copy
import itertools
import os
import glob
import json
import shlex
import socket
import subprocess
import sys
import tempfile

import re

import jsonschema
import yaml

import validate_manifests as vm
from validate_manifests import fail, restricted_pod, strict

RENDER = os.path.join(vm.ROOT, "deploy", "k8s", "render_trainjob.py")
import render_mpijob  # noqa: E402  (validate_manifests put deploy/k8s on the path)
import render_trainjob  # noqa: E402

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
# Trainer's torch-distributed ClusterTrainingRuntime (manifests/base/runtimes/torch_distributed.yaml, v2.3.0):
# its replicated jobs and their containers, which a TrainJob's patches may address.
TORCH_DISTRIBUTED = {"node": {"node"}}


def validator(path):
    crd = yaml.safe_load(open(path))
    return jsonschema.Draft7Validator(strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))


def schema_errors(validator, document):
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def pod_templates(runtime_spec):
    """(replicated job name, its Job template, its pod spec) of a runtime spec or a runtime patch."""
    for rjob in runtime_spec["template"]["spec"]["replicatedJobs"]:
        yield rjob["name"], rjob["template"], rjob["template"]["spec"]["template"]["spec"]


def trainer_rules(what, job, runtime):
    """Trainer's own checks (webhook and plugins, v2.3.0) and what makes the runtimeRef resolve."""
    spec = job["spec"]
    ref = spec["runtimeRef"]
    if ref.get("apiGroup", "trainer.kubeflow.org") != "trainer.kubeflow.org":
        fail(what, f"runtimeRef.apiGroup must be trainer.kubeflow.org, got {ref.get('apiGroup')}")
    kind = ref.get("kind", "ClusterTrainingRuntime")
    if runtime is None:
        if (kind, ref["name"]) != ("ClusterTrainingRuntime", "torch-distributed"):
            fail(what, f"runtimeRef {kind}/{ref['name']} is not Trainer's torch-distributed ClusterTrainingRuntime")
        runtime_jobs = TORCH_DISTRIBUTED
        reserved = render_trainjob.TORCHRUN_RESERVED_ENV
    else:
        if kind != "TrainingRuntime" or ref["name"] != runtime["metadata"]["name"]:
            fail(what, f"runtimeRef {kind}/{ref['name']} does not name the rendered TrainingRuntime "
                       f"{runtime['metadata']['name']}")
        if runtime["metadata"].get("namespace") != job["metadata"].get("namespace"):
            fail(what, "a TrainingRuntime is found in the TrainJob's namespace only")
        runtime_jobs = {name: {c["name"] for c in pod["containers"]} for name, _, pod in pod_templates(runtime["spec"])}
        if "torch" in runtime["spec"]["mlPolicy"]:
            reserved = render_trainjob.TORCHRUN_RESERVED_ENV
            torch_runtime_rules(what, runtime)
        else:
            reserved = render_trainjob.MPI_RESERVED_ENV
            mpi_runtime_rules(what, runtime)
    env = {e["name"] for e in spec["trainer"].get("env", [])}
    if env & set(reserved):
        fail(what, f"trainer.env sets variables Trainer reserves: {sorted(env & set(reserved))}")
    managers = [p["manager"] for p in spec.get("runtimePatches", [])]
    if len(managers) != len(set(managers)):
        fail(what, f"runtimePatches has one entry per manager, got {managers}")
    for patch in spec.get("runtimePatches", []):
        for name, _, pod in pod_templates(patch["trainingRuntimeSpec"]):
            if name not in runtime_jobs:
                fail(what, f"a patch addresses replicated job '{name}', which the runtime lacks ({sorted(runtime_jobs)})")
                continue
            for c in pod.get("containers", []):
                if c["name"] not in runtime_jobs[name]:
                    fail(what, f"a patch addresses container '{c['name']}' of '{name}', which has {sorted(runtime_jobs[name])}")


def torch_runtime_rules(what, runtime):
    """dtrain's copy of Trainer's torch-distributed runtime: what Trainer's torch plugin needs of it."""
    spec = runtime["spec"]
    policies = [k for k in ("torch", "mpi", "jax", "xgboost", "flux") if k in spec["mlPolicy"]]
    if policies != ["torch"]:
        fail(what, f"the runtime's mlPolicy must be torch alone, got {policies}")
    jobs = {name: (template, pod) for name, template, pod in pod_templates(spec)}
    if set(jobs) != {"node"}:
        fail(what, f"the torch runtime's one replicated job is node, got {sorted(jobs)}")
        return
    template, pod = jobs["node"]
    if template.get("metadata", {}).get("labels", {}).get(ANCESTOR) != "trainer":
        fail(what, "node must be the trainer's ancestor")
    if [c["name"] for c in pod["containers"]] != ["node"]:
        fail(what, "Trainer's torch plugin sets PET_* and the trainer's settings in a container named node")


def mpi_runtime_rules(what, runtime):
    spec = runtime["spec"]
    policies = [k for k in ("torch", "mpi", "jax", "xgboost", "flux") if k in spec["mlPolicy"]]
    if policies != ["mpi"]:
        fail(what, f"the runtime's mlPolicy must be mpi alone, got {policies}")
    mpi = spec["mlPolicy"].get("mpi", {})
    if mpi.get("mpiImplementation") != "OpenMPI" or mpi.get("runLauncherAsNode", False):
        fail(what, f"Open MPI with a launcher that is not a node, got {mpi}")
    jobs = {name: (template, pod) for name, template, pod in pod_templates(spec)}
    if set(jobs) != {"node", "launcher"}:
        fail(what, f"replicated jobs must be node and launcher, got {sorted(jobs)}")
        return
    ancestors = [name for name, (template, _) in jobs.items()
                 if template.get("metadata", {}).get("labels", {}).get(ANCESTOR) == "trainer"]
    if ancestors != ["launcher"]:
        fail(what, f"the launcher alone must be the trainer's ancestor, got {ancestors}")
    if spec["mlPolicy"].get("numNodes") != 1:
        fail(what, "mlPolicy.numNodes counts the trainer's (launcher's) pods: 1; the TrainJob sets the nodes")
    for name, (_, pod) in jobs.items():
        if [c["name"] for c in pod["containers"]] != ["node"]:
            fail(what, f"{name}: Trainer puts the SSH keys, hostfile and trainer settings into a container named node")
    launcher = next(r for r in spec["template"]["spec"]["replicatedJobs"] if r["name"] == "launcher")
    if launcher.get("dependsOn") != [{"name": "node", "status": "Ready"}]:
        fail(what, "the launcher must start once the nodes are ready")
    if spec["template"]["spec"].get("successPolicy") != {"operator": "All", "targetReplicatedJobs": ["launcher"]}:
        fail(what, "the job must succeed when the launcher does")
    if mpi.get("sshAuthMountPath") != f"{render_mpijob.HOME}/.ssh":
        fail(what, "Trainer's SSH keys must land in the image user's ~/.ssh")


# JobSet's webhook (jobset_webhook.go): the reasons a failure policy rule may name, and its names' form.
JOBSET_FAILURE_REASONS = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded",
                          "PodFailurePolicy"}
JOBSET_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


def no_retry_statuses():
    """The exit statuses docs/failures.md's table says a retry does not fix (its retry? cell neither yes
    nor maybe): the ones a restart would meet again."""
    statuses = []
    for line in open(os.path.join(vm.ROOT, "docs", "failures.md")):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].isdigit() and cells[2] and not cells[2].startswith(("yes", "maybe")):
            statuses.append(int(cells[0]))
    return statuses


def restart_rules(what, runtime, max_restarts):
    """What the API server and JobSet's webhook check of the restart rules, and dtrain's side of them."""
    spec = runtime["spec"]["template"]["spec"]
    jobs = {name: (template, pod) for name, template, pod in pod_templates(runtime["spec"])}
    policy = spec.get("failurePolicy", {})
    if policy.get("maxRestarts") != max_restarts:
        fail(what, f"failurePolicy.maxRestarts {policy.get('maxRestarts')}, expected {max_restarts}")
    for rule in policy.get("rules", []):
        if not JOBSET_RULE_NAME.match(rule.get("name", "")):
            fail(what, f"JobSet refuses the failure policy rule name {rule.get('name')!r}")
        if not set(rule.get("onJobFailureReasons", [])) <= JOBSET_FAILURE_REASONS:
            fail(what, f"JobSet refuses the job failure reasons {rule.get('onJobFailureReasons')}")
        if not set(rule.get("targetReplicatedJobs", [])) <= set(jobs):
            fail(what, f"a failure policy rule targets {rule.get('targetReplicatedJobs')}, not replicated jobs")
    # The pods that pass dtrain's status on: mpirun's launcher, or the torchrun nodes (the entrypoint).
    status_job = "launcher" if "launcher" in jobs else "node"
    fail_at_once = [r for r in policy.get("rules", []) if r.get("action") == "FailJobSet"
                    and r.get("onJobFailureReasons") == ["PodFailurePolicy"] and r.get("targetReplicatedJobs") == [status_job]]
    if not fail_at_once:
        fail(what, f"no rule fails the job when the {status_job}'s Pod failure policy failed its Job")
    for name, (template, pod) in jobs.items():
        if template["spec"].get("backoffLimit") != 0:
            fail(what, f"{name}: a failed pod must fail its Job (backoffLimit 0), for the JobSet to restart all of them")
        pfp = template["spec"].get("podFailurePolicy")
        if pfp is None:
            continue
        if pod.get("restartPolicy") != "Never":  # the API server's rule
            fail(what, f"{name}: a Pod failure policy needs restartPolicy Never, got {pod.get('restartPolicy')}")
        for rule in pfp["rules"]:
            codes = rule.get("onExitCodes")
            if not codes:
                continue
            if codes.get("containerName") not in {c["name"] for c in pod["containers"]}:
                fail(what, f"{name}: onExitCodes names container {codes.get('containerName')!r}, which the pod lacks")
            values = codes["values"]
            if values != sorted(set(values)) or (codes["operator"] == "In" and 0 in values):
                fail(what, f"{name}: onExitCodes values must be sorted, distinct and, for In, without 0: {values}")
    status_rules = jobs[status_job][0]["spec"].get("podFailurePolicy", {}).get("rules", [])
    failing = sorted(v for r in status_rules if r.get("action") == "FailJob"
                     for v in r.get("onExitCodes", {}).get("values", []))
    if failing != no_retry_statuses():
        fail(what, f"the {status_job} fails the job at once on {failing}; docs/failures.md says a retry cannot fix "
                   f"{no_retry_statuses()}")


def dtrain_contract(what, job, runtime, platform, workers, gpus, accelerator, queue):
    spec = job["spec"]
    trainer = spec["trainer"]
    slots = max(1, gpus)
    if trainer["numNodes"] != workers or trainer["numProcPerNode"] != slots:
        fail(what, f"numNodes/numProcPerNode {trainer['numNodes']}/{trainer['numProcPerNode']}, expected {workers}/{slots}")
    if job["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") != (queue or None):
        fail(what, f"Kueue's queue label must be {queue!r}")
    command = trainer["args"]
    if command[:2] != ["bash", "-c"] or not command[2].startswith("time "):
        fail(what, f"the trainer must run under bash's time, got {command}")
        return
    words = shlex.split(command[2][len("time "):])
    device = ["--device", "cuda", "--backend", "nccl"] if gpus else None
    if words[:1] == ["torchrun"] or runtime is None:
        if words[:1] != ["torchrun"] or "--no_python" not in words or words[words.index("--no_python") + 1] != "dtrain":
            fail(what, f"torchrun --no_python dtrain expected, got {words[:12]}")
        if not set(render_trainjob.TORCHRUN_LOG_FLAGS) <= set(words):
            fail(what, "Debian's torchrun needs --log_dir, --redirects and --tee")
        device = device or ["--device", "cpu", "--backend", "gloo"]
        gpu_resources = trainer.get("resourcesPerNode", {}).get("limits", {}).get("nvidia.com/gpu", 0)
        pods = [pod for patch in spec.get("runtimePatches", []) for _, _, pod in pod_templates(patch["trainingRuntimeSpec"])]
        if runtime is not None:  # the pod settings are in dtrain's runtime, not in a patch
            pods = [pod for _, _, pod in pod_templates(runtime["spec"])]
        if len(pods) != 1:
            fail(what, f"one node pod template with the pod settings expected, got {len(pods)}")
        node_pods = pods
    else:
        np = words.index("-np") if "-np" in words else -1
        if words[:3] != ["mpirun", "--hostfile", "/etc/mpi/hostfile"] or np < 0 or words[np + 1] != str(workers * slots):
            fail(what, f"mpirun --hostfile /etc/mpi/hostfile -np {workers * slots} expected, got {words[:6]}")
        if f"-p {render_mpijob.SSH_PORT} -o ConnectionAttempts=10" not in words:
            fail(what, "mpirun must reach the nodes' sshd on its port")
        device = device or ["--device", "cpu", "--backend", "mpi"]
        pods = {name: pod for name, _, pod in pod_templates(runtime["spec"])}
        if "resources" in trainer or "limits" in pods["launcher"]["containers"][0].get("resources", {}):
            fail(what, "the launcher takes no GPUs")
        gpu_resources = pods["node"]["containers"][0].get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
        node_pods = [pods["node"]]
        pods = list(pods.values())
    if gpu_resources != gpus:
        fail(what, f"{gpu_resources} GPUs per node, expected {gpus}")
    dtrain = words[words.index("dtrain"):]
    if " ".join(device) not in " ".join(dtrain):
        fail(what, f"dtrain must train with {' '.join(device)}")
    for pod in pods:
        grace = pod.get("terminationGracePeriodSeconds")
        if grace is None or f"--stop-timeout-s {grace - render_mpijob.STOP_MARGIN_S}" not in " ".join(dtrain):
            fail(what, f"--stop-timeout-s must leave {render_mpijob.STOP_MARGIN_S} s of the grace period {grace}")
        if platform == "openshift":
            restricted_pod(what, pod)
    for pod in node_pods:
        if platform == "gke" and gpus and (pod.get("nodeSelector") != {"cloud.google.com/gke-accelerator": accelerator}
                                           or not pod.get("tolerations")):
            fail(what, "GPU pods on GKE need the accelerator's node selector and the GPU taint's toleration")
        if {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} not in pod.get("volumes", []) or \
                {"name": "dshm", "mountPath": "/dev/shm"} not in pod["containers"][0].get("volumeMounts", []):
            fail(what, "the nodes need /dev/shm as a memory emptyDir")


def run_as_pods(dtrain):
    """The torchrun TrainJob's command in two local 'pods' with Trainer's PET_* variables: one job of 2."""
    torchrun = "/usr/bin/torchrun"
    if not os.access(torchrun, os.X_OK):
        print(f"SKIP: no {torchrun} (Debian: python3-torch); the rendered torchrun command was not run")
        return None
    job = render(["--launcher", "torchrun", "--platform", "usernetes", "--workers", "2", "--gpus-per-worker", "0",
                  "--image", "x", "--dtrain-args", "--synthetic --max-steps 6 --eval-samples 200"])[-1]
    command = job["spec"]["trainer"]["args"]
    with tempfile.TemporaryDirectory(prefix="dtrain-trainjob-") as home:
        # The pod's home and image paths, here: the test's directory and this build's binary.
        script = command[2].replace(render_mpijob.HOME, home).replace(" dtrain ", f" {shlex.quote(dtrain)} ")
        script = script.replace("time torchrun ", f"time {torchrun} ")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        pods = []
        for rank in range(2):
            env = dict(os.environ, PET_NNODES="2", PET_NPROC_PER_NODE=str(job["spec"]["trainer"]["numProcPerNode"]),
                       PET_NODE_RANK=str(rank), PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(port),
                       GLOO_SOCKET_IFNAME="lo")
            env.update({e["name"]: e["value"] for e in job["spec"]["trainer"]["env"] if e["name"] != "GLOO_SOCKET_IFNAME"})
            pods.append(subprocess.Popen([*command[:2], script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True))
        outputs = [p.communicate(timeout=300)[0] for p in pods]
        runs = [json.loads(line) for path in glob.glob(f"{home}/dtrain-logs/*/events.jsonl") for line in open(path)]
        start = [r for r in runs if r["event"] == "run_start"]
        if any(p.returncode for p in pods) or len(start) != 1 or start[0]["world_size"] != 2 or \
                "metricName: accuracy" not in outputs[0] or "real" not in outputs[0]:
            fail("torchrun TrainJob as two pods", f"exits {[p.returncode for p in pods]}, run_start {start}:\n"
                                                  + outputs[0][-1500:])
            return None
        return start[0]["launcher"]


def render(argv):
    return [yaml.safe_load(d) for d in "".join(render_mpijob.to_yaml(d) + "---\n"
                                              for d in render_trainjob.render(render_trainjob.parse_args(argv))
                                              ).split("---\n") if d.strip()]


def main():
    if len(sys.argv) not in (3, 4) or not all(os.path.isfile(p) for p in sys.argv[1:]):
        print(f"validate_trainjobs: the CRD schemas were not found at {sys.argv[1:]}; pass shared/schemas/"
              f"trainer-v2.3-trainjobs-crd.yaml and trainer-v2.3-trainingruntimes-crd.yaml")
        return 1
    jobs_schema, runtimes_schema = validator(sys.argv[1]), validator(sys.argv[2])
    rendered = 0
    for launcher, platform, workers, gpus in itertools.product(render_trainjob.LAUNCHERS, render_mpijob.PLATFORMS,
                                                               (1, 2, 8, 32), (0, 1, 8)):
        accelerators = ("nvidia-l4", "nvidia-tesla-v100") if platform == "gke" and gpus else ("",)
        for accelerator, queue in itertools.product(accelerators, ("", "team-a")):
            argv = ["--launcher", launcher, "--platform", platform, "--workers", str(workers), "--gpus-per-worker",
                    str(gpus), "--image", "registry.example.com/dtrain:1", "--namespace", "study"]
            argv += ["--accelerator", accelerator] if accelerator else []
            argv += ["--queue", queue] if queue else []
            what = "trainjob " + " ".join(argv)
            documents = render(argv)
            runtime = documents[0] if len(documents) == 2 else None
            job = documents[-1]
            if [d["kind"] for d in documents] != (["TrainingRuntime", "TrainJob"] if launcher == "mpirun" else ["TrainJob"]):
                fail(what, f"documents {[d['kind'] for d in documents]}")
                continue
            for error in schema_errors(jobs_schema, job) + (schema_errors(runtimes_schema, runtime) if runtime else []):
                fail(what, error)
            trainer_rules(what, job, runtime)
            dtrain_contract(what, job, runtime, platform, workers, gpus, accelerator, queue)
            if runtime:
                restart_rules(what, runtime, render_trainjob.DEFAULT_MAX_RESTARTS)
            rendered += 1

    # torchrun with restart rules: dtrain's own torch runtime beside the TrainJob.
    for platform, workers, gpus in itertools.product(render_mpijob.PLATFORMS, (2, 32), (0, 8)):
        argv = ["--launcher", "torchrun", "--platform", platform, "--workers", str(workers), "--gpus-per-worker",
                str(gpus), "--image", "registry.example.com/dtrain:1", "--namespace", "study", "--max-restarts", "2",
                "--queue", "team-a"]
        accelerator = "nvidia-l4" if platform == "gke" and gpus else ""
        argv += ["--accelerator", accelerator] if accelerator else []
        what = "trainjob " + " ".join(argv)
        documents = render(argv)
        if [d["kind"] for d in documents] != ["TrainingRuntime", "TrainJob"]:
            fail(what, f"documents {[d['kind'] for d in documents]}")
            continue
        runtime, job = documents
        for error in schema_errors(jobs_schema, job) + schema_errors(runtimes_schema, runtime):
            fail(what, error)
        trainer_rules(what, job, runtime)
        dtrain_contract(what, job, runtime, platform, workers, gpus, accelerator, "team-a")
        restart_rules(what, runtime, 2)
        rendered += 1

    # The checks must catch what they are for.
    job = render(["--platform", "usernetes", "--workers", "2", "--image", "x"])[-1]
    misspelt = copy.deepcopy(job)
    misspelt["spec"]["trainer"]["numnodes"] = misspelt["spec"]["trainer"].pop("numNodes")
    if not schema_errors(jobs_schema, misspelt):
        fail("self-check", "the strict schema accepted a misspelt trainer.numnodes")
    wrong_ref = copy.deepcopy(job)
    wrong_ref["spec"]["runtimeRef"]["name"] = "torch-distributed-v2"
    reserved = copy.deepcopy(job)
    reserved["spec"]["trainer"]["env"].append({"name": "PET_NNODES", "value": "3"})
    runtime, mpi_job = render(["--launcher", "mpirun", "--platform", "gke", "--workers", "2", "--accelerator", "nvidia-l4",
                               "--image", "x"])
    cluster_kind = copy.deepcopy(mpi_job)
    cluster_kind["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
    two_trainers = copy.deepcopy(runtime)
    node = two_trainers["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"].setdefault("metadata", {})["labels"] = {ANCESTOR: "trainer"}
    patched_resources = copy.deepcopy(job)
    patch_pod = patched_resources["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patch_pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {}
    if not schema_errors(jobs_schema, patched_resources):
        fail("self-check", "the strict schema accepted resources in a runtime patch's container (patches cannot set them)")
    for what, broken_job, broken_runtime in (("a wrong runtimeRef name", wrong_ref, None),
                                             ("a reserved PET_NNODES", reserved, None),
                                             ("ClusterTrainingRuntime for the rendered runtime", cluster_kind, runtime),
                                             ("two trainer ancestors", mpi_job, two_trainers)):
        before = len(vm.failures)
        trainer_rules("self-check", broken_job, broken_runtime)
        if len(vm.failures) == before:
            fail("self-check", f"Trainer's rules accepted {what}")
        else:
            del vm.failures[before:]

    # The restart rules' checks bite too: a pod restarted in place under a Pod failure policy, and a launcher
    # that would restart on a bad configuration.
    restarting = copy.deepcopy(runtime)
    launcher_rjob = next(r for r in restarting["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "launcher")
    launcher_rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    retrying = copy.deepcopy(runtime)
    launcher_rjob = next(r for r in retrying["spec"]["template"]["spec"]["replicatedJobs"] if r["name"] == "launcher")
    launcher_rjob["template"]["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] = [3, 4, 5]
    torch_runtime = render(["--platform", "usernetes", "--workers", "2", "--image", "x", "--max-restarts", "1"])[0]
    torch_retrying = copy.deepcopy(torch_runtime)
    torch_retrying["spec"]["template"]["spec"]["failurePolicy"]["rules"][0]["targetReplicatedJobs"] = ["launcher"]
    for what, broken_runtime in (("restartPolicy OnFailure with a Pod failure policy", restarting),
                                 ("a launcher that restarts on exit 2", retrying),
                                 ("a torch runtime whose fail-at-once rule targets no node", torch_retrying)):
        before = len(vm.failures)
        restart_rules("self-check", broken_runtime, 1 if broken_runtime is torch_retrying else 3)
        if len(vm.failures) == before:
            fail("self-check", f"the restart rules' checks accepted {what}")
        else:
            del vm.failures[before:]
    runtime_5 = render(["--launcher", "mpirun", "--platform", "usernetes", "--workers", "2", "--gpus-per-worker", "0",
                        "--image", "x", "--max-restarts", "5"])[0]
    restart_rules("--max-restarts 5", runtime_5, 5)

    broken = [
        (["--launcher", "mpirun", "--platform", "usernetes", "--workers", "2", "--max-restarts", "-1"],
         "--max-restarts must be 0 or more"),
        (["--platform", "usernetes", "--workers", "2", "--max-restarts", "-2"], "--max-restarts must be 0 or more"),
        (["--launcher", "srun", "--platform", "gke", "--workers", "2", "--gpus-per-worker", "0"], "unknown launcher 'srun'"),
        (["--platform", "gke", "--workers", "2", "--gpus-per-worker", "0", "--queue", "Team_A"],
         "--queue 'Team_A' is not a LocalQueue name"),
        (["--platform", "usernetes", "--workers", "2", "--name", "d" * 60], "at most 63 characters"),
        (["--launcher", "mpirun", "--platform", "gke", "--workers", "2"], "--accelerator is required"),
    ]
    for argv, message in broken:
        out = subprocess.run([sys.executable, RENDER, *argv, "--image", "x"], capture_output=True, text=True)
        if out.returncode != 2 or message not in out.stderr or out.stdout:
            fail(" ".join(argv), f"expected exit 2 and '{message}', got {out.returncode}: {out.stderr.strip()}")
    for renderer in (vm.RENDER, vm.RENDER_PYTORCHJOB):  # --queue on every renderer
        argv = ["--platform", "gke", "--workers", "2", "--gpus-per-worker", "0", "--image", "x", "--queue", "team-a"]
        if renderer == vm.RENDER_PYTORCHJOB:
            argv += ["--mode", "plain"]
        out = subprocess.run([sys.executable, renderer, *argv], capture_output=True, text=True)
        if out.returncode != 0 or yaml.safe_load(out.stdout)["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") != "team-a":
            fail(os.path.basename(renderer), f"--queue team-a did not label the job: {out.stderr.strip()}")

    launcher = run_as_pods(sys.argv[3]) if len(sys.argv) == 4 else None
    if vm.failures:
        print("\n".join(vm.failures[:40]))
        print(f"validate_trainjobs: {len(vm.failures)} failure(s) in {rendered} TrainJobs")
        return 1
    print(f"validate_trainjobs: {rendered} TrainJobs valid (strict Trainer v2.3 CRDs, Trainer's webhook and plugin rules, "
          f"dtrain contract, restricted PSS for OpenShift); the checks caught a misspelt field, a wrong runtimeRef, "
          f"a reserved variable, a runtime with two trainers and restart rules that would restart a bad configuration "
          f"or miss the torchrun nodes; "
          f"{len(broken)} broken inputs rejected"
          + (f"; the torchrun TrainJob's command trained as two pods with Trainer's PET_* variables ({launcher})"
             if launcher else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
