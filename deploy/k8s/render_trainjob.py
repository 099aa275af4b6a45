#!/usr/bin/env python3
"""Renders a Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1, Trainer 2.3) that trains a dtrain
workload, for the same platforms and images as render_mpijob.py, in either of the ways dtrain runs:

  torchrun  the TrainJob names Trainer's `torch-distributed` ClusterTrainingRuntime. Trainer runs
            --workers pods (replicated job `node`, container `node`), each `torchrun --no_python dtrain ...`,
            and sets torchrun's PET_NNODES, PET_NPROC_PER_NODE (here: the GPUs per pod, or 1 on CPUs),
            PET_NODE_RANK, PET_MASTER_ADDR (the first pod) and PET_MASTER_PORT (29500): a job of fixed size.
            dtrain trains over NCCL on GPUs, over Gloo on CPUs. With --max-restarts, dtrain's own
            TrainingRuntime instead (named after the job, in its namespace): the same `node` job and torch
            policy, with the restart rules below (Trainer's runtime has none, and runtimePatches cannot add
            them); the image's entrypoint exits with the first failed dtrain worker's status, not torchrun's 1.
  mpirun    Trainer ships no plain MPI runtime, so two documents: dtrain's own TrainingRuntime (in the job's
            namespace, named after it) with `mlPolicy.mpi` (Open MPI, --gpus-per-worker slots per pod, the
            SSH keys Trainer makes mounted at ~/.ssh) and replicated jobs `node` (the image's sshd, with the
            GPUs) and `launcher` (started once the nodes are ready; the job succeeds when it does), and the
            TrainJob that uses it. The launcher runs `time mpirun ... dtrain ...` with the options the MPIJob
            renders carry (the hostfile Trainer writes at /etc/mpi/hostfile, sshd on port 2222, TCP keepalives).

A runtime of dtrain's restarts the job after a failure worth retrying (--max-restarts times; mpirun: 3 by
default) and fails it at once when dtrain exits with a status a restart would meet again
(NO_RESTART_EXIT_CODES).

Pod settings the TrainJob's `trainer` cannot carry (security contexts, the grace period for signals,
/dev/shm, GKE's node selector and GPU toleration) go into a `runtimePatches` entry of manager
`dtrain.kubeflow.org/render-trainjob` for torchrun, and into the runtime itself for mpirun. --queue NAME
labels the TrainJob for Kueue (kueue.x-k8s.io/queue-name; Kueue >= 0.20 admits TrainJobs of Trainer 2.3).

  render_trainjob.py --launcher torchrun --platform gke --workers 4 --accelerator nvidia-l4 \\
      --image REGISTRY/dtrain:cuda --queue team-a > job.yaml && kubectl apply -f job.yaml

Bad input exits with status 2 and one line saying what was wrong.
"""
import argparse
import shlex
import sys

from render_mpijob import (OneLineParser, check_int32, HOME, NAME_RE, SSH_PORT, UsageError, add_common_arguments, check_common, mpirun_command,
                           network_env, place_on_gpus, queue_labels, resources, run, security, stop_args)
from render_pytorchjob import TORCHRUN_LOG_FLAGS

LAUNCHERS = ("torchrun", "mpirun")
API_VERSION = "trainer.kubeflow.org/v1alpha1"
TORCH_RUNTIME = "torch-distributed"  # Trainer's ClusterTrainingRuntime for torchrun
PATCH_MANAGER = "dtrain.kubeflow.org/render-trainjob"
# Trainer's torch plugin sets these on the `node` container; a TrainJob that sets them is refused.
TORCHRUN_RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
# Trainer's MPI plugin sets these on the launcher; likewise refused in a TrainJob.
MPI_RESERVED_ENV = ("OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames",
                    "OMPI_MCA_orte_set_default_slots")
# dtrain's exit statuses that a restart meets again (docs/failures.md, "Exit statuses"): configuration (2),
# data or checkpoint files (3), a NaN or infinite loss (4), a write that failed (5: a full disk stays full).
# The trainer's pod passes them on: mpirun exits with the first failed rank's status, and the entrypoint
# with mpirun's or, under torchrun, with the first failed worker's (read from torchrun's error file). Every
# other failure (6: a peer lost or cut off; 128 + N: stopped by a signal; 1) restarts the job.
NO_RESTART_EXIT_CODES = (2, 3, 4, 5)
DEFAULT_MAX_RESTARTS = 3


def parse_args(argv):
    p = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_arguments(p, "pods (nodes), e.g. 2, 4, 8, 16, 32", "per rank",
                         "TrainJob name (default dtrain-<workload>-<platform>-<launcher>-<workers>)")
    p.add_argument("--launcher", default="torchrun", help="|".join(LAUNCHERS))
    p.add_argument("--max-restarts", type=int, default=None,
                   help="how often the job restarts after a failure worth retrying (mpirun: default "
                        f"{DEFAULT_MAX_RESTARTS}; torchrun: renders dtrain's own runtime, which has the rules)")
    return p.parse_args(argv)


