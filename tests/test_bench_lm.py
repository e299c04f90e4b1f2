"""bench/bench_lm.py's GPU figures: the model is ~125M parameters and the model-FLOPs utilisation is 6 x parameters x
tokens/s over the GPUs' datasheet peak (the GPU run itself needs CUDA, which CI and this machine do not have)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import bench_lm  # noqa: E402


@pytest.mark.parametrize("name, peak", [("NVIDIA H100 80GB HBM3", 989.4e12), ("NVIDIA H100 PCIe", 756e12),
                                        ("NVIDIA H200", 989.4e12), ("NVIDIA A100-SXM4-80GB", 312e12),
                                        ("Tesla T4", 65e12), ("NVIDIA GeForce RTX 4090", None)])
def test_peak_by_device_name(name, peak):
    assert bench_lm.peak_flops(name) == peak


def test_mfu_is_six_flops_per_parameter_and_token():
    # 125M parameters at 400k tokens/s on 2 H100: 6 * 125e6 * 4e5 / (2 * 989.4e12) = 15.2 %
    assert bench_lm.mfu(125_000_000, 400_000, 2, 989.4e12) == pytest.approx(0.1516, abs=1e-4)


def test_the_gpu_model_has_about_125m_parameters():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    m = bench_lm.GPU_MODEL
    config = transformers.GPT2Config(vocab_size=2048, n_positions=m["positions"], n_embd=m["width"],
                                     n_layer=m["layers"], n_head=m["heads"], tie_word_embeddings=True)
    with torch.device("meta"):
        params = sum(p.numel() for p in transformers.GPT2LMHeadModel(config).parameters())
    assert 110e6 < params < 140e6, params
