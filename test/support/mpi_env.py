"""Open MPI refuses to run as root unless told it is intended (containers and CI machines often are root):
the Python tests' counterpart of scripts/mpi_env.sh, which the shell tests source."""
import os


def allow_root_mpi(env=None):
    """Sets Open MPI's consent to run as root in `env` (os.environ by default) where this process is root;
    returns `env`."""
    env = os.environ if env is None else env
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env
