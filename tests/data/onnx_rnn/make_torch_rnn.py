"""Makes torch_rnn.onnx and torch_rnn_io.npz, read by tests/dsl/test_onnx_rnn.py (the test
needs neither torch nor this script):

    python tests/data/onnx_rnn/make_torch_rnn.py        # with torch and onnx installed

A 2-layer bidirectional nn.LSTM (input 5, hidden 8) whose output feeds an nn.GRU (hidden 6),
weights from torch.manual_seed(0), exported by torch.onnx (TorchScript exporter, opset 14)
with the time and batch dims dynamic, so flowc runs both layers in while loops. The .npz holds
two inputs of different lengths and batch sizes (x0, x1) and PyTorch's outputs for each
(y0, h0, c0, gru_h0, ...).
"""
import os

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(5, 8, num_layers=2, bidirectional=True)
        self.gru = nn.GRU(16, 6)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        z, gru_h = self.gru(y)
        return z, h, c, gru_h


def main():
    torch.manual_seed(0)
    net = Net().eval()
    names = ["y", "h", "c", "gru_h"]
    dynamic = {"x": {0: "seq", 1: "batch"}, "y": {0: "seq", 1: "batch"},
               "h": {1: "batch"}, "c": {1: "batch"}, "gru_h": {1: "batch"}}
    torch.onnx.export(net, (torch.zeros(4, 2, 5),), os.path.join(HERE, "torch_rnn.onnx"),
                      input_names=["x"], output_names=names, dynamic_axes=dynamic,
                      opset_version=14, dynamo=False)
    rng = np.random.default_rng(0)
    data = {}
    for k, shape in enumerate([(7, 3, 5), (12, 1, 5)]):
        x = rng.standard_normal(shape).astype(np.float32)
        data[f"x{k}"] = x
        with torch.no_grad():
            for name, value in zip(names, net(torch.from_numpy(x))):
                data[f"{name}{k}"] = value.numpy()
    np.savez_compressed(os.path.join(HERE, "torch_rnn_io.npz"), **data)


if __name__ == "__main__":
    main()
