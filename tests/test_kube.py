"""policies/kube/values.py: the one parser of resource quantities, against the forms k8s.io/apimachinery's
resource.ParseQuantity accepts and refuses (pkg/api/resource/quantity.go and its quantity_test.go)."""
from __future__ import annotations

from fractions import Fraction

import pytest

from policies.kube.values import parse_quantity, quantity_bytes, quantity_cpu, quantity_value


@pytest.mark.parametrize("text, value", [
    ("256Gi", 256 * 2**30), ("4e9", 4 * 10**9), ("4E9", 4 * 10**9), ("4G", 4 * 10**9), ("4000M", 4 * 10**9),
    ("1500m", Fraction(3, 2)), ("2", 2), ("0.5", Fraction(1, 2)), (".5", Fraction(1, 2)), ("5.", 5),
    ("+1Ki", 1024), ("-1", -1), ("1E", 10**18), ("100u", Fraction(1, 10**4)), ("1n", Fraction(1, 10**9)),
    ("1e-3", Fraction(1, 1000)), ("12e+2", 1200), (3, 3), (1.5, Fraction(3, 2)),
])
def test_quantities_the_api_server_accepts(text, value):
    q = parse_quantity(text)
    assert q is not None and q.value == value


@pytest.mark.parametrize("text", ["16K", "1e3m", "1.2.3", "abc", "", "1 Gi", "Gi", "1GiB", "0x10", None, True,
                                  float("nan"), "1e100"])
def test_quantities_the_api_server_refuses(text):
    assert parse_quantity(text) is None
    assert quantity_bytes(text) is None and quantity_cpu(text) is None and quantity_value(text) is None


def test_value_rounds_up_as_quantity_value_does():
    assert quantity_value("1500m") == 2 and quantity_value("2") == 2 and quantity_value("100u") == 1
    assert quantity_cpu("250m") == 0.25 and quantity_bytes("1Mi") == 2**20


def test_env_entry_is_the_kubelets_last_or_a_controllers_first():
    """A name defined twice: the kubelet gives the process the later definition (it builds the env in order, a later
    entry overwriting), while KubeRay's EnvVarByName and LWS's GetEnvVarValueIfInContainer stop at the first."""
    from policies.kube.values import env_entry

    c = {"env": [{"name": "A", "value": "1"}, "junk", {"name": "B"},
                 {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}
    assert env_entry(c, "A") == c["env"][3]
    assert env_entry(c, "A", first=True) == c["env"][0]
    assert env_entry(c, "B") == {"name": "B"} and env_entry(c, "C") is None and env_entry("x", "A") is None
