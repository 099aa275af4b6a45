#!/usr/bin/env python3
"""Renders a Kubeflow PyTorchJob (kubeflow.org/v1, the training operator) that trains a dtrain workload,
for the same platforms as render_mpijob.py (gke, usernetes, openshift) and from the same images:

  elastic  Worker pods only, `elasticPolicy` with the c10d rendezvous: each pod runs one torchrun agent
           (`torchrun --no_python dtrain ...`), which the operator configures through PET_NNODES
           (--min-workers:--workers), PET_RDZV_ENDPOINT, PET_RDZV_ID, PET_MAX_RESTARTS and
           PET_NPROC_PER_NODE. A lost pod shrinks the job down to --min-workers, a new one grows it back;
           dtrain resumes from its checkpoints with the global batch held (docs/elastic.md). Rank 0 may
           land on any pod after a restart, so the checkpoints must be on a volume every pod mounts:
           --checkpoint-pvc names a ReadWriteMany PersistentVolumeClaim.
  plain    a Master and --workers - 1 Workers, one dtrain process per pod and no torchrun: dtrain
           bootstraps from the RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT the operator sets.

  render_pytorchjob.py --platform gke --mode elastic --workers 8 --min-workers 4 \\
      --accelerator nvidia-l4 --image IMAGE --checkpoint-pvc dtrain-checkpoints > job.yaml

Every pod's command is wrapped in bash's `time`, for the analysis tools that read its `real` line. Bad
input exits with status 2 and one line saying what was wrong.
"""
import argparse
import shlex
import sys

from render_mpijob import (OneLineParser, check_int32, HOME, NAME_RE, PLATFORMS, UsageError, add_common_arguments, check_common, check_name, stop_args,
                           network_env, place_on_gpus, queue_labels, resources, run, security, to_yaml)

MODES = ("elastic", "plain")
# The training operator's defaults: the Master's service port and the c10d rendezvous port.
MASTER_PORT = 23456
RDZV_PORT = 29400
CHECKPOINTS = f"{HOME}/dtrain-checkpoints"
# Debian 12's torchrun crashes on Python 3.11 without these (docs/elastic.md).
TORCHRUN_LOG_FLAGS = ["--log_dir", f"{HOME}/torchrun-logs", "--redirects", "1", "--tee", "1"]


def parse_args(argv):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(p, "pods (nodes); elastic: the most the job grows to (maxReplicas)",
                         "per rank; elastic: the most a rank takes per pass",
                         "PyTorchJob name (default dtrain-<workload>-<platform>-<mode>-<workers>)")
    p.add_argument("--mode", default="elastic", help="|".join(MODES))
    p.add_argument("--min-workers", type=int, default=0,
                   help="elastic: the fewest pods the job trains on (minReplicas; default: --workers)")
    p.add_argument("--max-restarts", type=int, default=3, help="elastic: restarts of the worker group after failures")
    p.add_argument("--checkpoint-every-steps", type=int, default=100,
                   help="elastic: checkpoint every this many optimizer steps, so a restart loses at most that")
    p.add_argument("--checkpoint-pvc", default="",
                   help="a ReadWriteMany PersistentVolumeClaim mounted at ~/dtrain-checkpoints on every pod (the "
                        "checkpoints go to the job's own directory on it, ~/dtrain-checkpoints/<job name>) "
                        "(required for elastic jobs)")
    return p.parse_args(argv)


def check(args):
    check_common(args)
    if args.mode not in MODES:
        raise UsageError(f"unknown mode '{args.mode}'; expected one of: {', '.join(MODES)}")
    if args.mode == "elastic":
        if args.min_workers == 0:
            args.min_workers = args.workers
        if not 1 <= args.min_workers <= args.workers:
            raise UsageError(f"--min-workers must be from 1 to --workers ({args.workers}), got {args.min_workers}")
        check_int32("--max-restarts", args.max_restarts, 0)
        if args.checkpoint_every_steps < 1:
            raise UsageError(f"--checkpoint-every-steps must be at least 1, got {args.checkpoint_every_steps}")
        if not args.checkpoint_pvc:
            raise UsageError("elastic jobs need --checkpoint-pvc: after a restart rank 0 may run on another pod, "
                             "and every pod must see the checkpoints (a ReadWriteMany PersistentVolumeClaim)")
    elif args.min_workers:
        raise UsageError("--min-workers applies to elastic jobs only (--mode elastic)")
    if args.mode == "plain" and args.gpus_per_worker > 1:
        raise UsageError("plain jobs run one dtrain process per pod, so one GPU per pod at most; use --mode elastic "
                         "(torchrun starts one process per GPU) or render_mpijob.py")
    if args.checkpoint_pvc and not NAME_RE.match(args.checkpoint_pvc.replace(".", "-")):
        raise UsageError(f"--checkpoint-pvc '{args.checkpoint_pvc}' is not a PersistentVolumeClaim name")
    default = f"dtrain-{args.workload}-{args.platform}-{args.mode}-{args.workers}".replace("_", "-").replace(".", "-")
    return check_name(args.name or default, args.workers)


