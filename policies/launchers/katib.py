"""Katib's Experiment (kubeflow.org/v1beta1, kubeflow/katib tag v0.19.0). It starts no pods itself: it makes Trials,
and each Trial creates the object written in `spec.trialTemplate.trialSpec` (a PyTorchJob, TrainJob, Job ...) with
every `${trialParameters.<name>}` replaced and the trial's name and namespace set; that object's own controller then
starts the pods. Here the trial's object is a child of the Experiment (base.Child), checked by its own launcher
module and rules as if it were written in the file, every problem reported against the Experiment at
`spec.trialTemplate.trialSpec...`. A template in a ConfigMap (`spec.trialTemplate.configMap`) is read where that
ConfigMap is in the same manifests (the Bundle `children` is given), in `configMapNamespace`, and its trial's problems
are reported at `spec.trialTemplate.configMap...`; one not in them is said in one info line, never refused.

What upstream does, at v0.19.0:
- pkg/controller.v1beta1/experiment/manifest/generator.go:89-107 GetRunSpecWithHyperParameters: the trialSpec is
  turned into JSON text, or a ConfigMap's data[templatePath] taken as it is (GetTrialTemplate, 199-226), and each
  placeholder `${trialParameters.<name>}` replaced in that text (applyParameters, 109-197): a reference to an
  experiment parameter takes the value the suggestion assigned; a meta reference
  `${trialSpec.Name|Namespace|Kind|APIVersion|Labels[k]|Annotations[k]}` the trial's. Then `SetName(trialName)` and
  `SetNamespace(trialNamespace)`.
- experiment/experiment_controller_util.go:39-97 getTrialInstance: the trial's namespace is the Experiment's, its
  name the suggestion's (suggestion/suggestionclient/suggestionclient.go:177: `<experiment>-<8 random characters>`).
- experiment/experiment_controller.go:286-340 ReconcileTrials: at most `parallelTrialCount` trials are active at
  once, fewer when `maxTrialCount` leaves fewer to run; pkg/apis/controller/experiments/v1beta1/constants.go:21
  defaults parallelTrialCount to 3.
- trial/trial_controller.go:277-338 reconcileJob: the trial creates the job as it is (owned by the Trial) and, once
  the trial completes, deletes it unless `trialTemplate.retain` is set.
- pkg/webhook/v1beta1/experiment/validator/validator.go:81-181, 305-438: what the webhook refuses (see `children`).
  experiment_defaults.go:97-137 fills successCondition and failureCondition for Job and the Kubeflow job kinds
  (constants.go:53 KubeflowJobKinds); for any other kind the webhook refuses an Experiment that sets neither.

The parameter values are not known before the suggestion service picks them: the trial checked here takes each
referenced parameter's `feasibleSpace.min` (int, double), else the first item of its `feasibleSpace.list`
(categorical, discrete), and the workload's notes say which values were used. Trial names take the placeholder
suffix `TRIAL_SUFFIX` (8 characters, as upstream's random ones), so name lengths are upstream's. Not modelled:
Katib's pod webhook (pkg/webhook/v1beta1/pod/inject_webhook.go:131-204) adds a metrics-collector sidecar to the
trial's primary pod and, for file collectors, wraps the primary container's command in a shell that redirects its
output; neither changes the env or the process the container starts."""
from __future__ import annotations

import json
import re
from typing import Any, Callable

from ..kube.values import as_int, listing, mapping
from ..kube.objects import INFO, Manifest
from ..render.loader import InputError, parse, parse_json
from .base import Bundle, Check, Child, Launcher, Workload

GROUP = "kubeflow.org"
KIND = "Experiment"
# constants.go:21 DefaultTrialParallelCount.
DEFAULT_PARALLEL = 3
# consts/const.go:135-143: the placeholder a trial parameter is written as, and a meta reference.
PLACEHOLDER = "${{trialParameters.{}}}"
ANY_PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
META_REFERENCE = re.compile(r"\$\{trialSpec\.(.+?)\}")
META_INDEXED = re.compile(r"(.+)\[(.+)]")
META_KEYS = ("Name", "Namespace", "Kind", "APIVersion", "Annotations", "Labels")
# experiment_defaults.go:103-134, constants.go:53-59: the kinds whose success and failure conditions Katib defaults.
DEFAULTED_KINDS = ("Job", "TFJob", "PyTorchJob", "XGBoostJob", "MPIJob", "TrainJob")
# A stand-in for suggestionclient.go's utilrand.String(8): the same length, from the same alphabet.
TRIAL_SUFFIX = "bcdfghjk"
# validator.go:84-92: the Experiment's name.
NAME_PATTERN = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_NAME = 40
# apimachinery's YAMLReader: a line `---` (a comment may follow) ends a document.
DOCUMENT_SEPARATOR = re.compile(r"^---[ \t]*(?:#.*)?$", re.MULTILINE)
# A bound on the trial's job as text: a long value put into many placeholders could otherwise grow without limit.
MAX_TRIAL_TEXT = 8 * 2**20

