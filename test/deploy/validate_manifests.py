#!/usr/bin/python3
"""Validates every MPIJob that deploy/k8s/render_mpijob.py can render, and every PyTorchJob of
deploy/k8s/render_pytorchjob.py, offline:

1. against the Kubeflow MPIJob CRD's OpenAPI schema (shared/schemas), in strict mode: every object that
   lists its properties rejects unknown ones, as kubeconform's strict mode does;
2. against the operator's own rules that the schema does not express (launcher with one replica, workers
   >= 1, restartPolicy, cleanPodPolicy, a container per template, DNS-1035 pod names);
3. against dtrain's contract: `time mpirun --hostfile /etc/mpi/hostfile -np workers x slots`, a launcher
   without GPUs, /dev/shm as a memory emptyDir, GKE node selector and toleration;
4. for OpenShift, against the restricted Pod Security Standard and the restricted-v2 SCC (no fixed UID).

PyTorchJobs likewise: the training operator's CRD (strict), its webhook's rules, dtrain's contract (torchrun
with Debian's log flags under elasticPolicy, one dtrain per pod without it) and, for OpenShift, restricted.
It also feeds the generators broken inputs and checks their errors.
Usage: validate_manifests.py MPIJOB_CRD PYTORCHJOB_CRD
"""
import copy
import itertools
import os
import re
import shlex
import subprocess
import sys

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RENDER = os.path.join(ROOT, "deploy", "k8s", "render_mpijob.py")
RENDER_PYTORCHJOB = os.path.join(ROOT, "deploy", "k8s", "render_pytorchjob.py")
RENDER_TRAINJOB = os.path.join(ROOT, "deploy", "k8s", "render_trainjob.py")
sys.path.insert(0, os.path.dirname(RENDER))
import render_mpijob  # noqa: E402
import render_pytorchjob  # noqa: E402

failures = []


def fail(what, message):
    failures.append(f"{what}: {message}")


