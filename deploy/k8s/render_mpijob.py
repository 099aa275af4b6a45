#!/usr/bin/env python3
"""Renders a Kubeflow MPIJob (kubeflow.org/v2beta1) that trains a dtrain workload, for one platform:

  gke        Google Kubernetes Engine: GPU nodes chosen by cloud.google.com/gke-accelerator
  usernetes  rootless Kubernetes (Usernetes): no cloud labels; NCCL and Open MPI kept on the pod
             interface of the flannel VXLAN overlay
  openshift  OpenShift: fits the restricted-v2 SCC (no fixed UID, non-root, no capabilities, no privilege
             escalation, seccomp RuntimeDefault)

Every variant starts from one base: a launcher (no GPU) that runs `time mpirun --hostfile
/etc/mpi/hostfile -np WORKERS x SLOTS dtrain ...` once the workers are ready, and workers that run the
image's non-root sshd on port 2222. A scaling study is one loop over --workers (see run_study.sh).

  render_mpijob.py --platform gke --workers 16 --accelerator nvidia-tesla-v100 --image REGISTRY/dtrain:cuda-volta > job.yaml

The image contract (deploy/docker): user `dtrain` (UID 1000, group 0) with home /home/dtrain, `dtrain` on
PATH, and `dtrain-entrypoint launcher|worker`. Which image for which GPU: cuda for T4, L4, A100, H100, H200
and B200; cuda-volta for P4, P100 and V100 (and T4 to H100); none for K80. A job whose --image tag names
one of dtrain's images that cannot run on --accelerator is refused. Bad input exits with status 2 and one line saying what
was wrong.
"""
import argparse
import re
import shlex
import sys

import yaml

PLATFORMS = ("gke", "usernetes", "openshift")
# GKE's accelerator names, with each GPU's CUDA compute capability.
GKE_ACCELERATORS = {
    "nvidia-tesla-k80": (3, 7), "nvidia-tesla-p4": (6, 1), "nvidia-tesla-p100": (6, 0),
    "nvidia-tesla-v100": (7, 0), "nvidia-tesla-t4": (7, 5), "nvidia-l4": (8, 9), "nvidia-tesla-a100": (8, 0),
    "nvidia-a100-80gb": (8, 0), "nvidia-h100-80gb": (9, 0), "nvidia-h100-mega-80gb": (9, 0),
    "nvidia-h200-141gb": (9, 0), "nvidia-b200": (10, 0),
}
# dtrain's CUDA images (scripts/build_image.sh KIND) and the GPU kernels (sm_XY as XY) of their LibTorch,
# as runtime/device/cuda_configs.cpp lists them from the libraries themselves (test/deploy/validate_manifests.py
# keeps the two equal).
CUDA_IMAGES = {
    "cuda": {"libtorch": "LibTorch 2.11.0 with CUDA 13.0", "kernels": (75, 80, 86, 90, 100, 120)},
    "cuda-volta": {"libtorch": "LibTorch 2.7.1 with CUDA 12.6", "kernels": (50, 60, 70, 75, 80, 86, 90)},
}
IMAGE_KINDS = ("cuda-volta", "cuda", "cpu")  # longest first: a tag ending in -cuda-volta is not "cuda"
HOME = "/home/dtrain"
SSH_PORT = 2222
# DNS-1035 label: the operator names pods <name>-launcher and <name>-worker-<i>.
NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# A LocalQueue's name is a DNS subdomain; as a label value it must also fit 63 characters.
QUEUE_RE = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class UsageError(Exception):
    pass