def check(args):
    check_common(args)
    if args.launcher not in LAUNCHERS:
        raise UsageError(f"unknown launcher '{args.launcher}'; expected one of: {', '.join(LAUNCHERS)}")
    if args.max_restarts is not None:
        check_int32("--max-restarts", args.max_restarts, 0)
    default = f"dtrain-{args.workload}-{args.platform}-{args.launcher}-{args.workers}".replace("_", "-").replace(".", "-")
    name = args.name or default
    # JobSet names a pod's host <name>-<replicated job>-<job index>-<pod index> under the subdomain <name>.
    hosts = [f"{name}-node-0-{args.workers - 1}"] + ([f"{name}-launcher-0-0"] if args.launcher == "mpirun" else [])
    longest = max(hosts, key=len)
    if not NAME_RE.match(name) or len(longest) > 63:
        raise UsageError(f"job name '{name}' must be a DNS-1035 label (lower case letters, digits, '-') and its pods' "
                         f"host name '{longest}' at most 63 characters")
    return name


def labels_for(args):
    labels = {"app.kubernetes.io/name": "dtrain", "dtrain/workload": args.workload, "dtrain/platform": args.platform,
              "dtrain/workers": str(args.workers), "dtrain/launcher": "trainjob-" + args.launcher}
    if args.accelerator:
        labels["dtrain/accelerator"] = args.accelerator
    return labels


def dshm(args):
    return ({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": args.shm}},
            {"name": "dshm", "mountPath": "/dev/shm"})


def node_pod_settings(args):
    """What the `node` pods need beyond the TrainJob's trainer: security, grace period, /dev/shm, placement."""
    pod_security, container_security = security(args.platform)
    volume, mount = dshm(args)
    # On a SIGTERM the entrypoint hands it to torchrun (or the ranks); they save a checkpoint and stop in time.
    pod = {"securityContext": pod_security, "terminationGracePeriodSeconds": args.grace_s, "volumes": [volume]}
    place_on_gpus(args, pod)
    container = {"name": "node", "securityContext": container_security, "volumeMounts": [mount]}
    return pod, container


def torchrun_command(args):
    device = ["--device", "cuda", "--backend", "nccl"] if args.gpus_per_worker > 0 else ["--device", "cpu", "--backend", "gloo"]
    dtrain = ["dtrain", "--workload", args.workload, "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
              *device, "--log-dir", f"{HOME}/dtrain-logs", "--checkpoint-dir", f"{HOME}/dtrain-checkpoints",
              *stop_args(args), *shlex.split(args.dtrain_args)]
    # Trainer's PET_* variables give torchrun its node count, processes per node, rank and master.
    return ["bash", "-c", "time " + shlex.join(["torchrun", *TORCHRUN_LOG_FLAGS, "--no_python", *dtrain])]


def metadata(name, args, labels):
    meta = {"name": name, "labels": {**labels, **queue_labels(args)}}
    if args.namespace:
        meta["namespace"] = args.namespace
    return meta


def torchrun_job(name, args):
    labels = labels_for(args)
    env = network_env(args.platform)
    if args.platform == "usernetes":
        env.append({"name": "GLOO_SOCKET_IFNAME", "value": "eth0"})
    trainer = {"image": args.image, "command": ["dtrain-entrypoint"], "args": torchrun_command(args), "env": env,
               "numNodes": args.workers, "numProcPerNode": max(1, args.gpus_per_worker)}
    if resources(args):
        trainer["resourcesPerNode"] = resources(args)
    pod, container = node_pod_settings(args)
    pod["containers"] = [container]
    if args.max_restarts is not None:
        return torch_runtime_job(name, args, labels, trainer, pod, container)
    patch = {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"metadata": {"labels": labels}, "spec": pod}}}}]}}}}
    return [{"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata(name, args, labels),
             "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                     "name": TORCH_RUNTIME},
                      "trainer": trainer, "runtimePatches": [patch]}}]


def torch_runtime_job(name, args, labels, trainer, pod, container):
    """torchrun with restart rules: Trainer's torch-distributed runtime as dtrain's own TrainingRuntime (one
    replicated job `node`, the trainer's, container `node`, mlPolicy.torch), the pod settings in it, and
    the restart rules on the nodes, whose entrypoint exits with dtrain's status."""
    failure_policy, node_job, _ = restart_rules(args, "node")
    pod["restartPolicy"] = "Never"  # a Pod failure policy needs pods that are not restarted in place
    pod["containers"] = [{**container, "image": args.image, "imagePullPolicy": "IfNotPresent"}]
    runtime = {
        "apiVersion": API_VERSION, "kind": "TrainingRuntime", "metadata": metadata(name, args, labels),
        "spec": {
            # numNodes is the runtime's default, which the TrainJob's trainer.numNodes overrides; Trainer 2.3's
            # torch policy takes the processes per node from trainer.numProcPerNode alone.
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {
                "failurePolicy": failure_policy,
                "replicatedJobs": [
                    {"name": "node",
                     "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                  "spec": {**node_job, "template": {"metadata": {"labels": labels}, "spec": pod}}}},
                ]}},
        },
    }
    runtime["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name", None)  # Kueue admits the job, not its runtime
    job = {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata(name, args, labels),
           "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": name},
                    "trainer": trainer}}
    return [runtime, job]