TEMPLATE = "spec.trialTemplate"
HINT = "see Katib's Experiment reference (kubeflow/katib v0.19.0 pkg/webhook/v1beta1/experiment/validator)"


def is_meta(reference: str) -> bool:
    """validator.go isMetaKey (576-594): `${trialSpec.<key>}` or `${trialSpec.<key>[index]}` of a known key."""
    m = META_REFERENCE.search(reference)
    if not m:
        return False
    key = m.group(1)
    sub = META_INDEXED.fullmatch(key)
    return key in META_KEYS or bool(sub and sub.group(1) in META_KEYS)


def parameter_value(parameter: dict[str, Any]) -> str | None:
    """The value the trial checked here takes: the feasible space's min, else its first listed value."""
    space = mapping(parameter.get("feasibleSpace"))
    if space.get("min") is not None:
        return str(space["min"])
    values = listing(space.get("list"))
    return str(values[0]) if values else None


def template_object(text: str) -> dict[str, Any] | None:
    """util.ConvertStringToUnstructured (pkg/controller.v1beta1/util/unstructured.go:47-59): the first document of
    the text (apimachinery's YAMLOrJSONDecoder reads one), as JSON where it starts with `{`, else as YAML, into an
    Unstructured, which needs a kind; None where it does not read so."""
    first = next((doc for doc in DOCUMENT_SEPARATOR.split(text) if doc.strip()), "")
    try:
        docs = (parse_json if first.lstrip().startswith("{") else parse)(first, "trial template")
    except (InputError, RecursionError):
        return None
    obj = docs[0].obj if len(docs) == 1 else None
    return obj if isinstance(obj, dict) and isinstance(obj.get("kind"), str) and obj["kind"] else None


def config_maps(bundle: Bundle) -> dict[tuple[str, str], Manifest]:
    """The v1 ConfigMaps of the manifests by metadata.namespace ('': none written) and name, the first of each
    (made once per bundle)."""
    return bundle.derived("katib-configmaps", lambda b: {(o.namespace, o.name): o for o in reversed(b.manifests)
                                                         if o.kind == "ConfigMap" and o.api_version == "v1"})


def trial_name(m: Manifest) -> str:
    return f"{m.name}-{TRIAL_SUFFIX}"


def parallel_trials(spec: dict[str, Any]) -> int:
    """How many trials run at once: parallelTrialCount (default 3), no more than maxTrialCount."""
    parallel = as_int(spec.get("parallelTrialCount"), DEFAULT_PARALLEL) or 0
    most = as_int(spec.get("maxTrialCount"))
    return max(0, min(parallel, most) if most is not None else parallel)


