# gpt-train with the CUDA backend, NCCL and Open MPI, built from this checkout by the project's own scripts
# (scripts/install_deps.sh, scripts/build.sh: the steps CI runs).
#
#   docker build -t gpt-train .
#   docker run --gpus all --rm -v "$PWD/runs:/gpt-train/runs" gpt-train train configs/demo.yaml
#   docker run --gpus all --rm --ipc=host --entrypoint mpirun gpt-train -np 8 /gpt-train/build/gpt-train train CONFIG
#
# CUDA_IMAGE is a CUDA 13 development image: nvcc, cuBLASLt and NCCL come with it (cmake/Cuda.cmake finds
# NCCL under the toolkit or on the system). The build machine needs no GPU: the kernels compile for the
# architectures in CMAKE_CUDA_ARCHITECTURES (75;80;86;89;90), and the binary still runs the CPU backend.
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04
FROM ${CUDA_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /gpt-train
COPY . .
# GPT_CCACHE=OFF: a one-off build, whose compiler cache would only stay in the image's layer.
RUN scripts/install_deps.sh && scripts/build.sh -DGPT_CUDA=ON -DGPT_CCACHE=OFF
# mpirun inside the container runs as root; Open MPI refuses that unless asked twice.
ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENTRYPOINT ["/gpt-train/build/gpt-train"]
