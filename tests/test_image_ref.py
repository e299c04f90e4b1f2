"""The image reference grammar (policies/kube/image_ref.py) against the upstream tests of the library the kubelet
parses images with, and IMG005 on the manifests: distribution/reference v0.6.0 reference_test.go TestReferenceParse
(every case of its table) and normalize_test.go TestValidateReferenceName and TestValidateRemoteName (every name)."""
from __future__ import annotations

import pytest

from policies.kube.image_ref import ImageRefError, image_problem, parse_image, parse_reference, placeholder
from policies.kube.objects import ERROR

from conftest import FIXTURES
from test_rules import problems_of

# (input, error or None, repository (Name()), domain, tag, digest): reference_test.go TestReferenceParse, in order.
REFERENCE_PARSE = [
    ('test_com', None, 'test_com', '', None, None),
    ('test.com:tag', None, 'test.com', '', 'tag', None),
    ('test.com:5000', None, 'test.com', '', '5000', None),
    ('test.com/repo:tag', None, 'test.com/repo', 'test.com', 'tag', None),
    ('test:5000/repo', None, 'test:5000/repo', 'test:5000', None, None),
    ('test:5000/repo:tag', None, 'test:5000/repo', 'test:5000', 'tag', None),
    (('test:5000/repo@sha256:' + 'f' * 64), None, 'test:5000/repo', 'test:5000', None, ('sha256:' + 'f' * 64)),
    (('test:5000/repo:tag@sha256:' + 'f' * 64), None, 'test:5000/repo', 'test:5000', 'tag', ('sha256:' + 'f' * 64)),
    ('test:5000/repo', None, 'test:5000/repo', 'test:5000', None, None),
    ('', 'repository name must have at least one component', None, None, None, None),
    (':justtag', 'invalid reference format', None, None, None, None),
    (('@sha256:' + 'f' * 64), 'invalid reference format', None, None, None, None),
    (('repo@sha256:' + 'f' * 34), 'invalid checksum digest length', None, None, None, None),
    (('validname@invaliddigest:' + 'f' * 64), 'unsupported digest algorithm', None, None, None, None),
    ('Uppercase:tag', 'repository name must be lowercase', None, None, None, None),
    ('test:5000/Uppercase/lowercase:tag', 'repository name must be lowercase', None, None, None, None),
    ('lowercase:Uppercase', None, 'lowercase', '', 'Uppercase', None),
    (('domain/' + 'a' * 256 + ':tag'), 'repository name must not be more than 255 characters', None, None, None, None),
    ('a/' * 127 + 'a:tag-puts-this-over-max', None, 'a/' * 127 + 'a', 'a', 'tag-puts-this-over-max', None),
    ('aa/asdf$$^/aa', 'invalid reference format', None, None, None, None),
    ('sub-dom1.foo.com/bar/baz/quux', None, 'sub-dom1.foo.com/bar/baz/quux', 'sub-dom1.foo.com', None, None),
    ('sub-dom1.foo.com/bar/baz/quux:some-long-tag',
      None, 'sub-dom1.foo.com/bar/baz/quux', 'sub-dom1.foo.com', 'some-long-tag', None),
    ('b.gcr.io/test.example.com/my-app:test.example.com',
      None, 'b.gcr.io/test.example.com/my-app', 'b.gcr.io', 'test.example.com', None),
    ('xn--n3h.com/myimage:xn--n3h.com', None, 'xn--n3h.com/myimage', 'xn--n3h.com', 'xn--n3h.com', None),
    (('xn--7o8h.com/myimage:xn--7o8h.com@sha512:' + 'f' * 128),
      None, 'xn--7o8h.com/myimage', 'xn--7o8h.com', 'xn--7o8h.com', ('sha512:' + 'f' * 128)),
    ('foo_bar.com:8080', None, 'foo_bar.com', '', '8080', None),
    ('foo/foo_bar.com:8080', None, 'foo/foo_bar.com', 'foo', '8080', None),
    ('192.168.1.1', None, '192.168.1.1', '', None, None),
    ('192.168.1.1:tag', None, '192.168.1.1', '', 'tag', None),
    ('192.168.1.1:5000', None, '192.168.1.1', '', '5000', None),
    ('192.168.1.1/repo', None, '192.168.1.1/repo', '192.168.1.1', None, None),
    ('192.168.1.1:5000/repo', None, '192.168.1.1:5000/repo', '192.168.1.1:5000', None, None),
    ('192.168.1.1:5000/repo:5050', None, '192.168.1.1:5000/repo', '192.168.1.1:5000', '5050', None),
    ('[2001:db8::1]', 'invalid reference format', None, None, None, None),
    ('[2001:db8::1]:5000', 'invalid reference format', None, None, None, None),
    ('[2001:db8::1]:tag', 'invalid reference format', None, None, None, None),
    ('[2001:db8::1]/repo', None, '[2001:db8::1]/repo', '[2001:db8::1]', None, None),
    ('[2001:db8:1:2:3:4:5:6]/repo:tag', None, '[2001:db8:1:2:3:4:5:6]/repo', '[2001:db8:1:2:3:4:5:6]', 'tag', None),
    ('[2001:db8::1]:5000/repo', None, '[2001:db8::1]:5000/repo', '[2001:db8::1]:5000', None, None),
    ('[2001:db8::1]:5000/repo:tag', None, '[2001:db8::1]:5000/repo', '[2001:db8::1]:5000', 'tag', None),
    (('[2001:db8::1]:5000/repo@sha256:' + 'f' * 64),
      None, '[2001:db8::1]:5000/repo', '[2001:db8::1]:5000', None, ('sha256:' + 'f' * 64)),
    (('[2001:db8::1]:5000/repo:tag@sha256:' + 'f' * 64),
      None, '[2001:db8::1]:5000/repo', '[2001:db8::1]:5000', 'tag', ('sha256:' + 'f' * 64)),
    ('[2001:db8::]:5000/repo', None, '[2001:db8::]:5000/repo', '[2001:db8::]:5000', None, None),
    ('[::1]:5000/repo', None, '[::1]:5000/repo', '[::1]:5000', None, None),
    ('[fe80::1%eth0]:5000/repo', 'invalid reference format', None, None, None, None),
    ('[fe80::1%@invalidzone]:5000/repo', 'invalid reference format', None, None, None, None),
    (('example.com/' + 'a' * 255 + ':tag'), None, ('example.com/' + 'a' * 255), 'example.com', 'tag', None),]


