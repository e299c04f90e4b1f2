"""The IDX reader and the mnist/fashion-mnist loaders on small files the tests write themselves."""

from __future__ import annotations

import argparse
import gzip
import struct

import numpy as np
import pytest

from trainer.errors import TrainerError
from trainer.idx import IdxError, encode_idx, parse_idx, read_idx
from trainer.tasks.mnist import loader
from trainer.tasks.mnist import find_files
from trainer_helpers import write_idx_dataset

pytestmark = pytest.mark.timeout(60)


def images(n=5, h=28, w=28, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, h, w)).astype(np.uint8)


def test_header_layout_is_the_published_one():
    # MNIST's train-images file starts 0x00000803 (ubyte, 3 dims), then 60000, 28, 28 as big-endian uint32
    raw = encode_idx(np.zeros((60000, 28, 28), dtype=np.uint8))
    assert raw[:16] == bytes.fromhex("00000803") + struct.pack(">III", 60000, 28, 28)
    assert len(raw) == 16 + 60000 * 28 * 28


def test_reads_uncompressed_and_gzip(tmp_path):
    arr = images()
    plain = tmp_path / "train-images-idx3-ubyte"
    plain.write_bytes(encode_idx(arr))
    packed = tmp_path / "train-images-idx3-ubyte.gz"
    packed.write_bytes(gzip.compress(encode_idx(arr)))
    for path in (plain, packed):
        got = read_idx(path, dtype=np.uint8, ndim=3)
        assert got.shape == (5, 28, 28) and got.dtype == np.uint8
        np.testing.assert_array_equal(got, arr)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.float32, np.float64])
def test_big_endian_types_round_trip(dtype):
    arr = (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
    got = parse_idx(encode_idx(arr))
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    np.testing.assert_array_equal(got, arr)


def test_bad_magic(tmp_path):
    raw = bytearray(encode_idx(images()))
    raw[0:2] = b"\x1f\x8b"  # e.g. a gzip file saved without its .gz suffix
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(bytes(raw))
    with pytest.raises(IdxError, match=r"train-images-idx3-ubyte: bad magic number 0x1f8b0803"):
        read_idx(path)


def test_unknown_type_code():
    raw = bytearray(encode_idx(images()))
    raw[2] = 0x07
    with pytest.raises(IdxError, match="unknown IDX type code 0x07"):
        parse_idx(bytes(raw))


@pytest.mark.parametrize("cut", [1, 100, 28 * 28 * 5])
def test_truncated_data(tmp_path, cut):
    raw = encode_idx(images())
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(raw[:-cut])
    with pytest.raises(IdxError, match=rf"truncated: dimensions \(5, 28, 28\) need 3920 data bytes, file has {3920 - cut}"):
        read_idx(path)


def test_truncated_header_and_short_file():
    raw = encode_idx(images())
    with pytest.raises(IdxError, match="truncated header"):
        parse_idx(raw[:10])
    with pytest.raises(IdxError, match="too short"):
        parse_idx(raw[:3])


def test_trailing_bytes_are_an_error():
    with pytest.raises(IdxError, match="3 unexpected bytes"):
        parse_idx(encode_idx(images()) + b"xyz")


def test_expected_dtype_and_dims():
    raw = encode_idx(images())
    with pytest.raises(IdxError, match="expected 1"):
        parse_idx(raw, ndim=1)
    with pytest.raises(IdxError, match="data type >i4"):
        parse_idx(encode_idx(np.zeros((3, 2), dtype=np.int32)), dtype=np.uint8)


def test_corrupt_and_truncated_gzip(tmp_path):
    packed = gzip.compress(encode_idx(images()))
    truncated = tmp_path / "a.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    garbage = tmp_path / "b.gz"
    garbage.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    for path in (truncated, garbage):
        with pytest.raises(IdxError, match="corrupt gzip stream"):
            read_idx(path)


def test_idx_error_is_a_trainer_error():
    # the trainer prints TrainerErrors as one [ERROR] line without a traceback
    assert issubclass(IdxError, TrainerError)


# ---- the tasks that read IDX files


def args_for(root):
    return argparse.Namespace(data_root=str(root))


@pytest.mark.parametrize("layout", ["mnist", "mnist/raw", "MNIST/raw", "."])
def test_mnist_finds_every_supported_layout(tmp_path, layout):
    write_idx_dataset(tmp_path / layout, n_train=32, n_val=8)
    data = loader("mnist")(args_for(tmp_path))
    assert data.train_x.shape == (32, 1, 28, 28) and data.val_x.shape == (8, 1, 28, 28)
    assert data.train_y.dtype.is_floating_point is False and int(data.train_y.max()) < 10
    assert abs(float(data.train_x.mean())) < 1e-4  # standardised with the training statistics
    assert "32 train + 8 val images" in data.description


def test_fashion_mnist_reads_gz_and_its_own_folder(tmp_path):
    write_idx_dataset(tmp_path / "fashion-mnist", n_train=16, n_val=4, gz=True)
    write_idx_dataset(tmp_path / "mnist", n_train=8, n_val=2)  # must not be picked for fashion-mnist
    data = loader("fashion-mnist")(args_for(tmp_path))
    assert len(data.train_y) == 16 and len(data.val_y) == 4
    assert str(tmp_path / "fashion-mnist") in data.description


def test_missing_root_and_missing_files(tmp_path):
    with pytest.raises(TrainerError, match=rf"data root {tmp_path / 'nope'} does not exist"):
        find_files(tmp_path / "nope", "mnist")
    with pytest.raises(TrainerError, match="no IDX files under"):
        find_files(tmp_path, "mnist")
    write_idx_dataset(tmp_path / "mnist", n_train=8, n_val=2)
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(TrainerError, match=r"lacks t10k-labels-idx1-ubyte\[.gz\]"):
        find_files(tmp_path, "mnist")


def test_inconsistent_files_are_refused(tmp_path):
    root = write_idx_dataset(tmp_path / "mnist", n_train=8, n_val=2)
    (root / "train-labels-idx1-ubyte").write_bytes(encode_idx(np.zeros(7, dtype=np.uint8)))
    with pytest.raises(IdxError, match="holds 8 images but .* holds 7 labels"):
        loader("mnist")(args_for(tmp_path))
    (root / "train-labels-idx1-ubyte").write_bytes(encode_idx(np.full(8, 12, dtype=np.uint8)))
    with pytest.raises(IdxError, match="label 12 outside 0..9"):
        loader("mnist")(args_for(tmp_path))
    (root / "train-images-idx3-ubyte").write_bytes(encode_idx(images(8, 27, 27)))
    with pytest.raises(IdxError, match="images are 27x27, expected 28x28"):
        loader("mnist")(args_for(tmp_path))
