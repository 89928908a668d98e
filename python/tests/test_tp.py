"""Checkpoint.linear(prefix, tp_rank=, tp_size=): one rank's share of a layer.
Column shards put back per fused part equal the whole layer bit for bit; row
shards on their slices of x sum to it up to float32 summation order (MXFP8
quantizes activations per 32-block, inside one rank's slice); refusals name
the layer and the value."""
import numpy as np
import pytest

import mixq


def activations(m, k, seed=3):
    return np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)


def test_column_shards_of_a_fused_layer_concatenate_per_part(ckpt):
    prefix = "blocks.0.mlp.fc1"  # nvfp4 [128, 64], fused [gate; up]: 2 parts of 64
    whole = ckpt.linear(prefix, "ref")
    x = activations(3, whole.in_features)
    y = whole.forward(x)
    w = whole.dequantize()
    for rank in range(2):
        shard = ckpt.linear(prefix, "ref", tp_rank=rank, tp_size=2)
        assert (shard.tp_rank, shard.tp_size, shard.parallel) == (rank, 2, "column")
        assert (shard.out_features, shard.in_features) == (64, 64)
        rows = np.r_[rank * 32:(rank + 1) * 32, 64 + rank * 32:64 + (rank + 1) * 32]
        np.testing.assert_array_equal(shard.forward(x), y[:, rows])
        np.testing.assert_array_equal(shard.dequantize(), w[rows])


def test_row_shards_sum_to_the_layer(ckpt):
    prefix = "blocks.0.mlp.fc2"  # mxfp8 [64, 128], row-parallel
    whole = ckpt.linear(prefix)
    k = whole.in_features
    x = activations(5, k)
    y = whole.forward(x)
    w = whole.dequantize()
    parts, total = [], np.zeros_like(y)
    for rank in range(2):
        shard = ckpt.linear(prefix, tp_rank=rank, tp_size=2)
        assert (shard.parallel, shard.out_features, shard.in_features) == ("row", 64, k // 2)
        total += shard.forward(x[:, rank * k // 2:(rank + 1) * k // 2])
        parts.append(shard.dequantize())
    np.testing.assert_array_equal(np.hstack(parts), w)
    # Worst-case float32 summation error in another order (and x4 for quantized x).
    bound = 4 * (k + 2) * 2.0**-24 * (np.abs(x) @ np.abs(w).T + 1.0)
    assert np.all(np.abs(total - y) <= bound)


def test_refusals_name_the_layer_and_value(ckpt):
    with pytest.raises(mixq.Error, match="rank 2 is out of range for tensor-parallel degree 2"):
        ckpt.linear("blocks.0.mlp.fc2", tp_rank=2, tp_size=2)
    with pytest.raises(mixq.Error, match=r"'blocks.0.mlp.fc2' does not admit --tp 3: row-parallel: 128 input"):
        ckpt.linear("blocks.0.mlp.fc2", tp_rank=0, tp_size=3)
    with pytest.raises(mixq.Error, match="no linear layer 'nope'"):
        ckpt.linear("nope", tp_rank=0, tp_size=2)