def restart_rules(args, trainer_job):
    """The JobSet's failurePolicy and the Job settings of the replicated job whose pods pass dtrain's status
    on (`trainer_job`: mpirun's launcher, torchrun's nodes): a pod that exits with a status a restart meets
    again fails its Job by the Pod failure policy, and that reason fails the whole job at once; any other
    failure of any pod restarts every pod (neither an MPI world nor a fixed-size torchrun group is mended
    in place), --max-restarts times at most. Every replicated job has backoffLimit 0: a failed pod fails its
    Job, which the JobSet acts on."""
    max_restarts = DEFAULT_MAX_RESTARTS if args.max_restarts is None else args.max_restarts
    failure_policy = {"maxRestarts": max_restarts, "rules": [
        {"name": "inputsAndDivergence", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"],
         "targetReplicatedJobs": [trainer_job]}]}
    status_job = {"backoffLimit": 0, "podFailurePolicy": {"rules": [
        {"action": "FailJob",
         "onExitCodes": {"containerName": "node", "operator": "In", "values": list(NO_RESTART_EXIT_CODES)}}]}}
    return failure_policy, status_job, {"backoffLimit": 0}


def mpirun_job(name, args):
    labels = labels_for(args)
    slots = max(1, args.gpus_per_worker)
    pod_security, container_security = security(args.platform)
    volume, mount = dshm(args)
    node = {"name": "node", "image": args.image, "imagePullPolicy": "IfNotPresent",
            "command": ["dtrain-entrypoint", "worker"], "ports": [{"name": "ssh", "containerPort": SSH_PORT}],
            "env": network_env(args.platform), "securityContext": container_security, "volumeMounts": [mount],
            # The launcher starts once every node's sshd takes connections.
            "readinessProbe": {"tcpSocket": {"port": SSH_PORT}, "periodSeconds": 2}}
    if resources(args):
        node["resources"] = resources(args)
    node_pod = {"securityContext": pod_security, "terminationGracePeriodSeconds": args.grace_s, "containers": [node],
                "volumes": [volume]}
    place_on_gpus(args, node_pod)
    launcher = {"name": "node", "image": args.image, "imagePullPolicy": "IfNotPresent",
                "command": ["dtrain-entrypoint", "launcher"], "env": network_env(args.platform),
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}, "securityContext": container_security}
    # A Pod failure policy needs pods that are not restarted in place.
    launcher_pod = {"securityContext": pod_security, "terminationGracePeriodSeconds": args.grace_s,
                    "restartPolicy": "Never", "containers": [launcher]}
    node_pod["restartPolicy"] = "Never"
    failure_policy, launcher_job, node_job = restart_rules(args, "launcher")
    runtime_name = name
    runtime = {
        "apiVersion": API_VERSION, "kind": "TrainingRuntime", "metadata": metadata(runtime_name, args, labels),
        "spec": {
            # numNodes counts the pods of the trainer's replicated job, here the launcher: one. The TrainJob's
            # trainer.numNodes sets how many `node` pods run (Trainer's MPI plugin).
            "mlPolicy": {"numNodes": 1,
                         "mpi": {"mpiImplementation": "OpenMPI", "numProcPerNode": slots,
                                 "sshAuthMountPath": f"{HOME}/.ssh", "runLauncherAsNode": False}},
            "template": {"spec": {
                # Pods find each other by name before they are ready (mpirun's ssh to the nodes).
                "network": {"publishNotReadyAddresses": True},
                "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                "failurePolicy": failure_policy,
                "replicatedJobs": [
                    {"name": "node", "template": {"spec": {
                        **node_job, "template": {"metadata": {"labels": labels}, "spec": node_pod}}}},
                    {"name": "launcher", "dependsOn": [{"name": "node", "status": "Ready"}],
                     "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                  "spec": {**launcher_job,
                                           "template": {"metadata": {"labels": labels}, "spec": launcher_pod}}}},
                ]}},
        },
    }
    runtime["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name", None)  # Kueue admits the job, not its runtime
    # The TrainJob's trainer is the launcher (the replicated job marked as the trainer's ancestor).
    trainer = {"image": args.image, "command": ["dtrain-entrypoint", "launcher"],
               "args": mpirun_command(args, args.workers * slots), "numNodes": args.workers,
               "numProcPerNode": slots}
    job = {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata(name, args, labels),
           "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": runtime_name},
                    "trainer": trainer}}
    return [runtime, job]


def render(args):
    """The documents of one job: the TrainJob, after the runtime it needs (mpirun)."""
    name = check(args)
    return torchrun_job(name, args) if args.launcher == "torchrun" else mpirun_job(name, args)


if __name__ == "__main__":
    sys.exit(run("render_trainjob", parse_args, render, sys.argv[1:]))
