# Distributed PyTorch on Kubernetes: render, validate and test every overlay before Argo CD syncs it.
# `make` alone lists the targets.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The paths that reach recipes as they are (the venvs, the tools' folder, the interpreter): given on the command line
# or in the environment, each is taken as text (never expanded by make: $(shell ...) stays text) and must be one word
# of letters, digits and ./_+-@; anything else is refused before any recipe runs (docs/security.md#make-variables).
PATH_VARS := VENV BIN PYTHON CHECKOV_VENV
SAFE_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W X Y Z \
  0 1 2 3 4 5 6 7 8 9 . / _ + - @
drop_chars = $(if $(2),$(call drop_chars,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
define NEWLINE


endef
$(foreach v,$(PATH_VARS),$(if $(filter command line environment,$(origin $(v))),$(eval override $(v) := $$(value $(v)))\
  $(if $(or $(call drop_chars,$(subst $(NEWLINE),?,$(value $(v))),$(SAFE_CHARS)),$(filter-out 1,$(words $(value $(v))))),\
  $(error $(v) must be one path of letters, digits and ./_+-@ (it reaches commands as written)))))

VENV        ?= .venv
PY          := $(VENV)/bin/python
BIN         := $(CURDIR)/bin
PYTHON      ?= python3
# Tool versions, pinned in one place (kubectl and its kustomize come from requirements.txt).
KUBECONFORM_VERSION ?= v0.8.0
# sha256 of kubeconform-linux-amd64.tar.gz v0.8.0 (from the release CHECKSUMS as quoted by public scripts; this machine cannot download it to re-check)
KUBECONFORM_SHA256  ?= 9bc2bffbf71f261128533edaf912153948b7ff238f9a531ae6d34466ec287883
# actionlint lints .github/workflows in make test (tests/test_workflows.py); sha256 of actionlint_1.7.12_linux_amd64.tar.gz
# from the release's checksums.txt as quoted by several public repositories (not re-checked here: no GitHub access).
ACTIONLINT_VERSION ?= 1.7.12
ACTIONLINT_SHA256  ?= 8aca8db96f1b94770f1b0d72b6dddcb1ebb8123cb3712530b08cc387b349a3d8
# An extra index for the CPU build of torch==2.13.0 (CI sets https://download.pytorch.org/whl/cpu); empty = pip's own.
TORCH_INDEX ?=

PATHS   ?=
# make diff: the git ref to compare the working tree with.
BASE    ?= main
FORMAT  ?= text
# make bench-gpu: processes (GPUs) of each trainer run; above 1 it also reports the scaling against one GPU.
NPROC   ?= 1
# make validate: STRICT=1 fails on warnings too; POLICY_ENV=components/<env>/policy.yaml for files and stdin.
STRICT  ?=
# make validate: the schema validator, builtin (in-process, the default), kubeconform, auto (kubeconform where installed) or none.
SCHEMA  ?=
POLICY_ENV ?=
# make validate, make plan: BUNDLE=1 reads each folder's plain manifest files (PATHS) as one input, as kubectl apply -f <folder> does.
BUNDLE  ?=
OVERLAY ?= overlays/kind-cpu/indexed-job
SCALE_TO ?=
DEADLINE ?=
# make simulate: faults to inject (docs/simulate.md), e.g. FAULT="kill:1@step=6 term:0@epoch=1".
FAULT   ?=
# make test-fast: a pytest -k selector (K=jobset: the tests whose names say jobset).
K       ?=
SIM_DEPS := $(VENV)/.sim-deps
# The package's dependency wheels and its build backend, for the tests that install the package into fresh
# virtualenvs with no network (tests/test_package.py, tests/test_precommit_hook.py; docs/install.md).
WHEELHOUSE := .cache/wheelhouse
# checkov (make lint) lives in a venv of its own: its pinned dependencies clash with .venv's (requirements-checkov.txt).
CHECKOV_VENV ?= .venv-checkov
CHECKOV     := $(CHECKOV_VENV)/bin/checkov
IMAGE   ?= ghcr.io/example/ddp-trainer
# The Argo CD Config Management Plugin's sidecar image (argocd/cmp/, docs/gitops.md).
CMP_IMAGE ?= ghcr.io/example/ddp-argocd-cmp
TAG     ?= 0.1.0

export PATH := $(BIN):$(CURDIR)/$(VENV)/bin:$(PATH)
# make scale/new-run edit files: only an OVERLAY given on the command line (or in the environment), never a default.
OVERLAY_ORIGIN := $(origin OVERLAY)
IMAGE_ORIGIN := $(origin IMAGE)
EXPLICIT_OVERLAY = $(if $(filter command line environment,$(OVERLAY_ORIGIN)),$(OVERLAY))
# The variables a user passes are data, never code (docs/security.md#make-variables): each holds its text as given,
# never expanded by make ($(shell ...) stays text), and reaches a command as one single-quoted word (`$(call arg,...)`),
# so quotes, `;`, backticks and $(...) in PATHS='x;touch F' are characters of a path, and the exit code is the tool's.
USER_VARS := PATHS BASE FORMAT STRICT SCHEMA POLICY_ENV BUNDLE OVERLAY SCALE_TO DEADLINE FAULT PVC NODES GPUS_PER_NODE \
  PROCS_PER_NODE NEW_RUN RUN_ID DRY_RUN HEAD_REF PODS RUN IMAGE CMP_IMAGE TAG TORCH_INDEX K REPO_URL CLUSTERS \
  NAMESPACES ENV FROM GPU GPU_LABEL TOLERATION GPU_RESOURCE CLUSTER NAMESPACE LAUNCHER
$(foreach v,$(USER_VARS),$(eval override $(v) := $$(value $(v))))
# A new line in a value would end the recipe's command there and start another (run even after a failure under
# make -i): it reaches the command inside the same word, as bash's $'\n'.
arg = '$(subst $(NEWLINE),'$$'\n'',$(subst ','\'',$(1)))'

