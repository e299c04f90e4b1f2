#!/usr/bin/env bash
# make kind-up: a local kind cluster running the kind-cpu environment end to end. Creates the cluster from
# kind/cluster.yaml, installs what the environment's launcher needs at pinned versions, builds and loads the CPU
# trainer image, and applies overlays/kind-cpu/<launcher> the way Argo CD would (server-side, into ddp-kind-cpu).
# The launcher is read from argocd/applicationset.yaml, the one place that chooses it.
set -euo pipefail
cd "$(dirname "$0")/.."

TRAINER_VERSION="${TRAINER_VERSION:-v2.3.0}"                    # Kubeflow Trainer v2 (brings JobSet v0.12.0)
JOBSET_VERSION="${JOBSET_VERSION:-v0.12.0}"                     # the JobSet Trainer v2.3.0 pins (checked)
TRAINING_OPERATOR_VERSION="${TRAINING_OPERATOR_VERSION:-v1.9.4}" # Training Operator v1 (PyTorchJob)
CLUSTER="${KIND_CLUSTER:-ddp}"
PY="${PY:-.venv/bin/python}"
KUBECTL="${KUBECTL:-.venv/bin/kubectl}"

die() { echo "make kind-up: $*" >&2; exit 1; }

command -v docker >/dev/null 2>&1 || die "docker is not installed: kind runs its nodes as Docker containers"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed): start Docker, or run this on a machine with one"
command -v kind >/dev/null 2>&1 || die "kind is not installed: https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
[ -x "$KUBECTL" ] || die "$KUBECTL not found: run make setup first"

# The launcher and the namespace Argo CD gives kind-cpu (its ApplicationSet element, which repeats gitops.yaml's
# identity), so that the cluster holds what Argo CD would sync there.
read -r launcher namespace < <("$PY" -c 'import sys, yaml
doc = yaml.safe_load(open("argocd/applicationset.yaml"))
els = [e for g in doc["spec"]["generators"] for e in g["list"]["elements"] if e["env"] == "kind-cpu"]
sys.exit("no kind-cpu element in argocd/applicationset.yaml") if not els else \
    print(els[0]["launcher"], els[0].get("namespace", "ddp-kind-cpu"))') && [ -n "$launcher" ] || exit 1
NAMESPACE="${NAMESPACE:-$namespace}"
overlay="overlays/kind-cpu/$launcher"
echo "kind-up: environment kind-cpu runs $launcher ($overlay)"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  echo "kind-up: cluster $CLUSTER exists"
else
  kind create cluster --name "$CLUSTER" --config kind/cluster.yaml --wait 120s
fi
"$KUBECTL" config use-context "kind-$CLUSTER" >/dev/null

case "$launcher" in
  trainjob)
    # The Trainer's manager overlay installs its controller and the JobSet it pins (v0.12.0 for v2.3.0).
    "$KUBECTL" apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=${TRAINER_VERSION}"
    "$KUBECTL" -n kubeflow-system wait --for=condition=Available deployment --all --timeout=300s
    jobset_image=$("$KUBECTL" get deployments -A -o jsonpath='{range .items[*]}{.spec.template.spec.containers[*].image}{"\n"}{end}' | grep -m1 jobset || true)
    case "$jobset_image" in
      *":${JOBSET_VERSION}"*) echo "kind-up: JobSet $JOBSET_VERSION running" ;;
      *) die "Trainer ${TRAINER_VERSION} installed JobSet '${jobset_image}', expected ${JOBSET_VERSION}" ;;
    esac
    ;;
  pytorchjob)
    "$KUBECTL" apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=${TRAINING_OPERATOR_VERSION}"
    "$KUBECTL" -n kubeflow wait --for=condition=Available deployment --all --timeout=300s
    ;;
  indexed-job|statefulset) echo "kind-up: $launcher needs no operator" ;;
  *) die "unknown launcher '$launcher' in argocd/applicationset.yaml" ;;
esac

# The CPU image the overlay names (components/kind-cpu sets the tag), built here and loaded into the node.
image=$("$KUBECTL" kustomize "$overlay" | awk '$1 == "image:" {print $2; exit}')
[ -n "$image" ] || die "$overlay names no image"
docker build -f Dockerfile.cpu -t "${image%@*}" .
kind load docker-image "${image%@*}" --name "$CLUSTER"

"$KUBECTL" create namespace "$NAMESPACE" --dry-run=client -o yaml | "$KUBECTL" apply --server-side -f -
"$KUBECTL" apply --server-side -n "$NAMESPACE" -k "$overlay"
echo "kind-up: applied $overlay to namespace $NAMESPACE; watch it with: $KUBECTL -n $NAMESPACE get pods -w"