def strict(schema):
    """Adds additionalProperties: false wherever properties are listed and nothing else is allowed."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node and \
                    not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


def operator_rules(what, job):
    spec = job["spec"]
    replicas = spec["mpiReplicaSpecs"]
    launcher, worker = replicas.get("Launcher"), replicas.get("Worker")
    if launcher is None or launcher.get("replicas") != 1:
        fail(what, "the Launcher replica spec must exist with replicas: 1")
    if worker is None or worker.get("replicas", 0) < 1:
        fail(what, "Worker.replicas must be >= 1")
    for role, r in replicas.items():
        if r.get("restartPolicy") not in ("Never", "OnFailure"):
            fail(what, f"{role}.restartPolicy must be Never or OnFailure, got {r.get('restartPolicy')}")
        if not r["template"]["spec"].get("containers"):
            fail(what, f"{role} template has no container")
    if spec["runPolicy"].get("cleanPodPolicy") not in ("None", "Running", "All"):
        fail(what, "runPolicy.cleanPodPolicy must be None, Running or All")
    if "backoffLimit" not in spec["runPolicy"]:
        fail(what, "runPolicy.backoffLimit must be set explicitly")
    last_worker = f"{job['metadata']['name']}-worker-{worker['replicas'] - 1}"
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", last_worker) or len(last_worker) > 63:
        fail(what, f"pod name {last_worker} is not a DNS-1035 label")


def stop_contract(what, job):
    """Every pod gives dtrain time to save a checkpoint and stop after a SIGTERM: a grace period longer
    than the --stop-timeout-s its dtrain command gets (docs/failures.md, "Signals")."""
    for role, r in replica_specs(job).items():
        pod = r["template"]["spec"]
        grace = pod.get("terminationGracePeriodSeconds")
        if not isinstance(grace, int) or grace < 30:
            fail(what, f"{role} needs terminationGracePeriodSeconds >= 30 (Kubernetes' default), got {grace}")
            continue
        args = pod["containers"][0].get("args", [])
        words = shlex.split(args[2]) if len(args) > 2 else []
        if "dtrain" not in words:  # an MPIJob's workers run sshd; their ranks come with the launcher's flags
            continue
        if "--stop-timeout-s" not in words:
            fail(what, f"{role}: dtrain needs --stop-timeout-s within the pod's grace period")
            continue
        stop = float(words[words.index("--stop-timeout-s") + 1])
        if not 0 < stop <= grace - 5:
            fail(what, f"{role}: --stop-timeout-s {stop} leaves less than 5 s of the {grace} s grace period")


def dtrain_contract(what, job, platform, workers, gpus, accelerator):
    stop_contract(what, job)
    spec = job["spec"]
    slots = spec["slotsPerWorker"]
    if slots != max(1, gpus):
        fail(what, f"slotsPerWorker {slots}, expected {max(1, gpus)}")
    if spec.get("launcherCreationPolicy") != "WaitForWorkersReady":
        fail(what, "launcherCreationPolicy must be WaitForWorkersReady")
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    script = launcher["args"]
    if script[:2] != ["bash", "-c"] or not script[2].startswith("time mpirun "):
        fail(what, f"launcher must run `bash -c 'time mpirun ...'`, got {script}")
    words = shlex.split(script[2])
    if words[words.index("--hostfile") + 1] != "/etc/mpi/hostfile":
        fail(what, "mpirun must use --hostfile /etc/mpi/hostfile")
    if words[words.index("-np") + 1] != str(workers * slots):
        fail(what, f"-np {words[words.index('-np') + 1]}, expected workers x slots = {workers * slots}")
    if "nvidia.com/gpu" in str(launcher.get("resources", {})):
        fail(what, "the launcher must not request GPUs")
    expected_device = "cuda" if gpus else "cpu"
    if words[words.index("--device") + 1] != expected_device:
        fail(what, f"dtrain --device should be {expected_device}")
    pod = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    worker = pod["containers"][0]
    gpu_limit = worker.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
    if gpu_limit != gpus:
        fail(what, f"worker nvidia.com/gpu limit {gpu_limit}, expected {gpus}")
    shm = [v for v in pod.get("volumes", []) if v.get("emptyDir", {}).get("medium") == "Memory"]
    mounts = [m for m in worker.get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]
    if not shm or not mounts or mounts[0]["name"] != shm[0]["name"]:
        fail(what, "/dev/shm must be a memory emptyDir")
    selector = pod.get("nodeSelector", {})
    if platform == "gke" and gpus:
        if selector.get("cloud.google.com/gke-accelerator") != accelerator:
            fail(what, f"GKE node selector must pick {accelerator}")
        if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", [])):
            fail(what, "GKE GPU workers need the nvidia.com/gpu toleration")
    elif any(k.startswith("cloud.google.com/") for k in selector):
        fail(what, f"{platform} must not use GKE node labels")
    if platform == "usernetes" and "NCCL_SOCKET_IFNAME" not in script[2]:
        fail(what, "usernetes must forward NCCL_SOCKET_IFNAME to the ranks")
    if not spec["sshAuthMountPath"].startswith("/home/dtrain/"):
        fail(what, "sshAuthMountPath must be under the user's home")


ALLOWED_VOLUME_KEYS = {"name", "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                       "persistentVolumeClaim", "projected", "secret"}


def replica_specs(job):
    spec = job["spec"]
    return spec["mpiReplicaSpecs"] if job["kind"] == "MPIJob" else spec["pytorchReplicaSpecs"]


def restricted_pss(what, job):
    """The restricted Pod Security Standard (v1.28) for every pod template, plus restricted-v2's no-UID rule."""
    for role, replica in replica_specs(job).items():
        restricted_pod(f"{what} {role}", replica["template"]["spec"])