@pytest.mark.parametrize("text, err, repository, domain, tag, digest", REFERENCE_PARSE,
                         ids=[c[0][:60] or "empty" for c in REFERENCE_PARSE])
def test_reference_parse_as_upstream(text, err, repository, domain, tag, digest):
    if err is not None:
        with pytest.raises(ImageRefError) as e:
            parse_reference(text)
        assert str(e.value) == err
        return
    ref = parse_reference(text)
    assert (f"{ref.domain}/{ref.path}" if ref.domain else ref.path) == repository
    assert (ref.domain, ref.tag, ref.digest) == (domain, tag, digest)


# normalize_test.go TestValidateReferenceName and TestValidateRemoteName: ParseNormalizedNamed accepts / refuses.
VALID_NAMES = [
    "docker/docker", "library/debian", "debian", "localhost/library/debian", "localhost/debian",
    "LOCALDOMAIN/library/debian", "LOCALDOMAIN/debian", "docker.io/docker/docker", "docker.io/library/debian",
    "docker.io/debian", "index.docker.io/docker/docker", "index.docker.io/library/debian", "index.docker.io/debian",
    "127.0.0.1:5000/docker/docker", "127.0.0.1:5000/library/debian", "127.0.0.1:5000/debian", "192.168.0.1",
    "192.168.0.1:80", "192.168.0.1:8/debian", "192.168.0.2:25000/debian",
    "thisisthesongthatneverendsitgoesonandonandonthisisthesongthatnev", "[fc00::1]:5000/docker",
    "[fc00::1]:5000/docker/docker", "[fc00:1:2:3:4:5:6:7]:5000/library/debian",
    "docker.io/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "Docker/docker", "DOCKER/docker",
    "docker-rules/docker", "docker---rules/docker", "doc/docker", "d/docker", "jess/t", "dock__er/docker",
]
INVALID_NAMES = [
    "https://github.com/docker/docker", "docker/Docker", "-docker", "-docker/docker", "-docker.io/docker/docker",
    "docker///docker", "docker.io/docker/Docker", "docker.io/docker///docker", "[fc00::1]", "[fc00::1]:5000",
    "fc00::1:5000/debian", "[fe80::1%eth0]:5000/debian", "[2001:db8:3:4::192.0.2.33]:5000/debian",
    "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "docker-/docker", "-docker-/docker",
    "____/____", "_docker/_docker", "dock..er/docker", "dock_.er/docker", "dock-.er/docker", "docker/",
    "this_is_not_a_valid_namespace_because_its_lenth_is_greater_than_255_" * 4 + "/docker",
]


