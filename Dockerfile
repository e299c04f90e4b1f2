# Trainer image for GPU nodes: every launcher runs `torchrun <flags> /app/trainer/train.py --task ...`.
# Base: the image of Kubeflow Trainer's torch-distributed runtime (torch 2.13.0, CUDA 13.0, cuDNN 9).
FROM pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime

ARG TORCH_VERSION=2.13.0
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

COPY trainer/requirements.txt /app/trainer/requirements.txt
# Fail the build if the base image's torch is not the pinned one, and keep pip from replacing it.
RUN python -c "import sys, torch; v = torch.__version__.split('+')[0]; sys.exit(0 if v == '${TORCH_VERSION}' else 'base image has torch ' + v)" \
 && pip install --no-cache-dir -r /app/trainer/requirements.txt "torch==${TORCH_VERSION}"

# Unprivileged user; /out (checkpoints) writable by it. Mount the volumes with fsGroup 10001 in the pod.
RUN useradd --no-log-init --create-home --uid 10001 --user-group trainer \
 && mkdir -p /data /out \
 && chown 10001:10001 /out

COPY trainer/ /app/trainer/

USER 10001
# A one-epoch smoke run; the launchers always override the command.
CMD ["torchrun", "--nproc-per-node=1", "/app/trainer/train.py", "--task", "synthetic", "--epochs", "1", "--out-dir", "/tmp/out"]