class ExperimentLauncher(Launcher[Workload]):
    id = "katib-experiment"
    order = 90
    upstream = "kubeflow/katib v0.19.0"
    title = "Katib Experiment (its trials' jobs are checked by their own launchers)"
    kinds = ((GROUP, KIND),)
    # The Experiments before v1beta1 hold trialTemplate.goTemplate (a Go template string or a ConfigMap's), no
    # trialSpec, primaryContainerName or trialParameters (v0.9.0 pkg/apis/controller/experiments/v1alpha3/
    # experiment_types.go 189-203; v0.6.0-rc.0 pkg/api/operators/apis/experiment/v1alpha2): not read as v1beta1.
    unread_versions = ("v1alpha2", "v1alpha3")
    starts_pods = False  # the trial's job starts them, through its own controller

    def children(self, m: Manifest, bundle: Bundle) -> list[Child]:
        """The trial's job Katib makes from the Experiment (one Child, run `parallelTrialCount` times at once)."""
        return self._read(m, bundle)[0]

    def refused(self, m: Manifest, bundle: Bundle) -> list[Check]:
        """What Katib's webhook refuses about the Experiment, and why its trial could not be checked."""
        return self._read(m, bundle)[1]

    def _read(self, m: Manifest, bundle: Bundle) -> tuple[list[Child], list[Check]]:
        """The webhook's checks and the trial generator in one pass, as upstream interleaves them (a refusal stops
        the trial from being made); worked out once per object and bundle (a ConfigMap in it may hold the
        template)."""
        made: dict[int, tuple[list[Child], list[Check]]] = bundle.derived("katib-trials", lambda b: {})
        found = made.get(id(m))
        if found is None:
            found = made[id(m)] = self._trial(m, bundle)
        return found

    def _trial(self, m: Manifest, bundle: Bundle) -> tuple[list[Child], list[Check]]:
        checks: list[Check] = []

        def refuse(field: str, message: str, hint: str = HINT) -> None:
            checks.append(Check(field, f"Katib's webhook refuses the Experiment: {message}", hint, obj=m))

        spec = mapping(m.obj.get("spec"))
        name = m.name
        if not NAME_PATTERN.match(name) or len(name) > MAX_NAME:
            refuse("metadata.name", f"name '{name}' must start with a lower-case letter and be at most {MAX_NAME} "
                   "characters (validator.go:84-92)", "rename the Experiment")
        counts = {k: as_int(spec.get(k)) for k in ("maxFailedTrialCount", "maxTrialCount", "parallelTrialCount")}
        if counts["maxFailedTrialCount"] is not None and counts["maxFailedTrialCount"] < 0:
            refuse("spec.maxFailedTrialCount", "maxFailedTrialCount is below 0")
        for key in ("maxTrialCount", "parallelTrialCount"):
            trials = counts[key]
            if trials is not None and trials <= 0:
                refuse(f"spec.{key}", f"{key} is {trials}, it must be greater than 0")
        most = counts["maxTrialCount"]
        for key in ("maxFailedTrialCount", "parallelTrialCount"):
            trials = counts[key]
            if most is not None and trials is not None and trials > most:
                refuse(f"spec.{key}", f"{key} {trials} is above maxTrialCount {most}",
                       f"set {key} to at most {most}")

        tt = spec.get("trialTemplate")
        if not isinstance(tt, dict):
            refuse(TEMPLATE, "spec.trialTemplate is missing", "write the trial's job in spec.trialTemplate.trialSpec")
            return [], checks
        if not tt.get("primaryContainerName"):
            refuse(f"{TEMPLATE}.primaryContainerName", "primaryContainerName is missing",
                   "name the trial's training container in primaryContainerName")
        trial_spec, config_map = tt.get("trialSpec"), tt.get("configMap")
        kind = str(mapping(trial_spec).get("kind") or "")
        # experiment_defaults.go:101: the defaults need a trialSpec of one of those kinds.
        if (trial_spec is None or kind not in DEFAULTED_KINDS) and \
                not (tt.get("successCondition") and tt.get("failureCondition")):
            what = (f"a trial of kind '{kind}'" if trial_spec is not None else
                    "a trial template in a ConfigMap" if config_map is not None else "an Experiment without a trialSpec")
            refuse(TEMPLATE, f"{what} needs successCondition and failureCondition (Katib defaults them only for a "
                   f"trialSpec of kind {', '.join(DEFAULTED_KINDS)})", "set both conditions in spec.trialTemplate")
        if tt.get("trialParameters") is None:
            refuse(f"{TEMPLATE}.trialParameters", "trialParameters is missing")
            return [], checks
        if trial_spec is None and config_map is None:
            refuse(TEMPLATE, "neither trialSpec nor configMap is set")
            return [], checks
        if trial_spec is not None and config_map is not None:
            refuse(TEMPLATE, "both trialSpec and configMap are set", "keep one of them")
            return [], checks
        if trial_spec is None:
            read = self._from_config_map(m, mapping(config_map), bundle, refuse, checks)
            if read is None:
                return [], checks
            text, trial_spec, source = read
            said, prefix = f"the trial template in {source}", f"{TEMPLATE}.configMap"
        elif not isinstance(trial_spec, dict):
            refuse(f"{TEMPLATE}.trialSpec", "trialSpec is not an object")
            return [], checks
        else:
            source, said, prefix = "", "the trialSpec", f"{TEMPLATE}.trialSpec"
            # generator.go:199-209 GetTrialTemplate: the trialSpec as JSON text.
            text = json.dumps(trial_spec, sort_keys=True, separators=(",", ":"))
        kind = str(trial_spec.get("kind") or "")

        # validator.go:352-411: the template text against trialParameters.
        parameters = {str(mapping(p).get("name")): mapping(p) for p in listing(spec.get("parameters"))}
        meta = mapping(trial_spec.get("metadata"))
        namespace = m.namespace or "default"
        probe = text  # the text as the webhook checks it, each parameter put in as `test-value` (validator.go:403)
        values: dict[str, str] = {}
        used: list[str] = []
        names: set[str] = set()
        refs: set[str] = set()
        for i, tp in enumerate(listing(tt.get("trialParameters"))):
            tp = mapping(tp)
            where = f"{TEMPLATE}.trialParameters[{i}]"
            pname, ref = str(tp.get("name") or ""), str(tp.get("reference") or "")
            if not pname or not ref or "{" in pname or "}" in pname:
                refuse(where, "a trial parameter needs a name and a reference, and its name no '{' or '}'")
                continue
            if pname in names:
                refuse(f"{where}.name", f"trial parameter name '{pname}' is given twice")
                continue
            if ref in refs:
                refuse(f"{where}.reference", f"trial parameter reference '{ref}' is given twice")
                continue
            names.add(pname)
            refs.add(ref)
            if not is_meta(ref):
                if parameters and ref not in parameters:
                    refuse(f"{where}.reference", f"trial parameter '{pname}' references '{ref}', which is not in "
                           "spec.parameters", "reference one of spec.parameters")
                value = parameter_value(parameters[ref]) if ref in parameters else None
                if value is not None:
                    values[pname] = value
                    used.append(f"{ref}={value}")
            else:
                key = META_REFERENCE.search(ref).group(1)  # type: ignore[union-attr]
                sub = META_INDEXED.fullmatch(key)
                if sub:
                    table = mapping(meta.get(sub.group(1).lower()))
                    if sub.group(2) not in table:
                        checks.append(Check(f"{where}.reference", f"trial parameter '{pname}' references "
                                            f"{sub.group(1).lower()} '{sub.group(2)}', which the metadata of "
                                            f"{said} does not have: Katib cannot make any trial "
                                            "(generator.go:168-179)",
                                            f"add it to the metadata.{sub.group(1).lower()} of {said}", obj=m))
                    else:
                        values[pname] = str(table[sub.group(2)])
                elif key in ("Labels", "Annotations"):
                    checks.append(Check(f"{where}.reference", f"trial parameter '{pname}' references {ref} without "
                                        f"a key: Katib cannot make any trial (generator.go:168-179)",
                                        f"write ${{trialSpec.{key}[<key>]}}", obj=m))
                else:
                    values[pname] = {"Name": trial_name(m), "Namespace": namespace, "Kind": kind,
                                     "APIVersion": str(trial_spec.get("apiVersion") or "")}[key]
            placeholder = PLACEHOLDER.format(pname)
            if placeholder not in text:
                refuse(f"{where}.name", f"trial parameter '{pname}' is not used in {said} ({placeholder})",
                       f"use it in {said}, or remove it")
                return [], checks
            value = values.get(pname, "test-value")
            if len(text) + text.count(placeholder) * (len(value) - len(placeholder)) > MAX_TRIAL_TEXT:
                checks.append(Check(where, f"the trial's job would be over {MAX_TRIAL_TEXT // 2**20} MiB once "
                                    f"'{pname}' is put in: it was not checked", "use shorter parameter values",
                                    obj=m, severity=INFO))
                return [], checks
            text = text.replace(placeholder, value)
            probe = probe.replace(placeholder, "test-value")
        left = sorted(set(ANY_PLACEHOLDER.findall(text)))
        if left:
            refuse(TEMPLATE, f"{said} uses {', '.join(left)}, not declared in trialParameters",
                   "declare each in spec.trialTemplate.trialParameters")
            return [], checks
        if source:
            # validator.go:414-419: the webhook reads the template with `test-value` put in; the controller reads it
            # again with the trial's values (generator.go:96-100), which may not read where those do not.
            checked = template_object(probe)
            if checked is None:
                refuse(prefix, f"{said} does not read as a Kubernetes object, YAML or JSON with a kind (unable to "
                       "convert spec.trialTemplate to unstructured, validator.go:414-419)", f"fix the YAML of {said}")
                return [], checks
            obj: Any = template_object(text)
            if obj is None:
                checks.append(Check(prefix, f"{said} does not read as a Kubernetes object once "
                                    f"{', '.join(used) or 'the trial metadata'} are put in: Katib cannot make "
                                    "that trial (generator.go:96-100)",
                                    f"quote the parameters' places in {said}", obj=m))
                return [], checks
            meta, trial_spec, kind = mapping(checked.get("metadata")), checked, str(checked["kind"])
        else:
            try:
                obj = json.loads(text)
            except ValueError:
                refuse(TEMPLATE, "the trialSpec is no longer valid JSON once the parameters are put in")
                return [], checks
        if meta.get("name") or meta.get("namespace"):
            refuse(f"{prefix}.metadata" if not source else prefix, f"{said} sets metadata.name or "
                   "metadata.namespace (Katib names each trial's job itself)", "remove them")
        if not trial_spec.get("apiVersion") or not kind:
            refuse(prefix, f"{said} has no apiVersion or kind")
            return [], checks
        if not isinstance(obj, dict):
            return [], checks
        # generator.go:102-104: the trial's name and namespace.
        md = dict(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else {}
        md["name"] = trial_name(m)
        md.pop("namespace", None)
        if m.namespace:
            md["namespace"] = m.namespace
        obj["metadata"] = md
        copies = parallel_trials(spec)
        notes = [f"a trial of {m.ref} (Katib; {copies} run at once"
                 + (f", its job from {source}" if source else "") + ")"
                 + (f", checked with {', '.join(used)} (each parameter's feasibleSpace min, else its first listed "
                    "value)" if used else "")]
        if tt.get("primaryContainerName"):
            notes.append(f"Katib's primary container: {tt['primaryContainerName']}")
        child = Child(Manifest(obj, m.source, m.index), m, prefix, copies=copies, notes=notes,
                      said_as=f"in each trial's {kind}" + (f" (from {source})" if source else ""))
        return [child], checks

    @staticmethod
    def _from_config_map(m: Manifest, cm: dict[str, Any], bundle: Bundle, refuse: Callable[..., None],
                         checks: list[Check]) -> tuple[str, dict[str, Any], str] | None:
        """The trial template Katib reads from a ConfigMap (generator.go:210-222 GetTrialTemplate: the ConfigMap
        `configMapName` in `configMapNamespace`, its `data` key `templatePath`), where the ConfigMap is in the
        manifests: (its text, the object it reads as with the placeholders left in, what it is in words). The
        webhook refuses a source without all three fields (validator.go:339-345), so the namespace is always the one
        written (katib_client.go:154-161 GetConfigMap reads configMap.Data in it; its default namespace, 181-186,
        applies only where none is passed). Not in the manifests: said in one info line, nothing refused."""
        field = f"{TEMPLATE}.configMap"
        name, ns, path = (str(cm.get(k) or "") for k in ("configMapName", "configMapNamespace", "templatePath"))
        if not (name and ns and path):
            refuse(field, "configMap needs configMapName, configMapNamespace and templatePath")
            return None
        source = f"ConfigMap {ns}/{name} key {path}"

        def unchecked(why: str, hint: str) -> None:
            checks.append(Check(field, f"the trial's job is written in {source}, {why}: the trial's job was not "
                                "checked", hint, obj=m, severity=INFO))

        found = config_maps(bundle).get((ns, name))
        if found is None:
            beside = [o for (_, n), o in config_maps(bundle).items() if n == name]
            unchecked("which is not in these manifests" + ("" if not beside else (
                f" (the ConfigMap {name} in them is in namespace {beside[0].namespace}, not {ns})"
                if beside[0].namespace else f" (the ConfigMap {name} in them has no namespace written)")),
                "validate the ConfigMap with the Experiment (a folder of both: --bundle), or write the job in "
                "spec.trialTemplate.trialSpec to have it checked")
            return None
        data = mapping(found.obj.get("data"))
        # generator.go:218-222: a key the ConfigMap lacks (errTrialTemplateNotFound), which the webhook refuses
        # (validator.go:347-352).
        if path not in data:
            refuse(f"{field}.templatePath", f"{found.ref} has no key '{path}' in its data (unable to find trial "
                   "template in ConfigMap)", f"set templatePath to one of its keys ({', '.join(list(map(str, data))[:8])})"
                   if data else f"add the trial's job to {found.ref} under data.{path}")
            return None
        text = data[path]
        if not isinstance(text, str):
            unchecked(f"whose data.{path} is not a string", f"write data.{path} of {found.ref} as a string")
            return None
        # generator.go:116-123: the template read with its placeholders left in gives the trial's kind, apiVersion,
        # labels and annotations that meta references take.
        raw = template_object(text)
        return text, raw if raw is not None else {}, source


LAUNCHER = ExperimentLauncher()
