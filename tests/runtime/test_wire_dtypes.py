"""Every flowc dtype crosses the wire (frames and chunked streams) with its bits: bfloat16,
which numpy's buffer protocol cannot export, and the unsigned integers at their extremes."""
import numpy as np

from runtime.dtypes import DType
from runtime.transport import decode_frame, decode_stream, encode_frame, encode_stream

TENSORS = [np.array([1.5, -0.0, np.inf, 3e38], DType.bf16.np),
           np.array([[65504, -2**-24]], np.float16), np.array([2**64 - 1, 0], np.uint64),
           np.array(2**32 - 1, np.uint32), np.arange(5, dtype=np.uint16)[::2],
           np.zeros((0, 3), DType.bf16.np)]


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes()


def test_frames_and_streams_carry_every_dtype():
    header, back = decode_frame(encode_frame({"step": 1}, TENSORS))
    _same(back, TENSORS)
    names = [f"t{k}" for k in range(len(TENSORS))]
    header, back = decode_stream(list(encode_stream({"feeds": names}, TENSORS, chunk_bytes=3)))
    _same(back, TENSORS)
