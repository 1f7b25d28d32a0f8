#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine: Debian's
# CPU PyTorch and NumPy for /usr/bin/python3, pip/setuptools/wheel, OpenBLAS,
# g++.
# Go comes with the machine.
set -euo pipefail
need=()
/usr/bin/python3 -c 'import torch, numpy' 2>/dev/null || need+=(python3-torch python3-numpy)
# pip, setuptools and wheel build `pip install ./python` offline.
/usr/bin/python3 -c 'import pip, setuptools, wheel' 2>/dev/null || need+=(python3-pip python3-setuptools python3-wheel)
# Debian's torch links the generic reference BLAS unless a faster one is
# installed: OpenBLAS makes the CPU training in the tests ~10x faster.
[ -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ] || need+=(libopenblas0-pthread)
# g++ runs the GPU sampler's kernels on the CPU (sampler's
# TestKernelsEmulatedMatchCPU: their logic checked without nvcc or a GPU).
command -v g++ >/dev/null || need+=(g++)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
