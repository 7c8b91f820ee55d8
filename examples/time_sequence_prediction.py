"""The time-sequence prediction of pytorch/examples (time_sequence_prediction/), trained the way it is:
sine waves with random phase shifts as float64 sequences, a model of two stacked LSTMCells and a
Linear layer stepped over the sequence one column at a time (input.split(1, dim=1)) and then fed
its own outputs to predict `future` further steps, MSELoss, the LBFGS optimizer with a closure that
prints the loss at every evaluation, and a test prediction under no_grad.

A PyTorch program: the waves' phase shifts come from a formula in place of numpy's random draw
(and there are fewer, shorter waves), the initial weights too, so that every library starts from
the same model; run it on fastgrad unchanged with
`python -m fastgrad.run examples/time_sequence_prediction.py`.
"""

import math

import torch
import torch.nn as nn
import torch.optim as optim

PERIOD, LENGTH, WAVES, HIDDEN = 20, 40, 8, 12


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.double)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _ in range(future):  # the model's own output as the next input
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


def main():
    shifts = [int(4 * PERIOD * math.sin(3.1 * i)) for i in range(WAVES)]
    x = torch.tensor([[float(t + s) for t in range(LENGTH)] for s in shifts], dtype=torch.float64)
    data = torch.sin(x / PERIOD)
    input, target = data[3:, :-1], data[3:, 1:]
    test_input, test_target = data[:3, :-1], data[:3, 1:]
    seq = Sequence()
    seq.double()
    with torch.no_grad():
        for i, p in enumerate(seq.parameters()):
            p.copy_(torch.cos(torch.arange(p.numel(), dtype=torch.float64) * 0.83 + i).view(p.shape) * 0.3)
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    for i in range(3):
        print("STEP: ", i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print("loss:", f"{loss.item():.10f}")
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print("test loss:", f"{loss.item():.10f}")
            print("prediction tail:", " ".join(f"{v:.6f}" for v in pred[0, -3:].tolist()))


if __name__ == "__main__":
    main()
