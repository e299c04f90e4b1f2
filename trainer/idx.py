"""Reader for the IDX format of MNIST and Fashion-MNIST (train-images-idx3-ubyte etc., optionally .gz).

Format: two zero bytes, a type code, the number of dimensions, one big-endian uint32 per dimension, then the
data in row-major order, big-endian. Every header field and the data size are checked; any mismatch is an
`IdxError` naming the file.
"""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

from trainer.errors import TrainerError

# type code -> numpy dtype (big-endian where it matters), from the format's definition
DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class IdxError(TrainerError):
    """The file is not a well-formed IDX file of the expected shape."""


def _read_bytes(path: Path) -> bytes:
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise IdxError(f"{path}: corrupt gzip stream ({e or type(e).__name__})") from None
    except OSError as e:
        raise IdxError(f"{path}: cannot read ({e.strerror or e})") from None


def parse_idx(raw: bytes, name: str = "<bytes>", dtype: DTypeLike | None = None,
              ndim: int | None = None) -> np.ndarray:
    """Parse IDX bytes into an array, checking magic, type code, dimensions and size."""
    if len(raw) < 4:
        raise IdxError(f"{name}: {len(raw)} bytes, too short for an IDX header")
    zero1, zero2, code, dims_n = raw[0], raw[1], raw[2], raw[3]
    magic = int.from_bytes(raw[:4], "big")
    if zero1 != 0 or zero2 != 0:
        raise IdxError(f"{name}: bad magic number 0x{magic:08x} (an IDX file starts with two zero bytes)")
    if code not in DTYPES:
        raise IdxError(f"{name}: unknown IDX type code 0x{code:02x} in magic number 0x{magic:08x}")
    if dims_n == 0:
        raise IdxError(f"{name}: magic number 0x{magic:08x} declares zero dimensions")
    header = 4 + 4 * dims_n
    if len(raw) < header:
        raise IdxError(f"{name}: truncated header ({len(raw)} bytes, {dims_n} dimensions need {header})")
    dims = struct.unpack(f">{dims_n}I", raw[4:header])
    found = np.dtype(DTYPES[code])
    if dtype is not None and found != np.dtype(dtype):
        raise IdxError(f"{name}: data type {found} (code 0x{code:02x}), expected {np.dtype(dtype)}")
    if ndim is not None and dims_n != ndim:
        raise IdxError(f"{name}: {dims_n} dimensions {tuple(dims)}, expected {ndim}")
    expected = math.prod(dims) * found.itemsize
    actual = len(raw) - header
    if actual < expected:
        raise IdxError(f"{name}: truncated: dimensions {tuple(dims)} need {expected} data bytes, file has {actual}")
    if actual > expected:
        raise IdxError(f"{name}: {actual - expected} unexpected bytes after the data of dimensions {tuple(dims)}")
    arr = np.frombuffer(raw, dtype=found, count=math.prod(dims), offset=header).reshape(dims)
    # a writable array in native byte order (frombuffer's view of `bytes` is read-only)
    return arr.astype(found.newbyteorder("="), copy=True)


def read_idx(path: str | Path, dtype: DTypeLike | None = None, ndim: int | None = None) -> np.ndarray:
    """Read one IDX file (gzip-compressed when its name ends in .gz)."""
    path = Path(path)
    return parse_idx(_read_bytes(path), str(path), dtype=dtype, ndim=ndim)


def encode_idx(arr: np.ndarray) -> bytes:
    """The IDX bytes of `arr` (used to write test fixtures and benchmark data)."""
    codes = {np.dtype(v).newbyteorder("=") if np.dtype(v).itemsize > 1 else np.dtype(v): k for k, v in DTYPES.items()}
    native = np.dtype(arr.dtype).newbyteorder("=") if arr.dtype.itemsize > 1 else arr.dtype
    if native not in codes:
        raise ValueError(f"dtype {arr.dtype} has no IDX type code")
    big = arr.astype(native.newbyteorder(">") if native.itemsize > 1 else native, copy=False)
    head = bytes([0, 0, codes[native], arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + np.ascontiguousarray(big).tobytes()
