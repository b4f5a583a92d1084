"""Export the PyTorch family of models seqlower is measured on (run by hand, never in CI).

PyTorch's dynamo exporter writes sequence ops and control flow for these patterns: tuple
stacking (``hstack``, ``vstack``, ``dstack``, ``column_stack``, ``atleast_*d``) as
``SequenceConstruct -> SequenceMap -> SequenceAt``; ``split``/``chunk`` unoptimized as
``SplitToSequence``; ``torch.cond`` as ``If``; ``while_loop`` as ``Loop``; ``scan`` as ``Scan``;
``embedding_bag`` with offsets as a sequence-carrying ``Loop``.

Set up once (torch 2.13.0's CPU build is what this machine's pip takes without downloading
CUDA builds), then export into a folder of ``NAME.onnx`` + ``NAME.npz`` (``input.<name>`` /
``output.<name>`` in graph order, as ``../shared/realworld-samples/torch``):

    python3.11 -m venv /work/venvs/torch
    /work/venvs/torch/bin/pip install torch==2.13.0 onnxscript onnx numpy
    /work/venvs/torch/bin/python benchmarks/families/torch_family.py /work/exports/torch

and measure with the project's venv: ``.venv/bin/python benchmarks/target_samples.py
/work/exports/torch`` (lowered without the check), or with ``--converters tract,openvino`` (the
check included, as the command line lowers). Models that do not export are reported and
skipped.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

Export = tuple[nn.Module, tuple[Any, ...], dict[str, Any] | tuple[Any, ...] | None, bool]

_RNG = torch.Generator().manual_seed(0)


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=_RNG)


class _Fn(nn.Module):
    """One input ``x`` (named, so that ``dynamic_shapes`` can be a tuple per input)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


