#!/usr/bin/env bash
# Copies into DEST the shared libraries from PyPI's torch wheel and its nvidia-* packages that the given
# binaries need, and nothing else: the CUDA image's final stage then carries no Python, headers, static
# libraries, profilers or unused CUDA libraries.
#
#   collect-cuda-libs.sh SITE_PACKAGES DEST BINARY...
#
# "Need" is the dynamic-link closure (ldd) plus what LibTorch and cuDNN load with dlopen, which ldd cannot
# see: cuDNN 9's sub-libraries, LibTorch's CUDA linear algebra (cuSOLVER) and its runtime compiler (NVRTC).
# Libraries from the system (libc, Open MPI, yaml-cpp) come from the final stage's Debian packages.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: collect-cuda-libs.sh SITE_PACKAGES DEST BINARY..." >&2
  exit 2
fi
site=$1 dest=$2
shift 2
[ -d "$site/torch/lib" ] || { echo "collect-cuda-libs: no torch/lib under '$site'" >&2; exit 2; }

dirs=("$site/torch/lib" "$site"/nvidia/*/lib)
LD_LIBRARY_PATH=$(IFS=:; echo "${dirs[*]}")
export LD_LIBRARY_PATH
closure=$(ldd "$@" "$site/torch/lib/libtorch_cuda_linalg.so")
if grep -q 'not found' <<<"$closure"; then
  echo "collect-cuda-libs: unresolved libraries:" >&2
  grep 'not found' <<<"$closure" >&2
  exit 1
fi

shopt -s nullglob
mkdir -p "$dest"
{
  awk -v site="$site/" 'index($3, site) == 1 {print $3}' <<<"$closure"
  printf '%s\n' "$site/torch/lib/libtorch_cuda_linalg.so" "$site/torch/lib/libcaffe2_nvrtc.so" \
    "$site"/nvidia/cudnn/lib/libcudnn*.so.[0-9]* \
    "$site"/nvidia/*/lib/libnvrtc.so.[0-9]* "$site"/nvidia/*/lib/libnvrtc-builtins.so.[0-9]*
} | sort -u | while read -r lib; do
  cp -L "$lib" "$dest/"
done
echo "collect-cuda-libs: $(ls "$dest" | wc -l) libraries, $(du -sh "$dest" | cut -f1)"