def restricted_pod(where, pod):
    """restricted_pss for one pod spec."""
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            fail(where, f"{key} is not allowed")
    pod_sc = pod.get("securityContext", {})
    for volume in pod.get("volumes", []):
        if not set(volume) <= ALLOWED_VOLUME_KEYS:
            fail(where, f"volume type {set(volume) - ALLOWED_VOLUME_KEYS} is not allowed")
    if "runAsUser" in pod_sc or "fsGroup" in pod_sc or "runAsGroup" in pod_sc:
        fail(where, "restricted-v2 assigns UIDs and groups: no runAsUser/runAsGroup/fsGroup")
    if pod_sc.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        fail(where, "pod seccompProfile must be RuntimeDefault or Localhost")
    for c in pod["containers"] + pod.get("initContainers", []):
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            fail(where, "privileged containers are not allowed")
        if sc.get("allowPrivilegeEscalation") is not False:
            fail(where, "allowPrivilegeEscalation must be false")
        caps = sc.get("capabilities", {})
        if caps.get("drop") != ["ALL"] or set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            fail(where, "capabilities must drop ALL and add at most NET_BIND_SERVICE")
        if not (sc.get("runAsNonRoot") or pod_sc.get("runAsNonRoot")):
            fail(where, "runAsNonRoot must be true")
        if sc.get("runAsUser") == 0 or "runAsUser" in sc:
            fail(where, "no runAsUser under restricted-v2")
        if any(p.get("hostPort") for p in c.get("ports", [])):
            fail(where, "hostPort is not allowed")


def render(argv):
    args = render_mpijob.parse_args(argv)
    return render_mpijob.render(args)


def webhook_rules(what, job):
    """The training operator's PyTorchJob webhook (v1.9.0), which the CRD's schema does not express."""
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    if set(replicas) - {"Master", "Worker"}:
        fail(what, f"replica types must be Master and Worker, got {sorted(replicas)}")
    for role, r in replicas.items():
        containers = r["template"]["spec"].get("containers", [])
        if not any(c.get("name") == "pytorch" and c.get("image") for c in containers):
            fail(what, f"{role} needs a container named pytorch with an image")
        if r.get("restartPolicy") not in ("Never", "OnFailure", "Always", "ExitCode"):
            fail(what, f"{role}.restartPolicy {r.get('restartPolicy')}")
    if "Master" in replicas and replicas["Master"].get("replicas") != 1:
        fail(what, "Master must have exactly 1 replica")
    if "Worker" in replicas and replicas["Worker"].get("replicas", 0) < 1:
        fail(what, "Worker must have at least 1 replica")
    if "elasticPolicy" in spec:
        if "Worker" not in replicas:
            fail(what, "an elasticPolicy needs a Worker replica spec")
        if spec["elasticPolicy"].get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
            fail(what, "elasticPolicy.nProcPerNode and nprocPerNode must not both be set")
    workers = replicas.get("Worker", {}).get("replicas", 0)
    last_pod = f"{job['metadata']['name']}-worker-{max(workers - 1, 0)}"
    if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", last_pod) or len(last_pod) > 63:
        fail(what, f"pod name {last_pod} is not a DNS-1035 label")