class _Fn2(_Fn):
    """Two inputs ``a``, ``b``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> Any:  # type: ignore[override]
        return self.fn(a, b)


def _row(xs: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """``xs[i]`` for a loop counter (plain indexing is data-dependent to torch.export)."""
    return xs.index_select(0, i.reshape(1)).squeeze(0)


def stacking() -> dict[str, Export]:
    a1, b1 = _randn(3), _randn(5)
    a2, b2 = _randn(2, 3), _randn(4, 3)
    return {
        "hstack_1d_dyn": (
            _Fn2(lambda a, b: torch.hstack((a, b))),
            (a1, b1),
            ({0: torch.export.Dim("la", min=2)}, {0: torch.export.Dim("lb", min=2)}),
            True,
        ),
        "vstack_2d_dyn": (
            _Fn2(lambda a, b: torch.vstack((a, b))),
            (a2, b2),
            ({0: torch.export.Dim("ra", min=2)}, {0: torch.export.Dim("rb", min=2)}),
            True,
        ),
        "dstack_2d": (_Fn2(lambda a, b: torch.dstack((a, b))), (a2, a2 + 1), None, True),
        "column_stack_1d": (
            _Fn2(lambda a, b: torch.column_stack((a, b))),
            (a1, a1 * 2),
            None,
            True,
        ),
        "atleast_1d_tuple": (
            _Fn2(lambda a, b: torch.cat(torch.atleast_1d((a, b)))),
            (torch.tensor(2.0), a1),
            None,
            True,
        ),
        "atleast_2d_tuple_dyn": (
            _Fn2(lambda a, b: torch.cat(torch.atleast_2d((a, b)), 1)),
            (a1, b1),
            ({0: torch.export.Dim("la", min=2)}, {0: torch.export.Dim("lb", min=2)}),
            True,
        ),
        "atleast_3d_tuple": (
            _Fn2(lambda a, b: torch.cat(torch.atleast_3d((a, b)), 2)),
            (a2, a2 * 3),
            None,
            True,
        ),
        "hstack_mixed_rank": (
            _Fn2(lambda a, b: torch.hstack((a, b))),
            (a2, _randn(2, 1)),
            None,
            True,
        ),
    }


def splits() -> dict[str, Export]:
    x = _randn(6, 4)
    return {
        "split_equal": (
            _Fn(lambda x: torch.stack([t.sum(0) for t in torch.split(x, 2)])),
            (x,),
            None,
            False,
        ),
        "chunk_3": (
            _Fn(lambda x: torch.cat([t * (i + 1) for i, t in enumerate(x.chunk(3))])),
            (x,),
            None,
            False,
        ),
        "split_1_rest_dyn": (
            _Fn(lambda x: torch.split(x, [1, x.shape[0] - 1])[1] * 2),
            (x,),
            ({0: torch.export.Dim("n", min=3, max=64)},),
            False,
        ),
        "unbind_rows": (_Fn(lambda x: sum(x.unbind(0))), (x,), None, False),
    }


def control_flow() -> dict[str, Export]:
    from torch._higher_order_ops.while_loop import while_loop

    class Ssm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Parameter(_randn(4, 4) * 0.3)

        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            def cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
                return i < xs.shape[0]

            def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return i + 1, torch.tanh(h @ self.a + _row(xs, i))

            _, h = while_loop(cond, body, (torch.tensor(0), torch.zeros(xs.shape[1:])))
            return h

    class GruSteps(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.GRUCell(4, 4)

        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            def cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
                return i < xs.shape[0]

            def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                return i + 1, self.cell(_row(xs, i), h)

            _, h = while_loop(cond, body, (torch.tensor(0), torch.zeros(xs.shape[1], 4)))
            return h

    class Sinkhorn(nn.Module):
        def forward(self, c: torch.Tensor) -> torch.Tensor:
            def cond(i: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
                return (i < 50) & ((k.sum(1) - 1).abs().max() > 1e-4)

            def body(i: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                k = k / k.sum(1, keepdim=True)
                return i + 1, k / k.sum(0, keepdim=True)

            _, k = while_loop(cond, body, (torch.tensor(0), torch.exp(-c)))
            return k

    class Cond(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cond(x.sum() > 0, lambda x: x * 2, lambda x: x - 1, (x,))

    class ScanCumsum(nn.Module):
        def forward(self, xs: torch.Tensor) -> torch.Tensor:
            from torch._higher_order_ops.scan import scan

            def step(h: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                h = h + x
                return h, h.clone()

            _, ys = scan(step, torch.zeros(xs.shape[1:]), xs)
            return ys

    xs = _randn(5, 3, 4)
    return {
        "while_ssm": (Ssm(), (xs,), ({0: torch.export.Dim("t", min=2, max=64)},), True),
        "while_gru_cell": (GruSteps(), (xs,), ({0: torch.export.Dim("t", min=2, max=64)},), True),
        "while_sinkhorn": (Sinkhorn(), (_randn(4, 4).abs(),), None, True),
        "cond_sign": (Cond(), (xs,), None, True),
        "scan_cumsum": (ScanCumsum(), (xs,), None, True),
    }


def recurrent() -> dict[str, Export]:
    """A bidirectional GRU whose two directions' outputs are flipped and dstacked (issue 30:
    tract failed to unify a PermuteAxes)."""

    class BiGruDstack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru = nn.GRU(4, 3, batch_first=True, bidirectional=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.gru(x)
            forward, backward = y.split(3, dim=-1)
            return torch.dstack((forward, torch.flip(backward, dims=[1])))

    return {
        "bigru_flip_dstack": (BiGruDstack(), (_randn(2, 5, 4),), None, True),
        "bigru_flip_dstack_dyn": (
            BiGruDstack(),
            (_randn(2, 5, 4),),
            ({1: torch.export.Dim("t", min=2, max=64)},),
            True,
        ),
    }


def embedding_bags() -> dict[str, Export]:
    out: dict[str, Export] = {}
    for mode in ("sum", "mean", "max"):
        bag = nn.EmbeddingBag(10, 3, mode=mode)
        indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
        offsets = torch.tensor([0, 3, 5])
        out[f"embedding_bag_{mode}"] = (bag, (indices, offsets), None, True)
    bag = nn.EmbeddingBag(10, 3, mode="sum")
    dims = (
        {0: torch.export.Dim("n", min=2, max=256)},
        {0: torch.export.Dim("bags", min=2, max=64)},
    )
    out["embedding_bag_sum_dyn"] = (
        bag,
        (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), offsets),
        dims,
        True,
    )
    return out


def _first_late_token(tokens: list[int], at: int) -> int:
    """A token whose first occurrence is at index ``at`` or later (so that decoding with it as the
    end token stops on data, after a few steps, before the bound)."""
    for k in range(at, len(tokens)):
        if tokens[k] not in tokens[:k]:
            return tokens[k]
    return -1


class GreedyDecode(nn.Module):
    """A GRU decoder attending over ``memory``, greedy up to ``max_len`` tokens or the end token,
    writing each token into a preallocated buffer (``max_len`` a constant, or ``memory``'s length
    when ``bound_by_memory``)."""

    def __init__(self, max_len: int = 12, bound_by_memory: bool = False) -> None:
        super().__init__()
        self.max_len, self.bound_by_memory = max_len, bound_by_memory
        self.emb = nn.Embedding(9, 6)
        self.cell = nn.GRUCell(12, 6)
        self.out = nn.Linear(6, 9)
        self.eos = -1

    def forward(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from torch._higher_order_ops.while_loop import while_loop

        limit = memory.shape[0] if self.bound_by_memory else self.max_len
        buffer = torch.full((limit,), -1, dtype=torch.int64)

        def cond(i: torch.Tensor, token: torch.Tensor, h: torch.Tensor, buf: torch.Tensor) -> Any:
            return (i < limit) & (token != self.eos)

        def body(i: torch.Tensor, token: torch.Tensor, h: torch.Tensor, buf: torch.Tensor) -> Any:
            weights = torch.softmax(memory @ h.reshape(-1), 0)
            context = (weights.unsqueeze(1) * memory).sum(0)
            h = self.cell(torch.cat([self.emb(token.reshape(1)), context.unsqueeze(0)], 1), h)
            nxt = self.out(h).argmax(-1).reshape(())
            return i + 1, nxt, h, buf.index_copy(0, i.reshape(1), nxt.reshape(1))

        start = (torch.tensor(0), torch.tensor(0), memory.new_zeros(1, 6), buffer)
        steps, _, _, tokens = while_loop(cond, body, start)
        return tokens, steps

    def pick_eos(self, memory: torch.Tensor) -> None:
        """An end token the sample reaches after a few steps (decoded once without one)."""
        with torch.no_grad():
            tokens, _ = self(memory)
        self.eos = _first_late_token(tokens.tolist(), 3)


class ManualLstm(nn.Module):
    """An LSTM written by hand in a while_loop over ``xs`` [T, B, 4], its outputs written into a
    preallocated [T, B, 5] buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.wx = nn.Linear(4, 20)
        self.wh = nn.Linear(5, 20, bias=False)

    def forward(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        from torch._higher_order_ops.while_loop import while_loop

        def cond(i: torch.Tensor, h: torch.Tensor, c: torch.Tensor, ys: torch.Tensor) -> Any:
            return i < xs.shape[0]

        def body(i: torch.Tensor, h: torch.Tensor, c: torch.Tensor, ys: torch.Tensor) -> Any:
            gates = self.wx(_row(xs, i)) + self.wh(h)
            ig, fg, gg, og = gates.chunk(4, -1)
            c = torch.sigmoid(fg) * c + torch.sigmoid(ig) * torch.tanh(gg)
            h = torch.sigmoid(og) * torch.tanh(c)
            return i + 1, h, c, ys.index_copy(0, i.reshape(1), h.unsqueeze(0))

        zeros = xs.new_zeros(xs.shape[1], 5)
        start = (torch.tensor(0), zeros, zeros.clone(), xs.new_zeros(xs.shape[0], xs.shape[1], 5))
        _, h, _, ys = while_loop(cond, body, start)
        return ys, h


class SelectiveSsm(nn.Module):
    """A Mamba-like selective scan in a while_loop over ``xs`` [B, T, 4]: the step, B and C read
    from the input at each step, the state [B, 4, 3] decayed by ``exp(dt * A)``."""

    def __init__(self) -> None:
        super().__init__()
        self.a_log = nn.Parameter(_randn(4, 3) * 0.5)
        self.dt = nn.Linear(4, 4)
        self.b = nn.Linear(4, 3, bias=False)
        self.c = nn.Linear(4, 3, bias=False)
        self.d = nn.Parameter(_randn(4))

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        a = -torch.exp(self.a_log)
        dt = nn.functional.softplus(self.dt(xs))
        bs, cs = self.b(xs), self.c(xs)

        def at(t: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            return t.index_select(1, i.reshape(1)).squeeze(1)

        def cond(i: torch.Tensor, h: torch.Tensor, ys: torch.Tensor) -> Any:
            return i < xs.shape[1]

        def body(i: torch.Tensor, h: torch.Tensor, ys: torch.Tensor) -> Any:
            x, step = at(xs, i), at(dt, i)
            h = torch.exp(step.unsqueeze(-1) * a) * h + (step * x).unsqueeze(-1) * at(
                bs, i
            ).unsqueeze(1)
            y = (h @ at(cs, i).unsqueeze(-1)).squeeze(-1) + self.d * x
            return i + 1, h, ys.index_copy(1, i.reshape(1), y.unsqueeze(1))

        start = (torch.tensor(0), xs.new_zeros(xs.shape[0], 4, 3), torch.zeros_like(xs))
        return while_loop(cond, body, start)[2]


class PowerSteps(nn.Module):
    """``n`` power-iteration steps, ``n`` an input value (0 allowed: the start returned)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Parameter(_randn(4, 4))

    def forward(self, v: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        def cond(i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return i < n

        def body(i: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            w = self.a @ v
            return i + 1, w / w.norm()

        return while_loop(cond, body, (torch.tensor(0), v))[1]


class GruCellSteps(nn.Module):
    """A GRU cell stepped in a while_loop over ``xs`` [T, B, 4], batch and length both dynamic."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(4, 5)

    def forward(self, xs: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops.while_loop import while_loop

        def cond(i: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            return i < xs.shape[0]

        def body(i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return i + 1, self.cell(_row(xs, i), h)

        return while_loop(cond, body, (torch.tensor(0), xs.new_zeros(xs.shape[1], 5)))[1]


class ScanCarries(nn.Module):
    """A scan with three carries (a sum, a max, a count of positives) and two stacked outputs."""

    def __init__(self, reverse: bool = False) -> None:
        super().__init__()
        self.reverse = reverse

    def forward(self, xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from torch._higher_order_ops.scan import scan

        def step(carry: Any, x: torch.Tensor) -> Any:
            s, m, k = carry
            s, m = s + x, torch.maximum(m, x)
            k = k + (x > 0).sum()
            return (s, m, k), (s.clone(), m * 2)

        start = (xs.new_zeros(xs.shape[1:]), xs.new_full(xs.shape[1:], -1e9), torch.tensor(0))
        (s, _, k), (ss, ms) = scan(step, start, xs, reverse=self.reverse)
        return s, k, ss, ms


class ChunkProjection(nn.Module):
    """A gated projection: ``chunk(2)`` of a MatMul output whose last axis (64) is its weight's."""

    def __init__(self, explicit: bool = False) -> None:
        super().__init__()
        self.explicit = explicit
        self.proj = nn.Linear(8, 64, bias=False)
        self.w = nn.Parameter(_randn(8, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x @ self.w if self.explicit else self.proj(x)
        a, b = y.chunk(2, dim=-1)
        return a * torch.sigmoid(b)


def user_loops() -> dict[str, Export]:
    """Loops as users write them (issue 44's private kinds): decoding that stops on data before a
    bound, recurrences by hand in while_loops over a symbolic length, counts that may be 0."""
    memory = _randn(7, 6)
    decode, decode_by_memory = GreedyDecode(), GreedyDecode(bound_by_memory=True)
    decode.pick_eos(memory)
    decode_by_memory.pick_eos(memory)
    t = torch.export.Dim("t", min=2, max=64)
    b = torch.export.Dim("b", min=1, max=16)
    t0 = torch.export.Dim("t0", min=0, max=64)
    return {
        "while_greedy_decode": (decode, (memory,), ({0: torch.export.Dim("s", max=64)},), True),
        "while_greedy_decode_memory_bound": (
            decode_by_memory,
            (memory,),
            ({0: torch.export.Dim("s", min=2, max=64)},),
            True,
        ),
        "while_manual_lstm": (ManualLstm(), (_randn(5, 2, 4),), ({0: t, 1: b},), True),
        "while_selective_ssm": (SelectiveSsm(), (_randn(2, 6, 4),), ({0: b, 1: t},), True),
        "while_gru_cell_batch": (
            GruCellSteps(),
            (_randn(5, 3, 4),),
            ({0: t, 1: b},),
            True,
        ),
        "while_power_n": (PowerSteps(), (_randn(4), torch.tensor(3)), None, True),
        "scan_three_carries": (ScanCarries(), (_randn(5, 3),), ({0: t0},), True),
        "scan_three_carries_reverse": (ScanCarries(reverse=True), (_randn(5, 3),), None, True),
        "chunk_linear_64": (
            ChunkProjection(),
            (_randn(2, 5, 8),),
            ({0: b, 1: t},),
            False,
        ),
        "chunk_matmul_64": (
            ChunkProjection(explicit=True),
            (_randn(2, 5, 8),),
            ({0: b, 1: t},),
            False,
        ),
        "chunk_matmul_64_optimized": (
            ChunkProjection(explicit=True),
            (_randn(2, 5, 8),),
            ({0: b, 1: t},),
            True,
        ),
    }


def export(name: str, item: Export, folder: Path) -> str:
    module, args, dynamic, optimize = item
    module.eval()
    path = folder / f"{name}.onnx"
    program = torch.onnx.export(
        module, args, dynamo=True, dynamic_shapes=dynamic, optimize=optimize, verbose=False
    )
    program.save(str(path))
    with torch.no_grad():
        outputs = module(*args)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    import onnx

    model = onnx.load(str(path))
    arrays: dict[str, np.ndarray] = {}
    for value, array in zip(model.graph.input, args, strict=True):
        arrays[f"input.{value.name}"] = array.numpy()
    for value, array in zip(model.graph.output, outputs, strict=True):
        arrays[f"output.{value.name}"] = array.numpy()
    np.savez(folder / f"{name}.npz", **arrays)
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--only", default="", help="comma-separated names")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    family = {
        **stacking(),
        **splits(),
        **control_flow(),
        **recurrent(),
        **embedding_bags(),
        **user_loops(),
    }
    only = {n for n in args.only.split(",") if n}
    failed = 0
    for name, item in family.items():
        if only and name not in only:
            continue
        try:
            print(f"{name:28} {export(name, item, args.folder)}", flush=True)
        except Exception as e:  # report and go on
            failed += 1
            line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"{name:28} not exported: {line[:150]}", flush=True)
            if "-v" in sys.argv:
                traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