@pytest.mark.parametrize("name", VALID_NAMES)
def test_normalized_names_upstream_accepts(name):
    parse_image(name)
    assert image_problem(name) is None


@pytest.mark.parametrize("name", INVALID_NAMES)
def test_normalized_names_upstream_refuses(name):
    with pytest.raises(ImageRefError):
        parse_image(name)


@pytest.mark.parametrize("image, why", [
    # Messages as the kubelet's events show them (InspectFailed "Failed to apply default image tag ...").
    ("busyBOX", "invalid reference format: repository name (library/busyBOX) must be lowercase"),
    ("hfhugs/unsloth-gemma-3-4b-it-GGUF:Q4_K_XL",
     "invalid reference format: repository name (hfhugs/unsloth-gemma-3-4b-it-GGUF) must be lowercase"),
    ("registry.hub.docker.com/library//nginx:latest", "invalid reference format"),
    (":sha-0b293ab", "invalid reference format"),
    ("<ACCOUNT_ID>.dkr.ecr.<REGION>.amazonaws.com/eks_mlperf_training:mlp", "invalid reference format"),
    ("pytorch/pytorch@sha256:abc", "invalid reference format"),
    ("pytorch/pytorch@sha256:" + "A" * 64, "invalid checksum digest format"),
    ("pytorch/pytorch@sha256:" + "a" * 63 + "0" * 32, "invalid checksum digest length"),
    ("pytorch/pytorch:" + "t" * 129, "invalid reference format"),
    ("ghcr.io/x/trainer:1.0\n", "must not have leading or trailing whitespace"),
])
def test_image_problem_says_what_the_kubelet_says(image, why):
    assert image_problem(image)[1] == why


TWO_IMAGES = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: t}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {image: "${IMAGE}"}
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers: [{name: fetch, image: "Busybox:1.36"}]
      containers: [{name: main, image: "busybox:1.36"}]
"""
KUBELET = "the kubelet cannot parse it (InvalidImageName), so the container never starts"
UPPERCASE = "invalid reference format: repository name (library/Busybox) must be lowercase"
FILL_IN = "invalid reference format: repository name (library/${IMAGE}) must be lowercase"


def _img005(tmp_path, text: str) -> set[tuple]:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return {(p.severity, p.obj, p.field, p.message, p.hint) for p in problems_of(path) if p.rule == "IMG005"}


def test_img005_on_an_init_container_and_a_trainjob_placeholder(tmp_path):
    """A typo and a template's placeholder are both errors; the message names the placeholder."""
    assert _img005(tmp_path, TWO_IMAGES) == {
        (ERROR, "Job/j", "spec.template.spec.initContainers[0].image",
         f"image 'Busybox:1.36' is not a valid image reference ({UPPERCASE}): {KUBELET}",
         "write [registry/]path[:tag][@sha256:<64 hex>] with a lowercase path and no spaces"),
        (ERROR, "TrainJob/t", "spec.trainer.image",
         f"image '${{IMAGE}}' holds the placeholder '${{IMAGE}}' ({FILL_IN}): {KUBELET}",
         "fill the placeholder in and validate what is applied (after envsubst or the edit that fills it)")}


@pytest.mark.parametrize("image, mark", [
    ("<ACCOUNT_ID>.dkr.ecr.<REGION>.amazonaws.com/eks_mlperf_training:mlp", "<ACCOUNT_ID>"),
    ("<CHANGE ME>", "<CHANGE ME>"), ("${REGISTRY}${IMAGE}${TAG}-${ext}", "${REGISTRY}"),
    ("ghcr.io/x/{{ .Values.tag }}", "{{ .Values.tag }}"), ("IMAGE_NAME", "IMAGE_NAME"),
    ("DUMMY_IMAGE:TEST", "DUMMY_IMAGE"), ("ghcr.io/Acme/Trainer:1.0", None), ("$(IMAGE)", None),
    ("x@sha256:" + "A" * 64, None), ("x:TAG", "TAG"),
])
def test_placeholder_named(image, mark):
    assert placeholder(image) == mark
