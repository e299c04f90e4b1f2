"""The simulator maps each in-pod path (volume mounts, the image's /app) to its host folder. A run folder under /tmp
(pytest's, or a user's --run-dir) once held /out's mapping, which the pod's /tmp emptyDir then mapped again: pods of
one job wrote to different folders and the world hung at its end."""
from pathlib import Path

from policies.simulate.pods import rewrite

MAPPING = {"/app": Path("/work/repo"), "/out": Path("/tmp/run/pvc/outputs-pvc"),
           "/tmp": Path("/tmp/run/pods/p-0/volumes/tmp"), "/data": Path("/tmp/run/pvc/datasets-pvc")}


def test_each_path_is_mapped_once():
    got = rewrite("--out-dir=/out/run-001 --data-root=/data /app/trainer/train.py", MAPPING)
    assert got == ("--out-dir=/tmp/run/pvc/outputs-pvc/run-001 --data-root=/tmp/run/pvc/datasets-pvc "
                   "/work/repo/trainer/train.py")


def test_the_pods_own_tmp_and_paths_that_only_start_alike():
    assert rewrite("/tmp/x", MAPPING) == "/tmp/run/pods/p-0/volumes/tmp/x"
    assert rewrite("/outside /data2 a/out", MAPPING) == "/outside /data2 a/out"
    assert rewrite("/out:/tmp", MAPPING) == "/tmp/run/pvc/outputs-pvc:/tmp/run/pods/p-0/volumes/tmp"
