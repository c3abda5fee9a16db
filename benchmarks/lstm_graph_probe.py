"""Can a cuDNN LSTM's training step (forward, backward, SGD) be captured in CUDA graphs of several lengths and replayed
in any order? The smallest case of :mod:`softmax_bottleneck.training.cuda_graphs`, without this package.

Two graphs (lengths 70 and 65, batch 20, 400 → 1150 as AWD-LSTM's first layer) captured after one eager step each,
then replayed alternately ``--replays`` times with a synchronisation after each; prints one JSON line: ``ok`` or the
replay that failed. ``--pool shared|own``: one memory pool for both graphs or one each; ``--dropconnect``: the
hidden-to-hidden weight dropped afresh inside the step through ``torch.func.functional_call`` (as WeightDropLSTM);
``--no-cudnn``: PyTorch's own LSTM kernels::

    python benchmarks/lstm_graph_probe.py --pool shared --dropconnect
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", choices=("shared", "own"), default="shared")
    parser.add_argument("--dropconnect", action="store_true")
    parser.add_argument("--no-cudnn", action="store_true")
    parser.add_argument("--replays", type=int, default=20)
    args = parser.parse_args()
    torch.backends.cudnn.enabled = not args.no_cudnn
    torch.manual_seed(0)
    dev = torch.device("cuda")
    lstm = nn.LSTM(400, 1150).to(dev)
    opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
    stream = torch.cuda.Stream()
    h0 = torch.zeros(1, 20, 1150, device=dev)
    c0 = torch.zeros(1, 20, 1150, device=dev)
    xs = {n: torch.randn(n, 20, 400, device=dev) for n in (70, 65)}
    result = {"pool": args.pool, "dropconnect": args.dropconnect, "cudnn": not args.no_cudnn}

    def step(x):
        opt.zero_grad()
        if args.dropconnect:
            dropped = F.dropout(lstm.weight_hh_l0, p=0.5, training=True)
            y, (h, c) = torch.func.functional_call(lstm, {"weight_hh_l0": dropped}, (x, (h0, c0)))
        else:
            y, (h, c) = lstm(x, (h0, c0))
        y.pow(2).mean().backward()
        opt.step()
        h0.copy_(h.detach())
        c0.copy_(c.detach())

    graphs, pool = {}, None
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        try:
            for n, x in xs.items():
                step(x)  # eager warm-up of this shape
                if pool is None or args.pool == "own":
                    pool = torch.cuda.graph_pool_handle()
                graphs[n] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[n], pool=pool, stream=stream):
                    step(x)
            torch.cuda.synchronize()
            for i in range(args.replays):
                graphs[(70, 65)[i % 2]].replay()
                if i % 3 == 2:
                    step(xs[70])  # an eager step in between, as a new length would run
                torch.cuda.synchronize()
            result["ok"] = bool(torch.isfinite(lstm.weight_hh_l0).all())
        except Exception as err:  # noqa: BLE001  (the failure is the answer)
            result["ok"] = False
            result["error"] = f"replay {locals().get('i', 'capture')}: {type(err).__name__}: {str(err).splitlines()[0]}"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
