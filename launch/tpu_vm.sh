#!/usr/bin/env bash
# Cloud TPU VM / pod-slice helper for rla_jax. Every setting is an env var;
# nothing runs unless you call a subcommand. DRY_RUN=1 prints the commands.
#
#   TPU_NAME=rla ZONE=us-east5-a ACCELERATOR_TYPE=v5p-64 \
#   TPU_VERSION=v2-alpha-tpuv5 PROJECT=my-proj launch/tpu_vm.sh create
#   launch/tpu_vm.sh install      # copy this checkout + pip install on all workers
#   launch/tpu_vm.sh ckpt-copy    # gcloud storage cp -r $CKPT_GCS -> $CKPT_LOCAL
#   launch/tpu_vm.sh ckpt-mount   # or mount $GCS_BUCKET with gcsfuse
#   launch/tpu_vm.sh run          # same command on every worker
#   launch/tpu_vm.sh delete
#
# Runtime versions (TPU_VERSION): v5e -> v2-alpha-tpuv5-lite,
# v5p -> v2-alpha-tpuv5, v6e -> v2-alpha-tpuv6e (see
# cloud.google.com/tpu/docs/runtimes).
set -euo pipefail

TPU_NAME="${TPU_NAME:-rla-jax}"
ZONE="${ZONE:-us-east5-a}"
PROJECT="${PROJECT:-$(gcloud config get-value project 2>/dev/null || true)}"
ACCELERATOR_TYPE="${ACCELERATOR_TYPE:-v5p-64}"
TPU_VERSION="${TPU_VERSION:-v2-alpha-tpuv5}"
SPOT="${SPOT:-0}"                       # 1 = --spot
REMOTE_DIR="${REMOTE_DIR:-rla_jax}"     # checkout dir on each worker
CONFIG="${CONFIG:-alfworld:paper}"
WORKDIR="${WORKDIR:-gs://my-bucket/rla_jax/run1}"
GCS_BUCKET="${GCS_BUCKET:-my-bucket}"   # for gcsfuse
MOUNT_POINT="${MOUNT_POINT:-/mnt/gcs}"
CKPT_GCS="${CKPT_GCS:-gs://my-bucket/models/Qwen2.5-7B-Instruct}"
CKPT_LOCAL="${CKPT_LOCAL:-/tmp/models/Qwen2.5-7B-Instruct}"
EXTRA_ARGS="${EXTRA_ARGS:-}"            # appended to launch/tpu_run.py

run() {  # prints, and executes unless DRY_RUN=1
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [[ "${DRY_RUN:-0}" != "1" ]]; then "$@"; fi
}

on_all_workers() {  # $1: shell command run on every worker of the slice
  run gcloud compute tpus tpu-vm ssh "$TPU_NAME" --zone="$ZONE" \
    --project="$PROJECT" --worker=all --command="$1"
}

cmd_create() {
  local spot=()
  if [[ "$SPOT" == "1" ]]; then spot=(--spot); fi
  run gcloud compute tpus tpu-vm create "$TPU_NAME" --zone="$ZONE" \
    --project="$PROJECT" --accelerator-type="$ACCELERATOR_TYPE" \
    --version="$TPU_VERSION" "${spot[@]}"
}

cmd_install() {
  # Copy this checkout (tracked files only) to every worker, then install.
  local tarball
  tarball="$(mktemp -d)/rla_jax.tar.gz"
  run git archive --format=tar.gz -o "$tarball" HEAD
  run gcloud compute tpus tpu-vm scp "$tarball" "$TPU_NAME":rla_jax.tar.gz \
    --zone="$ZONE" --project="$PROJECT" --worker=all
  on_all_workers "mkdir -p $REMOTE_DIR && tar -xzf rla_jax.tar.gz -C \
$REMOTE_DIR && cd $REMOTE_DIR && pip install -U 'jax[tpu]' && \
pip install -r requirements.txt && pip install -e ."
}

cmd_ckpt_copy() {
  on_all_workers "mkdir -p $CKPT_LOCAL && gcloud storage cp -r \
'$CKPT_GCS/*' $CKPT_LOCAL/"
}

cmd_ckpt_mount() {
  # gcsfuse must be installed on the workers (apt package gcsfuse).
  on_all_workers "sudo mkdir -p $MOUNT_POINT && sudo chown \$USER \
$MOUNT_POINT && gcsfuse --implicit-dirs $GCS_BUCKET $MOUNT_POINT"
}

cmd_run() {
  # The launcher detects the slice (rla_jax.cluster) and calls
  # jax.distributed.initialize() on every worker; JAX reads the topology
  # from the TPU metadata.
  on_all_workers "cd $REMOTE_DIR && python \
launch/tpu_run.py --config=$CONFIG --workdir=$WORKDIR $EXTRA_ARGS \
2>&1 | tee -a \$HOME/rla_jax_run.log"
}

cmd_delete() {
  run gcloud compute tpus tpu-vm delete "$TPU_NAME" --zone="$ZONE" \
    --project="$PROJECT" --quiet
}

main() {
  local sub="${1:-}"
  case "$sub" in
    create) cmd_create ;;
    install) cmd_install ;;
    ckpt-copy) cmd_ckpt_copy ;;
    ckpt-mount) cmd_ckpt_mount ;;
    run) cmd_run ;;
    delete) cmd_delete ;;
    *) echo "usage: $0 {create|install|ckpt-copy|ckpt-mount|run|delete}" >&2
       echo "(settings are env vars; see the header of $0)" >&2
       exit 2 ;;
  esac
}

main "$@"
