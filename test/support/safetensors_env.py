"""Runs the calling script under a Python that has PyPI's safetensors, the reference reader and writer of
dtrain's checkpoint layout: where the current one lacks it (Debian's /usr/bin/python3), the script is run
again, with the same arguments, under scripts/install_safetensors.sh's environment (which installs it once
and also sees Debian's torch). Call require_safetensors() before importing safetensors."""
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def require_safetensors():
    if importlib.util.find_spec("safetensors") is not None:
        return
    if os.environ.get("DTRAIN_SAFETENSORS_REEXEC"):
        sys.exit("safetensors_env: scripts/install_safetensors.sh's Python has no safetensors either")
    os.environ["DTRAIN_SAFETENSORS_REEXEC"] = "1"
    python = subprocess.run(["bash", os.path.join(ROOT, "scripts", "install_safetensors.sh")], check=True,
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    script = os.path.abspath(sys.argv[0])
    os.execv(python, [python, script] + sys.argv[1:])