def dtrain_command(args, name):
    device = ["--device", "cuda", "--backend", "nccl"] if args.gpus_per_worker > 0 else ["--device", "cpu", "--backend", "gloo"]
    # A directory of the job's own on the claim, made by dtrain: the claim's root belongs to root (and the
    # pods' fsGroup, group-writable), which dtrain refuses as a directory others can write; the one it
    # makes belongs to the pods' user, the same in every pod of the namespace.
    dtrain = ["dtrain", "--workload", args.workload, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              *device, "--log-dir", f"{HOME}/dtrain-logs", "--checkpoint-dir", f"{CHECKPOINTS}/{name}", *stop_args(args)]
    if args.mode == "elastic":
        dtrain += ["--checkpoint-every-steps", str(args.checkpoint_every_steps)]
        # The operator's PET_* variables give torchrun --nnodes, --nproc_per_node, the rendezvous and restarts.
        command = ["torchrun", *TORCHRUN_LOG_FLAGS, "--no_python", *dtrain]
    else:
        command = dtrain
    command += shlex.split(args.dtrain_args)
    return ["bash", "-c", "time " + shlex.join(command)]


def pod_template(args, labels, name):
    pod_security, container_security = security(args.platform)
    container = {
        "name": "pytorch",  # the operator finds its container by this name
        "image": args.image, "imagePullPolicy": "IfNotPresent",
        "command": ["dtrain-entrypoint"], "args": dtrain_command(args, name),
        "env": network_env(args.platform),
        # The operator's Master service (MASTER_ADDR:MASTER_PORT) forwards this port to rank 0's store.
        "ports": [{"name": "pytorchjob-port", "containerPort": MASTER_PORT}],
        "securityContext": container_security,
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if args.platform == "usernetes":
        container["env"].append({"name": "GLOO_SOCKET_IFNAME", "value": "eth0"})
    if resources(args):
        container["resources"] = resources(args)
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": args.shm}}]
    if args.checkpoint_pvc:
        container["volumeMounts"].append({"name": "checkpoints", "mountPath": CHECKPOINTS})
        volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": args.checkpoint_pvc}})
    # On a SIGTERM the entrypoint hands it to torchrun (or dtrain); the ranks save a checkpoint and stop.
    pod = {"securityContext": pod_security, "terminationGracePeriodSeconds": args.grace_s, "containers": [container],
           "volumes": volumes}
    place_on_gpus(args, pod)
    return {"metadata": {"labels": labels}, "spec": pod}


def render(args):
    name = check(args)
    labels = {"app.kubernetes.io/name": "dtrain", "dtrain/workload": args.workload, "dtrain/platform": args.platform,
              "dtrain/workers": str(args.workers), "dtrain/launcher": "pytorchjob-" + args.mode}
    if args.accelerator:
        labels["dtrain/accelerator"] = args.accelerator
    template = pod_template(args, labels, name)
    # A failed timed run must not silently rerun as a new job: restarts are torchrun's, inside the job.
    spec = {"runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0}}
    if args.mode == "elastic":
        spec["elasticPolicy"] = {"rdzvBackend": "c10d", "rdzvPort": RDZV_PORT, "minReplicas": args.min_workers,
                                 "maxReplicas": args.workers, "maxRestarts": args.max_restarts}
        spec["nprocPerNode"] = str(max(1, args.gpus_per_worker))
        # Pods restart in place (OnFailure) when their agent fails, and rejoin at the next rendezvous.
        spec["pytorchReplicaSpecs"] = {"Worker": {"replicas": args.workers, "restartPolicy": "OnFailure",
                                                  "template": template}}
    else:
        spec["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}
        if args.workers > 1:
            spec["pytorchReplicaSpecs"]["Worker"] = {"replicas": args.workers - 1, "restartPolicy": "Never",
                                                     "template": template}
    metadata = {"name": name, "labels": {**labels, **queue_labels(args)}}
    if args.namespace:
        metadata["namespace"] = args.namespace
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


if __name__ == "__main__":
    sys.exit(run("render_pytorchjob", parse_args, render, sys.argv[1:]))