.PHONY: help setup init new-env remove-env wheel image-cmp tiny-lm validate validate-changed diff scale new-run recover plan render simulate report test test-fast typecheck bench bench-validate bench-trainer bench-gpu schemas docs image image-cpu kind-up lint clean

help: ## List the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z_-]+:.*## /{printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(PY): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url=$(call arg,$(TORCH_INDEX))) -r requirements-dev.txt
	@touch $(PY)

$(CHECKOV): requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install -q --disable-pip-version-check -r requirements-checkov.txt
	@touch $(CHECKOV)

# libnss_wrapper, libsocket_wrapper and etcd for `make simulate` (Debian packages, where the machine allows);
# retried until present.
$(SIM_DEPS): scripts/install-sim-deps.sh | $(PY)
	@scripts/install-sim-deps.sh
	@if compgen -G "/usr/lib/*/libnss_wrapper.so" >/dev/null && compgen -G "/usr/lib/*/libsocket_wrapper.so" >/dev/null \
	  && command -v etcd >/dev/null; then touch $@; fi

# Bounded: each request gives up after 30 s and 2 retries, the whole download after 600 s. Where it cannot finish (no
# index reachable), make goes on and .failed says why; the tests that need the wheelhouse then skip with that reason.
# The GitHub Action's hash-pinned lock (action-requirements.txt) is downloaded too, its hashes checked: the test that
# runs the Action's install step offline (tests/test_action.py) installs exactly its files.
$(WHEELHOUSE)/.complete: requirements.txt requirements-build.txt requirements-dev.txt action-requirements.txt | $(PY)
	@mkdir -p $(WHEELHOUSE) && rm -f $(WHEELHOUSE)/.failed
	@if timeout 600 $(PY) -m pip download -q --disable-pip-version-check --timeout 30 --retries 2 --only-binary=:all: \
	  -d $(WHEELHOUSE) -c requirements-dev.txt -r requirements.txt -r requirements-build.txt >$(WHEELHOUSE)/.log 2>&1 \
	  && timeout 300 $(PY) -m pip download -q --disable-pip-version-check --timeout 30 --retries 2 --only-binary=:all: \
	  --no-deps --require-hashes -d $(WHEELHOUSE) -r action-requirements.txt >>$(WHEELHOUSE)/.log 2>&1; \
	then touch $@; \
	else rc=$$?; why=$$( [ $$rc = 124 ] && echo "timed out after 600 s" || grep -m1 '^ERROR' $(WHEELHOUSE)/.log ); \
	  echo "wheelhouse: pip download did not finish ($${why:-exit $$rc}); the package-install tests will skip" \
	    | tee $(WHEELHOUSE)/.failed; fi

