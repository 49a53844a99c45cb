#!/usr/bin/env bash
# Multi-node GPU launch for rla_jax: one process per node, all GPUs of a
# node visible to it. Sets JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
# JAX_PROCESS_ID, which rla_jax.cluster.maybe_initialize_distributed reads.
#
# SLURM (inside an allocation, or as an sbatch script):
#   sbatch -N 8 --gpus-per-node=8 --ntasks-per-node=1 launch/gpu_cluster.sh slurm
#   (or: salloc -N 8 ...; launch/gpu_cluster.sh slurm)
# Plain ssh loop over hosts (the first host is the coordinator):
#   HOSTS="node0 node1 node2 node3" launch/gpu_cluster.sh ssh
#
# Settings (env vars): CONFIG, WORKDIR, REMOTE_DIR, COORD_PORT, PYTHON,
# EXTRA_ARGS; DRY_RUN=1 prints the commands instead of running them.
#SBATCH --job-name=rla_jax
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
set -euo pipefail

CONFIG="${CONFIG:-alfworld:paper}"
WORKDIR="${WORKDIR:-/shared/rla_jax/run1}"
REMOTE_DIR="${REMOTE_DIR:-$PWD}"     # same path on every node (shared FS)
COORD_PORT="${COORD_PORT:-12355}"
PYTHON="${PYTHON:-python}"
EXTRA_ARGS="${EXTRA_ARGS:-}"
# Let XLA use most of the GPU memory (JAX's default preallocation is 75%).
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.92}"

train_cmd() {
  echo "cd $REMOTE_DIR && XLA_PYTHON_CLIENT_MEM_FRACTION=\
$XLA_PYTHON_CLIENT_MEM_FRACTION $PYTHON launch/tpu_run.py --config=$CONFIG \
--workdir=$WORKDIR $EXTRA_ARGS"
}

run() {
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [[ "${DRY_RUN:-0}" != "1" ]]; then "$@"; fi
}

cmd_slurm() {
  : "${SLURM_JOB_NODELIST:?run inside a SLURM allocation (sbatch/salloc)}"
  local head nnodes
  head="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
  nnodes="${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}"
  # One task per node; each task derives its process id from SLURM_PROCID.
  run srun --nodes="$nnodes" --ntasks-per-node=1 bash -c \
    "export JAX_COORDINATOR_ADDRESS=$head:$COORD_PORT \
JAX_NUM_PROCESSES=$nnodes JAX_PROCESS_ID=\$SLURM_PROCID; $(train_cmd)"
}

cmd_ssh() {
  : "${HOSTS:?set HOSTS to a space-separated host list, coordinator first}"
  local hosts=($HOSTS) i pids=()
  local n="${#hosts[@]}" head="${hosts[0]}"
  for i in "${!hosts[@]}"; do
    run ssh "${hosts[$i]}" "export JAX_COORDINATOR_ADDRESS=$head:$COORD_PORT \
JAX_NUM_PROCESSES=$n JAX_PROCESS_ID=$i; $(train_cmd)" &
    pids+=("$!")
  done
  local status=0
  for i in "${pids[@]}"; do wait "$i" || status=1; done
  return "$status"
}

case "${1:-}" in
  slurm) cmd_slurm ;;
  ssh) cmd_ssh ;;
  *) echo "usage: $0 {slurm|ssh}  (settings: see the header of $0)" >&2
     exit 2 ;;
esac
