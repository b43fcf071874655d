#!/usr/bin/env bash
# Installs, from Debian's packages, what building and testing gpt-train needs; only what is missing.
# Extra package names given as arguments are installed too (demo.sh adds bible-kjv).
set -euo pipefail

# ccache: builds compile through it (cmake/CompilerCache.cmake), so a clone rebuilds what another built in a
# lookup.
# ocl-icd-opencl-dev: Debian's oneDNN is built with its OpenCL GPU runtime, so its CMake package requires
# OpenCL, yet libdnnl-dev only recommends it (and recommendations are not installed here).
packages=(cmake ninja-build ccache g++ pkg-config libyaml-cpp-dev libspdlog-dev libfmt-dev libgtest-dev
          libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev openmpi-bin libopenmpi-dev libboost-context-dev nlohmann-json3-dev libicu-dev
          libplplot-dev plplot-driver-cairo fonts-dejavu-core libexpat1-dev "$@")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