setup: $(PY) $(SIM_DEPS) $(CHECKOV) $(WHEELHOUSE)/.complete ## Create .venv (and .venv-checkov) with every pinned tool; install kubeconform and the simulator's packages where the machine allows
	@BIN=$(BIN) scripts/install-release.sh kubeconform \
	  https://github.com/yannh/kubeconform/releases/download/$(KUBECONFORM_VERSION)/kubeconform-linux-amd64.tar.gz \
	  $(KUBECONFORM_SHA256) -v "make validate SCHEMA=kubeconform will not run (the default, the in-process validator, is unaffected)"
	@BIN=$(BIN) scripts/install-release.sh actionlint \
	  https://github.com/rhysd/actionlint/releases/download/v$(ACTIONLINT_VERSION)/actionlint_$(ACTIONLINT_VERSION)_linux_amd64.tar.gz \
	  $(ACTIONLINT_SHA256) -version "make test lints the workflows against GitHub's schema only (check-jsonschema)"
	@scripts/install-prometheus.sh
	@$(PY) -m policies tools

wheel: $(PY) ## Build the installable package (dist/ddp_k8s_gitops-*.whl: the ddp-check command; docs/install.md)
	$(PY) -m pip wheel -q --disable-pip-version-check --no-deps --no-build-isolation -w dist .

init: $(PY) ## Make the template yours: REPO_URL=<your repository> IMAGE=<registry>/<repository> [CLUSTERS="env=cluster ..."] [NAMESPACES="env=ns ..."] [DRY_RUN=1] (docs/deploy.md)
	@$(PY) -m policies.edit.init $(if $(REPO_URL),--repo-url=$(call arg,$(REPO_URL))) $(if $(filter command line environment,$(IMAGE_ORIGIN)),--image=$(call arg,$(IMAGE))) $(if $(CLUSTERS),--clusters=$(call arg,$(CLUSTERS))) $(if $(NAMESPACES),--namespaces=$(call arg,$(NAMESPACES))) $(if $(DRY_RUN),--dry-run)

new-env: $(PY) ## ENV=<name> FROM=<env> NODES=N GPUS_PER_NODE=G (PROCS_PER_NODE=P on CPU) [GPU=A100] [GPU_LABEL=key=value] [TOLERATION=key:Effect] [GPU_RESOURCE=...] [CLUSTER=...] [NAMESPACE=...] [LAUNCHER=...] [DRY_RUN=1]: a new environment from an existing one (docs/environments.md)
	@$(PY) -m policies.edit.new_env --env=$(call arg,$(ENV)) --from=$(call arg,$(FROM)) --nodes=$(call arg,$(NODES)) $(if $(GPUS_PER_NODE),--gpus-per-node=$(call arg,$(GPUS_PER_NODE))) $(if $(PROCS_PER_NODE),--procs-per-node=$(call arg,$(PROCS_PER_NODE))) $(if $(GPU),--gpu=$(call arg,$(GPU))) $(if $(GPU_LABEL),--gpu-label=$(call arg,$(GPU_LABEL))) $(if $(TOLERATION),--toleration=$(call arg,$(TOLERATION))) $(if $(GPU_RESOURCE),--gpu-resource=$(call arg,$(GPU_RESOURCE))) $(if $(CLUSTER),--cluster=$(call arg,$(CLUSTER))) $(if $(NAMESPACE),--namespace=$(call arg,$(NAMESPACE))) $(if $(LAUNCHER),--launcher=$(call arg,$(LAUNCHER))) $(if $(DRY_RUN),--dry-run)

remove-env: $(PY) ## ENV=<name> [DRY_RUN=1]: remove an environment (its folders, identity entry, ApplicationSet element, AppProject destination) in one validated transaction (docs/environments.md)
	@$(PY) -m policies.edit.remove_env --env=$(call arg,$(ENV)) $(if $(DRY_RUN),--dry-run)

