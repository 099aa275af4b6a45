# Sourced by the scripts that start MPI jobs: Open MPI refuses to run as root unless told it is
# intended (containers and CI machines often are root).
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