def pytorchjob_contract(what, job, platform, mode, workers, min_workers, gpus, accelerator):
    stop_contract(what, job)
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    for role, r in replicas.items():
        pod = r["template"]["spec"]
        container = pod["containers"][0]
        script = container["args"]
        if script[:2] != ["bash", "-c"] or not script[2].startswith("time "):
            fail(what, f"{role} must run `bash -c 'time ...'`, got {script}")
        words = shlex.split(script[2])[1:]
        if mode == "elastic":
            if words[0] != "torchrun" or "--no_python" not in words or words[words.index("--no_python") + 1] != "dtrain":
                fail(what, f"elastic pods must run torchrun --no_python dtrain, got {words[:8]}")
            for flag, value in (("--redirects", "1"), ("--tee", "1")):
                if flag not in words or words[words.index(flag) + 1] != value or "--log_dir" not in words:
                    fail(what, "Debian 12's torchrun needs --log_dir, --redirects 1 and --tee 1")
            if "--checkpoint-every-steps" not in words:
                fail(what, "elastic jobs must checkpoint inside epochs")
            mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
            claims = [v for v in pod.get("volumes", []) if "persistentVolumeClaim" in v]
            if "/home/dtrain/dtrain-checkpoints" not in mounts or not claims or \
                    mounts["/home/dtrain/dtrain-checkpoints"] != claims[0]["name"]:
                fail(what, "elastic pods must mount the checkpoint claim at ~/dtrain-checkpoints")
            # The claim's root is root's and group-writable (fsGroup): dtrain refuses it unless told that the
            # directory is shared; a directory of the job's own, made by dtrain, it takes.
            expected_dir = f"/home/dtrain/dtrain-checkpoints/{job['metadata']['name']}"
            if words[words.index("--checkpoint-dir") + 1] != expected_dir:
                fail(what, f"elastic pods keep their checkpoints in {expected_dir}, a directory dtrain makes on the claim")
        elif words[0] != "dtrain":
            fail(what, f"plain pods run dtrain directly, got {words[:3]}")
        expected_device = "cuda" if gpus else "cpu"
        if words[words.index("--device") + 1] != expected_device:
            fail(what, f"dtrain --device should be {expected_device}")
        expected_backend = "nccl" if gpus else "gloo"
        if words[words.index("--backend") + 1] != expected_backend:
            fail(what, f"dtrain --backend should be {expected_backend} under torchrun's bootstrap")
        gpu_limit = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0)
        if gpu_limit != gpus:
            fail(what, f"{role} nvidia.com/gpu limit {gpu_limit}, expected {gpus}")
        ports = [p for p in container.get("ports", []) if p.get("name") == "pytorchjob-port"]
        if not ports:
            fail(what, f"{role} must declare the pytorchjob-port the operator's services forward")
        if platform == "gke" and gpus:
            if pod.get("nodeSelector", {}).get("cloud.google.com/gke-accelerator") != accelerator:
                fail(what, f"GKE node selector must pick {accelerator}")
        elif any(k.startswith("cloud.google.com/") for k in pod.get("nodeSelector", {})):
            fail(what, f"{platform} must not use GKE node labels")
    if mode == "elastic":
        policy = spec.get("elasticPolicy", {})
        if set(replicas) != {"Worker"} or replicas["Worker"]["replicas"] != workers:
            fail(what, f"elastic jobs are {workers} Worker pods, got {sorted(replicas)}")
        if policy.get("rdzvBackend") != "c10d" or policy.get("minReplicas") != min_workers or \
                policy.get("maxReplicas") != workers or policy.get("maxRestarts", -1) < 0:
            fail(what, f"elasticPolicy {policy} for {min_workers}..{workers} pods")
        if spec.get("nprocPerNode") != str(max(1, gpus)):
            fail(what, f"nprocPerNode {spec.get('nprocPerNode')}, expected {max(1, gpus)}")
    else:
        total = replicas["Master"]["replicas"] + replicas.get("Worker", {}).get("replicas", 0)
        if "elasticPolicy" in spec or total != workers:
            fail(what, f"plain jobs are a Master and {workers - 1} Workers, got {total} pods")
    if spec["runPolicy"].get("backoffLimit") != 0:
        fail(what, "runPolicy.backoffLimit must be 0: restarts are torchrun's")