validate: $(PY) ## Render every overlay and argocd/ (or PATHS="dir file -"), validate schemas strictly, check every rule [FORMAT=text|json|sarif|junit|github|markdown] [STRICT=1] [SCHEMA=builtin|kubeconform|auto] [BUNDLE=1]
	@$(PY) -m policies validate --format=$(call arg,$(FORMAT)) $(if $(STRICT),--strict) $(if $(BUNDLE),--bundle) $(if $(SCHEMA),--schema=$(call arg,$(SCHEMA))) $(if $(POLICY_ENV),--env=$(call arg,$(POLICY_ENV))) $(if $(PATHS),$(call arg,$(PATHS)),overlays argocd)

scale: $(PY) ## OVERLAY=<env>/<launcher> NODES=N [GPUS_PER_NODE=G | PROCS_PER_NODE=P] [NEW_RUN=1] [DRY_RUN=1]: change every topology field
	@$(PY) -m policies.edit.scale scale $(call arg,$(EXPLICIT_OVERLAY)) --nodes=$(call arg,$(NODES)) $(if $(GPUS_PER_NODE),--gpus-per-node=$(call arg,$(GPUS_PER_NODE))) $(if $(PROCS_PER_NODE),--procs-per-node=$(call arg,$(PROCS_PER_NODE))) $(if $(NEW_RUN),--new-run) $(if $(RUN_ID),--run-id=$(call arg,$(RUN_ID))) $(if $(DRY_RUN),--dry-run) --base=$(call arg,$(BASE))

new-run: $(PY) ## OVERLAY=<env>/<launcher> [RUN_ID=run-NNN] [DRY_RUN=1]: start a new training run (new workload name and RUN_ID)
	@$(PY) -m policies.edit.scale new-run $(call arg,$(EXPLICIT_OVERLAY)) $(if $(RUN_ID),--run-id=$(call arg,$(RUN_ID))) $(if $(DRY_RUN),--dry-run)

recover: $(PY) ## [OVERLAY=<env>/<launcher>]: finish the change an interrupted make scale or make new-run left there; without OVERLAY, an interrupted make init, new-env, remove-env or image pinning
	@$(PY) -m policies.edit.scale recover $(call arg,$(EXPLICIT_OVERLAY))

validate-changed: $(PY) ## Validate only the overlays (and argocd/) your uncommitted changes touch: the pre-commit hook
	@$(PY) -m policies.changed

diff: $(PY) ## BASE=<git ref> [HEAD_REF=<ref>] [OVERLAY=<env>/<launcher>] [FORMAT=text|markdown|json]: rendered objects and topology that change
	@$(PY) -m policies.diff --base=$(call arg,$(BASE)) $(if $(HEAD_REF),--head=$(call arg,$(HEAD_REF))) $(if $(EXPLICIT_OVERLAY),--overlay=$(call arg,$(EXPLICIT_OVERLAY))) --format $(if $(filter markdown json,$(FORMAT)),$(FORMAT),text)

plan: $(PY) ## Show each overlay's effective torchrun topology (or PATHS="...") [PODS=1: every pod and its env] [FORMAT=json] [POLICY_ENV=<policy.yaml> for files]
	@$(PY) -m policies plan $(if $(filter json,$(FORMAT)),--format json) $(if $(PODS),--pods) $(if $(BUNDLE),--bundle) $(if $(POLICY_ENV),--env=$(call arg,$(POLICY_ENV))) $(if $(PATHS),$(call arg,$(PATHS)))

render: $(PY) ## Print the rendered manifests of PATHS (default: every overlay)
	@$(PY) -m policies render $(if $(PATHS),$(call arg,$(PATHS)))

simulate: $(PY) $(SIM_DEPS) ## Run OVERLAY's pods on this machine as the cluster would (SCALE_TO=N for GPU overlays, DEADLINE=s, FAULT="kill:1@step=6 ...", PVC="claim=folder ...")
	@$(PY) -m policies.simulate $(call arg,$(OVERLAY)) $(if $(SCALE_TO),--scale-to=$(call arg,$(SCALE_TO))) $(if $(DEADLINE),--deadline=$(call arg,$(DEADLINE))) $(if $(FAULT),--fault=$(call arg,$(FAULT))) $(foreach p,$(PVC),--pvc=$(call arg,$(p)))