# Kubernetes' own limits, checked here so that a job the API server would refuse is refused at once,
# in one line: a namespace is a DNS-1123 label; replicas are int32.
NAMESPACE_RE = re.compile(r"^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
INT32_MAX = 2**31 - 1
# A resource quantity (k8s.io/apimachinery resource.Quantity): a decimal number with a binary (Ki, Mi,
# ...), decimal (m, k, M, ...) or exponent suffix.
QUANTITY_RE = re.compile(r"^\+?(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE][+-]?\d+)?$")
QUANTITY_SCALE = {"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
                  "E": 1e18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity_value(text):
    """The value of a Kubernetes quantity ('500m' = 0.5, '8Gi' = 8 * 2**30), or None when it is not one."""
    m = QUANTITY_RE.match(text)
    if not m:
        return None
    suffix = m.group(3) or ""
    if suffix[:1] in ("e", "E"):
        return float(m.group(1) + suffix)
    return float(m.group(1)) * QUANTITY_SCALE[suffix]


def check_quantity(flag, text, what, example):
    """`text`, a positive Kubernetes quantity for `flag`, else UsageError in one line."""
    value = quantity_value(text)
    if value is None or value <= 0:
        raise UsageError(f"{flag} must be a positive Kubernetes quantity of {what} (e.g. {example}), got '{text}'")


def check_int32(flag, value, least):
    """`value` of `flag` within [least, 2^31 - 1], the range of the API's int32 fields."""
    if value < least:
        raise UsageError(f"{flag} must be {'0 or more' if least == 0 else f'at least {least}'}, got {value}")
    if value > INT32_MAX:
        raise UsageError(f"{flag} must be at most {INT32_MAX} (an int32 in the Kubernetes API), got {value}")


class OneLineParser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2, as the renderers' own checks are (not the usage)."""

    def error(self, message):
        self.exit(2, f"{self.prog.removesuffix('.py')}: {message}\n")


# Of a pod's grace period, the seconds left after dtrain's --stop-timeout-s: the ranks' exit, mpirun's or
# torchrun's own, the container's end.
STOP_MARGIN_S = 10


def stop_args(args):
    """dtrain's flags for the pods' grace period (docs/failures.md, "Signals")."""
    return ["--stop-timeout-s", str(args.grace_s - STOP_MARGIN_S)]


def add_common_arguments(p, workers_help, batch_help, name_help):
    """The arguments every job renderer takes: platform, pods and GPUs, workload, image, resources."""
    p.add_argument("--platform", required=True, help="|".join(PLATFORMS))
    p.add_argument("--workers", type=int, required=True, help=workers_help)
    p.add_argument("--gpus-per-worker", type=int, default=1,
                   help="GPUs (and ranks) per worker; 0 trains on CPUs with one rank per worker")
    p.add_argument("--accelerator", default="", help="GKE GPU type: " + ", ".join(GKE_ACCELERATORS))
    p.add_argument("--workload", default="mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64, help=batch_help)
    p.add_argument("--image", required=True, help="the dtrain image (deploy/docker), e.g. ghcr.io/org/dtrain:cuda (T4 and newer GPUs) or "
                        "ghcr.io/org/dtrain:cuda-volta (P4, P100, V100)")
    p.add_argument("--name", default="", help=name_help)
    p.add_argument("--namespace", default="")
    p.add_argument("--dtrain-args", default="", help="more dtrain flags, e.g. '--precision bf16 --synthetic'")
    p.add_argument("--cpu", default="", help="CPU request per worker, e.g. 8 (default: none)")
    p.add_argument("--memory", default="", help="memory request per worker, e.g. 32Gi (default: none)")
    p.add_argument("--shm", default="8Gi", help="size limit of /dev/shm (NCCL fails with the 64 MB default)")
    p.add_argument("--queue", default="",
                   help="Kueue LocalQueue to submit the job to (the kueue.x-k8s.io/queue-name label); default: none")
    p.add_argument("--grace-s", type=int, default=60,
                   help="seconds from a pod's SIGTERM (deletion, eviction, preemption) to its SIGKILL: the pods' "
                        "terminationGracePeriodSeconds; dtrain gets all but 10 of them to save a checkpoint and "
                        "stop (--stop-timeout-s)")


def parse_args(argv):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(p, "worker pods (nodes), e.g. 2, 4, 8, 16, 32", "per rank",
                         "MPIJob name (default dtrain-<workload>-<platform>-<workers>)")
    p.add_argument("--clean-pod-policy", default="Running", choices=["Running", "None", "All"],
                   help="pods the operator deletes when the job ends; None keeps worker 0 and its run log for "
                        "`kubectl cp` (run_study.sh), until the job is deleted")
    return p.parse_args(argv)


def check_common(args):
    """The checks every dtrain job shares (platform, GPUs, accelerator, epochs, batch, image)."""
    if args.platform not in PLATFORMS:
        raise UsageError(f"unknown platform '{args.platform}'; expected one of: {', '.join(PLATFORMS)}")
    check_int32("--workers", args.workers, 1)
    if args.namespace and not NAMESPACE_RE.match(args.namespace):
        raise UsageError(f"--namespace '{args.namespace}' is not a Kubernetes namespace (a DNS-1123 label: lower case "
                         f"letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)")
    if args.cpu:
        check_quantity("--cpu", args.cpu, "CPU", "8, 7.5 or 500m")
    if args.memory:
        check_quantity("--memory", args.memory, "memory", "32Gi")
    check_quantity("--shm", args.shm, "memory", "8Gi")
    if not 0 <= args.gpus_per_worker <= 16:
        raise UsageError(f"--gpus-per-worker must be in [0, 16], got {args.gpus_per_worker}")
    if args.platform == "gke" and args.gpus_per_worker > 0:
        if not args.accelerator:
            raise UsageError("--accelerator is required for GKE GPU jobs; one of: " + ", ".join(GKE_ACCELERATORS))
        if args.accelerator not in GKE_ACCELERATORS:
            raise UsageError(f"unknown GKE accelerator '{args.accelerator}'; expected one of: {', '.join(GKE_ACCELERATORS)}")
    elif args.accelerator:
        raise UsageError(f"--accelerator applies to GKE GPU jobs only (platform {args.platform}, "
                         f"{args.gpus_per_worker} GPUs per worker)")
    check_int32("--epochs", args.epochs, 1)
    if args.grace_s > INT32_MAX:
        raise UsageError(f"--grace-s must be at most {INT32_MAX}, got {args.grace_s}")
    if args.grace_s < STOP_MARGIN_S + 5:
        raise UsageError(f"--grace-s must be at least {STOP_MARGIN_S + 5} (dtrain needs time to save a checkpoint "
                         f"and stop), got {args.grace_s}")
    check_int32("--batch-size", args.batch_size, 1)
    if not re.match(r"^[a-z0-9][a-z0-9_.-]*$", args.workload):
        raise UsageError(f"--workload '{args.workload}' is not a workload name")
    if not args.image or any(c.isspace() for c in args.image):
        raise UsageError(f"--image must be an image reference without spaces, got '{args.image}'")
    if args.queue and not QUEUE_RE.match(args.queue):
        raise UsageError(f"--queue '{args.queue}' is not a LocalQueue name (lower case letters, digits, '-' and '.', "
                         f"at most 63 characters)")
    check_image_for_accelerator(args)


def queue_labels(args):
    """The label that submits a job to a Kueue LocalQueue (Kueue admits MPIJob with mpi-operator >= 0.8,
    PyTorchJob, and TrainJob with Trainer 2.3 from Kueue 0.20 on; docs/deploy.md)."""
    return {"kueue.x-k8s.io/queue-name": args.queue} if args.queue else {}


def check_name(name, workers):
    """`name`, if it and its last pod's name are DNS-1035 labels the operators accept."""
    longest_pod = f"{name}-worker-{workers - 1}"
    if not NAME_RE.match(name) or len(longest_pod) > 63:
        raise UsageError(f"job name '{name}' must be a DNS-1035 label (lower case letters, digits, '-') and "
                         f"'{longest_pod}' at most 63 characters")
    return name


def check(args):
    check_common(args)
    return check_name(args.name or f"dtrain-{args.workload}-{args.platform}-{args.workers}".replace("_", "-").replace(".", "-"),
                      args.workers)


def image_kind(image):
    """Which of dtrain's images `image` is by its tag (cpu, cuda, cuda-volta; "v2-cuda-volta" too), or None."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2].partition("@")[0]
    return next((kind for kind in IMAGE_KINDS if tag == kind or tag.endswith("-" + kind)), None)


def images_for(capability):
    """dtrain's CUDA images with kernels for a GPU of `capability` (major, minor): a cubin for sm_XY runs on
    the same major at minor Y and later."""
    major, minor = capability
    return [kind for kind, image in CUDA_IMAGES.items()
            if any(arch // 10 == major and arch % 10 <= minor for arch in image["kernels"])]


def describe_images(kinds):
    return " or ".join(f"the {kind} image ({CUDA_IMAGES[kind]['libtorch']}; scripts/build_image.sh {kind})"
                       for kind in kinds)


def check_image_for_accelerator(args):
    """A GKE GPU job whose --image is one of dtrain's images that cannot run on --accelerator: an error
    naming the image that can (dtrain itself would stop at start-up on every rank)."""
    capability = GKE_ACCELERATORS.get(args.accelerator) if args.gpus_per_worker > 0 else None
    kind = image_kind(args.image)
    if not capability or kind is None:
        return
    major, minor = capability
    fits = images_for(capability)
    gpu = f"{args.accelerator} (compute capability {major}.{minor})"
    if not fits:
        raise UsageError(f"no dtrain image has GPU kernels for {gpu}: every LibTorch on PyPI starts at sm_50; run on "
                         f"another accelerator, or on CPUs with --gpus-per-worker 0 (docs/deploy.md)")
    if kind == "cpu":
        raise UsageError(f"--image '{args.image}' is dtrain's CPU image, which has no CUDA; {gpu} needs "
                         f"{describe_images(fits)}")
    if kind not in fits:
        raise UsageError(f"--image '{args.image}' is dtrain's {kind} image, whose {CUDA_IMAGES[kind]['libtorch']} has "
                         f"no kernels for {gpu}; use {describe_images(fits)} (docs/deploy.md)")


def compatibility_warnings(args):
    """What renders fine but may not run: said on stderr, the manifest is still printed. An --image whose
    tag does not say which of dtrain's images it is, on a GPU that only some of them can drive."""
    said = []
    capability = GKE_ACCELERATORS.get(args.accelerator) if args.gpus_per_worker > 0 else None
    if capability and image_kind(args.image) is None:
        major, minor = capability
        fits = images_for(capability)
        gpu = f"{args.accelerator} (compute capability {major}.{minor})"
        if not fits:
            said.append(f"no dtrain image has GPU kernels for {gpu} (every LibTorch on PyPI starts at sm_50); "
                        f"--image '{args.image}' must hold a dtrain built against a LibTorch with sm_{major}{minor} "
                        f"kernels (docs/deploy.md)")
        elif len(fits) < len(CUDA_IMAGES):
            said.append(f"{gpu} needs {describe_images(fits)}; make sure --image '{args.image}' is that one "
                        f"(docs/deploy.md)")
    return said


def security(platform):
    """Pod and container security contexts that the restricted Pod Security Standard accepts."""
    pod = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if platform != "openshift":  # OpenShift's SCC assigns the UID; the image copes with any UID in group 0
        pod.update({"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000})
    container = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return pod, container


def network_env(platform):
    env = [{"name": "NCCL_DEBUG", "value": "WARN"}]
    if platform == "usernetes":
        # The flannel VXLAN overlay is the pod's eth0; there is no InfiniBand and no host network.
        env += [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"}, {"name": "NCCL_IB_DISABLE", "value": "1"}]
    return env


def mpirun_command(args, ranks):
    mpirun = ["mpirun", "--hostfile", "/etc/mpi/hostfile", "-np", str(ranks), "--bind-to", "none",
              "--mca", "plm_rsh_args", f"-p {SSH_PORT} -o ConnectionAttempts=10",
              # mpirun finds a worker whose network died in about 16 s instead of Open MPI's 8 minutes
              # (docs/failures.md: a node whose link goes down).
              "--mca", "oob_tcp_keepalive_time", "10", "--mca", "oob_tcp_keepalive_intvl", "2",
              "--mca", "oob_tcp_keepalive_probes", "3"]
    if args.platform == "usernetes":
        mpirun += ["--mca", "btl_tcp_if_include", "eth0", "--mca", "oob_tcp_if_include", "eth0"]
    for var in network_env(args.platform):
        mpirun += ["-x", var["name"]]
    device = ["--device", "cuda", "--backend", "nccl"] if args.gpus_per_worker > 0 else ["--device", "cpu", "--backend", "mpi"]
    dtrain = ["dtrain", "--workload", args.workload, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              *device, "--log-dir", f"{HOME}/dtrain-logs", "--checkpoint-dir", f"{HOME}/dtrain-checkpoints",
              *stop_args(args)]
    dtrain += shlex.split(args.dtrain_args)
    # bash's `time` keyword prints the `real` line the analysis tools look for.
    return ["bash", "-c", "time " + shlex.join(mpirun + dtrain)]


def resources(args):
    """A worker's resources: the CPU and memory requests asked for, and its GPUs."""
    requests, limits = {}, {}
    if args.cpu:
        requests["cpu"] = args.cpu
    if args.memory:
        requests["memory"] = args.memory
    if args.gpus_per_worker > 0:
        limits["nvidia.com/gpu"] = args.gpus_per_worker
    return {k: v for k, v in (("requests", requests), ("limits", limits)) if v}


def place_on_gpus(args, pod):
    """On GKE, GPU pods go to nodes with the accelerator asked for, whose GPU taint they tolerate."""
    if args.platform == "gke" and args.gpus_per_worker > 0:
        pod["nodeSelector"] = {"cloud.google.com/gke-accelerator": args.accelerator}
        pod["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def render(args):
    name = check(args)
    slots = max(1, args.gpus_per_worker)
    pod_security, container_security = security(args.platform)
    labels = {"app.kubernetes.io/name": "dtrain", "dtrain/workload": args.workload, "dtrain/platform": args.platform,
              "dtrain/workers": str(args.workers)}
    if args.accelerator:
        labels["dtrain/accelerator"] = args.accelerator

    launcher = {
        "name": "launcher", "image": args.image, "imagePullPolicy": "IfNotPresent",
        "command": ["dtrain-entrypoint", "launcher"], "args": mpirun_command(args, args.workers * slots),
        "env": network_env(args.platform),
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        "securityContext": container_security,
    }
    worker = {
        "name": "worker", "image": args.image, "imagePullPolicy": "IfNotPresent",
        "command": ["dtrain-entrypoint", "worker"],
        "ports": [{"name": "ssh", "containerPort": SSH_PORT}],
        "securityContext": container_security,
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if resources(args):
        worker["resources"] = resources(args)
    worker_pod = {
        "securityContext": pod_security,
        # On a SIGTERM the entrypoint hands it to the ranks, which save a checkpoint and stop within it.
        "terminationGracePeriodSeconds": args.grace_s,
        "containers": [worker],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": args.shm}}],
    }
    place_on_gpus(args, worker_pod)

    metadata = {"name": name, "labels": {**labels, **queue_labels(args)}}
    if args.namespace:
        metadata["namespace"] = args.namespace
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": metadata,
        "spec": {
            "slotsPerWorker": slots,
            "mpiImplementation": "OpenMPI",
            "sshAuthMountPath": f"{HOME}/.ssh",
            "launcherCreationPolicy": "WaitForWorkersReady",
            # A failed timed run must not silently rerun; by default finished workers are removed, the
            # launcher (and its log) stays until the job is deleted.
            "runPolicy": {"cleanPodPolicy": args.clean_pod_policy, "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1, "restartPolicy": "Never",
                    "template": {"metadata": {"labels": labels},
                                 "spec": {"securityContext": pod_security, "terminationGracePeriodSeconds": args.grace_s,
                                          "containers": [launcher]}},
                },
                "Worker": {
                    "replicas": args.workers, "restartPolicy": "Never",
                    "template": {"metadata": {"labels": labels}, "spec": worker_pod},
                },
            },
        },
    }


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors for repeated blocks, long command lines kept on one line."""

    def ignore_aliases(self, data):
        return True


def to_yaml(job):
    return yaml.dump(job, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def run(program, parse, make_job, argv):
    """A renderer's main: the job as YAML on stdout (a list of documents as one YAML stream), warnings on
    stderr; exit 2 with one line on bad input."""
    args = parse(argv)
    try:
        job = make_job(args)
    except UsageError as e:
        print(f"{program}: {e}", file=sys.stderr)
        return 2
    for warning in compatibility_warnings(args):
        print(f"{program}: warning: {warning}", file=sys.stderr)
    sys.stdout.write("---\n".join(to_yaml(d) for d in (job if isinstance(job, list) else [job])))
    return 0


if __name__ == "__main__":
    sys.exit(run("render_mpijob", parse_args, render, sys.argv[1:]))
