"""`accelerate launch --config_file PATH`: the settings its command line leaves out come from that file, read where a
ConfigMap or Secret in the manifests is mounted at PATH (the kubelet's projection: every key a file, or the listed
items, a subPath one file); the command line wins (accelerate commands/launch.py _validate_launch_command, commit
00785cd9); a file the manifests do not give is said (TOPO012 info), never guessed from accelerate's defaults."""
from __future__ import annotations

import yaml

from policies.report import engine
from policies.launchers.pods import mounted_file
from policies.kube.objects import ERROR, INFO, Manifest

from conftest import FIXTURES

PASS = FIXTURES / "rules/TOPO001/pass/accelerate-config-file.yaml"


class FakePod:
    def __init__(self, volumes, mounts):
        self.spec = {"volumes": volumes}
        self.container = {"volumeMounts": mounts}


STORES = ({"cfg": {"a.yaml": "A", "b.yaml": "B"}}, {"sec": {"token": "T"}})


def read(volumes, mounts, path):
    return mounted_file(FakePod(volumes, mounts), path, *STORES)


def test_a_configmap_volume_gives_each_key_as_a_file():
    vol = [{"name": "v", "configMap": {"name": "cfg"}}]
    assert read(vol, [{"name": "v", "mountPath": "/etc/x"}], "/etc/x/a.yaml") == "A"
    assert read(vol, [{"name": "v", "mountPath": "/etc/x/"}], "/etc/x//b.yaml") == "B"
    assert read(vol, [{"name": "v", "mountPath": "/etc/x"}], "/etc/x/c.yaml") is None
    assert read(vol, [{"name": "v", "mountPath": "/etc/y"}], "/etc/x/a.yaml") is None


def test_items_project_only_the_listed_keys_at_their_paths():
    vol = [{"name": "v", "configMap": {"name": "cfg", "items": [{"key": "a.yaml", "path": "conf/accel.yaml"}]}}]
    assert read(vol, [{"name": "v", "mountPath": "/etc/x"}], "/etc/x/conf/accel.yaml") == "A"
    assert read(vol, [{"name": "v", "mountPath": "/etc/x"}], "/etc/x/a.yaml") is None


def test_a_subpath_mount_is_that_file_of_the_volume():
    vol = [{"name": "v", "configMap": {"name": "cfg"}}]
    assert read(vol, [{"name": "v", "mountPath": "/etc/accel.yaml", "subPath": "b.yaml"}], "/etc/accel.yaml") == "B"
    assert read(vol, [{"name": "v", "mountPath": "/etc/accel.yaml", "subPathExpr": "$(X)"}], "/etc/accel.yaml") is None


def test_secret_and_projected_sources():
    assert read([{"name": "s", "secret": {"secretName": "sec"}}], [{"name": "s", "mountPath": "/s"}], "/s/token") == "T"
    projected = [{"name": "p", "projected": {"sources": [{"secret": {"name": "sec"}}, {"configMap": {"name": "cfg"}}]}}]
    assert read(projected, [{"name": "p", "mountPath": "/p"}], "/p/a.yaml") == "A"
    assert read(projected, [{"name": "p", "mountPath": "/p"}], "/p/token") == "T"
    # The deepest mount holding the path is the one that serves it.
    both = [{"name": "v", "configMap": {"name": "cfg"}}, {"name": "e", "emptyDir": {}}]
    assert read(both, [{"name": "e", "mountPath": "/etc"}, {"name": "v", "mountPath": "/etc/x"}], "/etc/x/a.yaml") == "A"
    assert read(both, [{"name": "e", "mountPath": "/etc"}], "/etc/x/a.yaml") is None


def validate(objs) -> engine.Unit:
    unit = engine.Unit("a.yaml", "file", [Manifest(o, "a.yaml", i) for i, o in enumerate(objs)])
    engine.check_policies(unit)
    return unit


def test_the_world_comes_from_the_mounted_config():
    unit = validate([d for d in yaml.safe_load_all(PASS.read_text()) if d])
    (t,) = unit.topologies
    assert (t.nnodes_max, t.nproc, t.world_size) == (2, 2, 4)
    assert t.first.endpoint.value == "ddp-train-run-001-0.ddp-train:29500"
    assert not [p.line() for p in unit.problems if p.severity == ERROR]


def test_a_config_the_manifests_do_not_give_is_said_not_guessed():
    """The file in the image: before, accelerate's defaults were assumed (1 machine, 127.0.0.1) and TOPO001 and
    TOPO003 said the 2-pod world could not form."""
    docs = [d for d in yaml.safe_load_all(PASS.read_text()) if d and d.get("metadata", {}).get("name") !=
            "accelerate-config"]
    job = next(d for d in docs if d["kind"] == "Job")
    spec = job["spec"]["template"]["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "accelerate-config"]
    spec["containers"][0]["volumeMounts"] = [m for m in spec["containers"][0]["volumeMounts"]
                                             if m["name"] != "accelerate-config"]
    unit = validate(docs)
    assert not [p.line() for p in unit.problems if p.severity == ERROR]
    (said,) = [p for p in unit.problems if p.rule == "TOPO012"]
    assert said.severity == INFO and "/etc/accelerate/multi-node.yaml" in said.message
    assert said.field == "spec.template.spec.containers[0].args[0]"


def test_a_wrong_config_is_reported_at_its_key():
    path = FIXTURES / "rules/TOPO001/fail/accelerate-config-file-three-machines.yaml"
    unit = validate([d for d in yaml.safe_load_all(path.read_text()) if d])
    (p,) = [p for p in unit.problems if p.rule == "TOPO001"]
    assert p.message.startswith("num_machines in /etc/accelerate/multi-node.yaml is 3 but indexed-job creates 2 pods")