report: $(PY) ## RUN=<run folder>: report.html and PNGs (loss, validation, throughput, step time per rank) from its metrics.jsonl
	@$(PY) -m trainer.report $(call arg,$(RUN))

test: $(PY) $(SIM_DEPS) $(WHEELHOUSE)/.complete ## Run the test suite: the unit level on every core (test-fast), then the slow tests on every core, a module to a worker
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" -n auto
	$(PY) -m pytest -q -p no:cacheprovider -m slow -n auto --dist loadscope

test-fast: $(PY) ## The unit-level loop: every test not marked slow (simulations, multi-process trainer runs, checkov, ...), on every core [K=<pytest -k selector>, e.g. K=jobset]
	$(PY) -m pytest -q -p no:cacheprovider -m "not slow" -n auto $(if $(K),-k $(call arg,$(K)))

typecheck: $(PY) ## Type-check policies/ and trainer/ with mypy (pinned in requirements-dev.txt; settings: pyproject.toml [tool.mypy])
	$(PY) -m mypy

tiny-lm: $(PY) ## Build .cache/tiny-lm: a GPT-2 folder (<1M params, random weights, BPE trained on the repo's Markdown) and JSONL data
	@$(PY) scripts/tiny_lm.py

bench: bench-validate bench-trainer bench-gpu ## Run every benchmark

bench-validate: $(PY) ## Time make validate and the schema and policy stages, up to 200+ generated overlays
	@$(PY) bench/bench_validate.py

bench-trainer: $(PY) ## Trainer samples/s and CPU time: 1 process x 1 and x 2 threads, 2 processes x 1, a plain DataLoader loop; a GPU epoch if present; causal-lm tokens/s (1 and 2 processes)
	@$(PY) bench/bench_trainer.py
	@$(PY) bench/bench_lm.py

bench-gpu: $(PY) ## On a CUDA device (NPROC=N: N GPUs, with scaling against 1): DDP epochs, the metrics endpoint, FSDP2 causal-lm tokens/s, MFU and peak memory, --compile, host syncs, both resumes; writes bench/gpu-<card>.md (no CUDA: says so, exits 0)
	@$(PY) bench/bench_gpu.py --nproc-per-node $(NPROC)

schemas: $(PY) ## Regenerate schemas/ from the pinned Kubernetes version (every kind) and the CRDs in crds/
	@$(PY) scripts/gen_schemas.py

docs: $(PY) ## Regenerate docs/rules.md from the rule registry, the launcher tables and counts from the launcher registry, and argocd-cm's Lua (argocd/health/, argocd/actions/)
	@$(PY) -m policies docs > docs/rules.md.tmp && mv docs/rules.md.tmp docs/rules.md
	@$(PY) -m policies docs --blocks

kind-up: $(PY) ## Create the kind cluster (kind/cluster.yaml), install the kind-cpu launcher's operator at pinned versions, apply overlays/kind-cpu (needs Docker)
	@scripts/kind-up.sh

image: ## Build the trainer image (needs a Docker engine)
	docker build -t $(call arg,$(IMAGE):$(TAG)) .

image-cpu: ## Build the CPU-only trainer image for kind (needs a Docker engine)
	docker build -f Dockerfile.cpu -t $(call arg,$(IMAGE):$(TAG)-cpu) .

image-cmp: ## Build the Argo CD plugin sidecar image (argocd/cmp/Dockerfile; needs a Docker engine with BuildKit)
	docker build -f argocd/cmp/Dockerfile -t $(call arg,$(CMP_IMAGE):$(TAG)) .

lint: $(PY) $(CHECKOV) ## Lint the Dockerfiles with hadolint, the GitHub workflows and action.yml with zizmor (offline) and every rendered overlay (or PATHS) with checkov
	$(VENV)/bin/hadolint Dockerfile Dockerfile.cpu argocd/cmp/Dockerfile
	$(VENV)/bin/zizmor --persona auditor --offline --min-severity medium --no-progress .github/ action.yml
	@CHECKOV=$(CURDIR)/$(CHECKOV) $(PY) -m policies.checkov_scan $(if $(PATHS),$(call arg,$(PATHS)))

clean: ## Remove the virtual environment and downloaded tools
	rm -rf $(VENV) $(CHECKOV_VENV) $(BIN) .pytest_cache