def validate_pytorchjobs(crd_path):
    crd = yaml.safe_load(open(crd_path))
    validator = jsonschema.Draft7Validator(strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]))
    rendered = 0
    for platform, mode, workers, gpus in itertools.product(render_pytorchjob.PLATFORMS, render_pytorchjob.MODES,
                                                           (1, 2, 4, 8, 16, 32), (0, 1, 4, 8)):
        if mode == "plain" and gpus > 1:
            continue
        accelerators = ("nvidia-l4", "nvidia-h100-80gb") if platform == "gke" and gpus else ("",)
        for accelerator in accelerators:
            argv = ["--platform", platform, "--mode", mode, "--workers", str(workers), "--gpus-per-worker", str(gpus),
                    "--image", "registry.example.com/dtrain:1", "--epochs", "3"]
            min_workers = max(1, workers // 2)
            if mode == "elastic":
                argv += ["--min-workers", str(min_workers), "--checkpoint-pvc", "dtrain-checkpoints"]
            argv += ["--accelerator", accelerator] if accelerator else []
            what = "pytorchjob " + " ".join(argv)
            job = yaml.safe_load(render_pytorchjob.to_yaml(render_pytorchjob.render(render_pytorchjob.parse_args(argv))))
            rendered += 1
            for error in validator.iter_errors(job):
                fail(what, f"schema: {'/'.join(map(str, error.absolute_path))}: {error.message}")
            webhook_rules(what, job)
            pytorchjob_contract(what, job, platform, mode, workers, min_workers, gpus, accelerator)
            if platform == "openshift":
                restricted_pss(what, job)

    # The checks must catch mistakes: a misspelled policy field, a container the operator cannot find.
    bad = render_pytorchjob.render(render_pytorchjob.parse_args(
        ["--platform", "usernetes", "--workers", "2", "--gpus-per-worker", "0", "--image", "x", "--checkpoint-pvc", "c"]))
    bad["spec"]["elasticPolicy"]["minreplicas"] = 1
    if not list(validator.iter_errors(bad)):
        fail("pytorchjob self-check", "strict schema accepted a misspelled elasticPolicy.minreplicas")
    before = len(failures)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "dtrain"
    webhook_rules("pytorchjob self-check", bad)
    if len(failures) == before:
        fail("pytorchjob self-check", "the webhook rules accepted a job without a pytorch container")
    else:
        del failures[before:]

    broken = [
        (["--platform", "gke", "--workers", "4", "--accelerator", "nvidia-l4"], "elastic jobs need --checkpoint-pvc"),
        (["--platform", "gke", "--workers", "4", "--min-workers", "5", "--accelerator", "nvidia-l4",
          "--checkpoint-pvc", "c"], "--min-workers must be from 1 to --workers (4), got 5"),
        (["--platform", "usernetes", "--mode", "plain", "--workers", "2", "--min-workers", "1", "--gpus-per-worker", "0"],
         "--min-workers applies to elastic jobs only"),
        (["--platform", "usernetes", "--mode", "plain", "--workers", "2", "--gpus-per-worker", "4"],
         "plain jobs run one dtrain process per pod"),
        (["--platform", "openshift", "--mode", "batch", "--workers", "2"], "unknown mode 'batch'; expected one of: elastic, plain"),
    ]
    for argv, message in broken:
        out = subprocess.run([sys.executable, RENDER_PYTORCHJOB, *argv, "--image", "x"], capture_output=True, text=True)
        if out.returncode != 2 or message not in out.stderr or out.stdout:
            fail(" ".join(argv), f"expected exit 2 and '{message}', got {out.returncode}: {out.stderr.strip()}")
    return rendered, len(broken)


def main():
    if len(sys.argv) != 3 or not all(os.path.isfile(p) for p in sys.argv[1:]):
        print(f"validate_manifests: the CRD schemas were not found at {sys.argv[1:]}; pass "
              f"shared/schemas/mpijob-v2beta1-crd.yaml and shared/schemas/pytorchjob-v1-crd.yaml "
              f"(CMake: -DDTRAIN_SCHEMAS_DIR=<dir>)")
        return 1
    crd = yaml.safe_load(open(sys.argv[1]))
    schema = strict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    validator = jsonschema.Draft7Validator(schema)
    rendered = 0
    for platform, workers, gpus in itertools.product(render_mpijob.PLATFORMS, (1, 2, 4, 8, 16, 32), (0, 1, 4, 8)):
        accelerators = render_mpijob.GKE_ACCELERATORS if platform == "gke" and gpus else ("",)
        for accelerator in accelerators:
            argv = ["--platform", platform, "--workers", str(workers), "--gpus-per-worker", str(gpus),
                    "--image", "registry.example.com/dtrain:1", "--epochs", "3", "--batch-size", "128"]
            argv += ["--accelerator", accelerator] if accelerator else []
            what = " ".join(argv)
            # Round-trip through the YAML the script prints, as kubectl would read it.
            job = yaml.safe_load(render_mpijob.to_yaml(render(argv)))
            rendered += 1
            for error in validator.iter_errors(job):
                fail(what, f"schema: {'/'.join(map(str, error.absolute_path))}: {error.message}")
            operator_rules(what, job)
            dtrain_contract(what, job, platform, workers, gpus, accelerator)
            if platform == "openshift":
                restricted_pss(what, job)

    # The study's flagship: 16 GKE nodes with V100s, through the script's command line.
    out = subprocess.run([sys.executable, RENDER, "--platform", "gke", "--workers", "16", "--accelerator",
                          "nvidia-tesla-v100", "--image", "gcr.io/project/dtrain:cuda-volta"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        fail("gke v100 x16", out.stderr)
    else:
        job = yaml.safe_load(out.stdout)
        errors = list(validator.iter_errors(job))
        if errors or job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] != 16:
            fail("gke v100 x16", f"{len(errors)} schema errors")

    # The studies' other workloads run by name: the GCN on GKE, BigGAN on 2 GPUs on OpenShift (the
    # HPC-vs-OpenShift study), each named in the job's name, label and dtrain command.
    for workload, argv in (("gcn", ["--platform", "gke", "--workers", "2", "--accelerator", "nvidia-tesla-t4"]),
                           ("biggan", ["--platform", "openshift", "--workers", "1", "--gpus-per-worker", "2",
                                       "--dtrain-args", "--sample-every 10"])):
        argv = [*argv, "--workload", workload, "--image", "registry.example.com/dtrain:1"]
        job = yaml.safe_load(render_mpijob.to_yaml(render(argv)))
        for error in validator.iter_errors(job):
            fail(workload, f"schema: {'/'.join(map(str, error.absolute_path))}: {error.message}")
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
        command = " ".join(launcher.get("command", []) + launcher.get("args", []))
        if f"--workload {workload} " not in command or not job["metadata"]["name"].startswith(f"dtrain-{workload}-") or \
                job["metadata"]["labels"].get("dtrain/workload") != workload:
            fail(workload, f"job {job['metadata']['name']} does not run the workload: {command}")

    # Which image for which GPU. One of dtrain's images (by its tag) that cannot run on the accelerator is
    # refused, naming the one that can; an image whose tag does not say which it is renders, with a warning
    # when only some of dtrain's images can drive that GPU; K80 has none.
    for accelerator, image, code, said in (
            ("nvidia-tesla-v100", "gcr.io/p/dtrain:cuda", 2,
             "--image 'gcr.io/p/dtrain:cuda' is dtrain's cuda image, whose LibTorch 2.11.0 with CUDA 13.0 has no "
             "kernels for nvidia-tesla-v100 (compute capability 7.0); use the cuda-volta image (LibTorch 2.7.1 with "
             "CUDA 12.6; scripts/build_image.sh cuda-volta)"),
            ("nvidia-tesla-v100", "gcr.io/p/dtrain:cuda-volta", 0, ""),
            ("nvidia-tesla-p100", "gcr.io/p/dtrain:v3-cuda-volta", 0, ""),
            ("nvidia-tesla-p4", "x", 0, "warning: nvidia-tesla-p4 (compute capability 6.1) needs the cuda-volta image"),
            ("nvidia-tesla-t4", "x", 0, ""),
            ("nvidia-tesla-t4", "r/dtrain:cuda-volta", 0, ""),
            ("nvidia-h100-80gb", "r/dtrain:cuda@sha256:0123", 0, ""),
            ("nvidia-b200", "r/dtrain:cuda-volta", 2, "has no kernels for nvidia-b200 (compute capability 10.0); use "
                                                      "the cuda image (LibTorch 2.11.0 with CUDA 13.0"),
            ("nvidia-b200", "x", 0, "warning: nvidia-b200 (compute capability 10.0) needs the cuda image"),
            ("nvidia-tesla-k80", "r/dtrain:cuda", 2, "no dtrain image has GPU kernels for nvidia-tesla-k80 (compute "
                                                     "capability 3.7)"),
            ("nvidia-tesla-k80", "x", 0, "warning: no dtrain image has GPU kernels for nvidia-tesla-k80"),
            ("nvidia-l4", "r/dtrain:cpu", 2, "is dtrain's CPU image, which has no CUDA; nvidia-l4 (compute capability "
                                             "8.9) needs the cuda image (LibTorch 2.11.0 with CUDA 13.0; "
                                             "scripts/build_image.sh cuda) or the cuda-volta image")):
        for script, more in ((RENDER, []), (RENDER_PYTORCHJOB, ["--checkpoint-pvc", "ck"])):
            out = subprocess.run([sys.executable, script, "--platform", "gke", "--workers", "2", "--accelerator",
                                  accelerator, "--image", image, *more], capture_output=True, text=True)
            rendered_ok = out.stdout.startswith("apiVersion:")
            if out.returncode != code or rendered_ok != (code == 0) or (said and said not in out.stderr) or \
                    (not said and out.stderr):
                fail(f"{os.path.basename(script)} gke {accelerator} {image}",
                     f"exit {out.returncode} (expected {code}), expected stderr {said!r}, got {out.stderr!r}")

    # What the API server would refuse is refused by every renderer at once, in one line, exit 2: a namespace
    # that is not a DNS-1123 label, CPU, memory and /dev/shm that are not Kubernetes quantities, counts
    # beyond the API's int32 fields, and argparse's own errors (one line, not the usage).
    for args, said in ((["--namespace", "Team_A"], "--namespace 'Team_A' is not a Kubernetes namespace (a DNS-1123 label"),
                       (["--namespace", "a" * 64], "is not a Kubernetes namespace"),
                       (["--cpu", "eight"], "--cpu must be a positive Kubernetes quantity of CPU (e.g. 8, 7.5 or 500m), got 'eight'"),
                       (["--cpu", "-2"], "--cpu must be a positive Kubernetes quantity"),
                       (["--memory", "32GB"], "--memory must be a positive Kubernetes quantity of memory (e.g. 32Gi), got '32GB'"),
                       (["--shm", "0"], "--shm must be a positive Kubernetes quantity of memory (e.g. 8Gi), got '0'"),
                       (["--workers", "4294967296"], "--workers must be at most 2147483647 (an int32 in the Kubernetes API)"),
                       (["--epochs", "3000000000"], "--epochs must be at most 2147483647"),
                       (["--workers", "two"], "argument --workers: invalid int value: 'two'")):
        for script, more in ((RENDER, []), (RENDER_PYTORCHJOB, ["--checkpoint-pvc", "ck"]), (RENDER_TRAINJOB, [])):
            argv = ["--platform", "gke", "--workers", "2", "--gpus-per-worker", "0", "--image", "r/dtrain:cpu", *more, *args]
            out = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True)
            name = os.path.basename(script).removesuffix(".py")
            if out.returncode != 2 or out.stdout or out.stderr.count("\n") != 1 or \
                    not out.stderr.startswith(f"{name}: ") or said not in out.stderr:
                fail(f"{name} {' '.join(args)}", f"exit {out.returncode}, stderr {out.stderr!r} (expected one line with {said!r})")
    for quantity in ("8", "7.5", "500m", "32Gi", "1e3", "1.5Gi", ".5"):
        out = subprocess.run([sys.executable, RENDER, "--platform", "gke", "--workers", "2", "--gpus-per-worker", "0",
                              "--image", "r/dtrain:cpu", "--cpu", quantity, "--memory", "32Gi", "--namespace", "team-a"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"render_mpijob --cpu {quantity}", f"a valid quantity refused: {out.stderr}")

    # The renderers' image table is runtime/device/cuda_configs.cpp's, which the unit tests hold to the real
    # libraries: image kind, LibTorch and CUDA version, kernels.
    source = open(os.path.join(ROOT, "runtime", "device", "cuda_configs.cpp")).read()
    configs = re.findall(r'\{"(\w+)", "([\d.]+)", "([\d.]+)", "([\w-]+)", cubins\(\{([\d, ]+)\}\)\}', source)
    from_source = {kind: {"libtorch": f"LibTorch {torch} with CUDA {cuda}",
                          "kernels": tuple(int(a) for a in kernels.split(", "))}
                   for _, torch, cuda, kind, kernels in configs}
    if len(configs) < 2 or from_source != render_mpijob.CUDA_IMAGES:
        fail("image table", f"render_mpijob.CUDA_IMAGES {render_mpijob.CUDA_IMAGES} differs from "
                            f"runtime/device/cuda_configs.cpp {from_source}")

    # The checks themselves must catch mistakes: a misspelled field and a wrong -np.
    bad = render(["--platform", "gke", "--workers", "2", "--accelerator", "nvidia-l4", "--image", "x"])
    bad["spec"]["runPolicy"]["cleanpodpolicy"] = "All"
    if not list(validator.iter_errors(bad)):
        fail("self-check", "strict schema accepted a misspelled runPolicy.cleanpodpolicy")
    before = len(failures)
    bad = render(["--platform", "openshift", "--workers", "2", "--image", "x"])
    bad["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["securityContext"]["runAsUser"] = 0
    restricted_pss("self-check", bad)
    if len(failures) == before:
        fail("self-check", "the restricted checks accepted runAsUser 0")
    else:
        del failures[before:]

    # A pod whose grace period would end before dtrain's stop timeout.
    before = len(failures)
    bad = render(["--platform", "usernetes", "--workers", "2", "--image", "x", "--grace-s", "60"])
    bad["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["terminationGracePeriodSeconds"] = 40
    stop_contract("self-check", bad)
    if len(failures) == before:
        fail("self-check", "the stop checks accepted a 40 s grace period for --stop-timeout-s 50")
    else:
        del failures[before:]

    broken = [
        (["--platform", "usernetes", "--workers", "2", "--grace-s", "12"], "--grace-s must be at least 15"),
        (["--platform", "aks", "--workers", "2"], "unknown platform 'aks'; expected one of: gke, usernetes, openshift"),
        (["--platform", "gke", "--workers", "0", "--accelerator", "nvidia-l4"], "--workers must be at least 1, got 0"),
        (["--platform", "gke", "--workers", "2", "--accelerator", "nvidia-tesla-k99"],
         "unknown GKE accelerator 'nvidia-tesla-k99'; expected one of: nvidia-tesla-k80"),
        (["--platform", "gke", "--workers", "2"], "--accelerator is required for GKE GPU jobs"),
        (["--platform", "openshift", "--workers", "2", "--accelerator", "nvidia-l4"],
         "--accelerator applies to GKE GPU jobs only"),
        (["--platform", "usernetes", "--workers", "2", "--epochs", "0"], "--epochs must be at least 1, got 0"),
        (["--platform", "usernetes", "--workers", "2", "--name", "Dtrain_Job"], "must be a DNS-1035 label"),
    ]
    for argv, message in broken:
        out = subprocess.run([sys.executable, RENDER, *argv, "--image", "x"], capture_output=True, text=True)
        if out.returncode != 2 or message not in out.stderr or out.stdout:
            fail(" ".join(argv), f"expected exit 2 and '{message}', got {out.returncode}: {out.stderr.strip()}")

    pytorchjobs, broken_pytorchjobs = validate_pytorchjobs(sys.argv[2])
    if failures:
        print("\n".join(failures[:40]))
        print(f"validate_manifests: {len(failures)} failure(s) in {rendered} MPIJobs and {pytorchjobs} PyTorchJobs")
        return 1
    print(f"validate_manifests: {rendered} MPIJobs and {pytorchjobs} PyTorchJobs valid (strict CRD schema, operator "
          f"rules, dtrain contract, restricted PSS for OpenShift); {len(broken) + broken_pytorchjobs} broken inputs rejected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
