#!/usr/bin/env bash
# An sbatch script for data-parallel training on GPUs: one rank per GPU, on every GPU of N nodes.
#   sbatch --nodes=2 scripts/sbatch_gpus.sh configs/gpt2-124m.yaml [--set key=value ...]
# Adjust the #SBATCH lines (partition, account, time, GPUs per node) to the cluster.
#SBATCH --job-name=gpt-train
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=12
#SBATCH --time=24:00:00
#SBATCH --output=gpt-train-%j.out
set -euo pipefail

config=${1:?usage: sbatch scripts/sbatch_gpus.sh CONFIG.yaml [--set key=value ...]}
shift
cd "${SLURM_SUBMIT_DIR:-.}"

# Each rank sees every GPU of its node and takes the one of its local rank (gpt-train finds it from the
# node's ranks), so no per-task CUDA_VISIBLE_DEVICES is needed: --gpu-bind=none. Binding one GPU per
# task works too (each rank then sees device 0), but where the cluster also confines a task's devices
# with cgroups, NCCL loses the direct GPU-to-GPU path (NCCL_DEBUG=INFO shows SHM instead of P2P/NVLink).
# Threads: the cores Slurm gives each task, which matter for data loading only on a GPU.
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}
# NCCL's own log: WARN by default; INFO prints the rings/trees, transports (NVLink, IB, sockets) and the
# network interfaces it chose, the first thing to read when a job is slow or hangs at start.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# Errors inside NCCL are reported asynchronously and turned into an abort by gpt-train's watchdog
# (dist.timeout_s); a hung collective therefore ends the job instead of holding the allocation.

# srun with PMIx starts one rank per task; the ranks bootstrap NCCL over MPI.
srun --mpi=pmix --cpu-bind=cores --gpu-bind=none build/gpt-train train "$config" "$@"
