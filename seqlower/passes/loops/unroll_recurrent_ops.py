"""``LSTM``, ``GRU`` and ``RNN`` written as the ONNX ops of their definition, one copy of the
cell per time step (converters with no converter for them: onnx2torch, TVM, tinygrad).

tf2onnx writes Keras recurrent layers (``Bidirectional`` ones, masked ones with
``sequence_lens``) and PyTorch ``nn.LSTM``/``nn.GRU``/``nn.RNN`` as these ops, which onnx2torch
1.5.15, TVM 0.27's Relax frontend and tinygrad 0.14 cannot run. With the time axis static (after
``--overwrite-input-shape``: tf2onnx's lengths then become constants too), each becomes, per
direction, ``MatMul(X, W^T) + Wb + Rb`` for every step at once, then per step (forward, or from
the last step back) ``MatMul(H, R^T)``, a ``Split`` into the gates, the activations (``Clip`` of
their inputs with ``clip``), ``Mul``/``Add`` of the equations; ``Y`` the steps' ``H`` joined by
``Concat``. Everything the spec defines is kept: ``direction``, ``layout`` 0 and 1,
``activations`` with ``activation_alpha``/``beta`` (consumed in order by the activations that
take them, defaults as onnxruntime's: LeakyRelu 0.01, HardSigmoid 0.2/0.5, Elu 1.0),
``input_forget`` (f = 1 - i), peepholes ``P``, ``linear_before_reset``, optional ``B``,
``initial_h``/``initial_c`` (absent: a zero state, so the first step reads no ``R``), every
output present or not. With ``sequence_lens`` a batch entry's states stop changing after its
length, ``Y`` is zero past it and a length-0 entry's ``Y_h``/``Y_c`` are zero, as onnxruntime
returns (onnx.reference ignores ``sequence_lens``); lengths outside [0, T] fail at run time
through an out-of-range ``Gather``, as onnxruntime refuses them.

Left as they are, with the reason recorded for the converter check (``require-onnx2torch-ops``
names it): a time axis that is not static (``--overwrite-input-shape`` makes it so) or longer
than :data:`~seqlower.passes._trip_count.UNROLL_LIMIT` steps (each step a copy of the cell, as
``unroll-constant-scans`` copies a Scan body, and for the same reason: past it the model grows
more than a converter wants), an unknown hidden size or element type, an activation whose
parameters onnxruntime and the ONNX operator default differently (ThresholdedRelu, Affine,
ScaledTanh without them), anything the spec rejects (the runtime then says so), opset 8 and
older (no ``Where`` or integer ``Less``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from seqlower.passes._base import NodeLoweringPass, Rewrite, Site
from seqlower.passes._emit import Emitter
from seqlower.passes._ir import CONVERTER_OPS, block, constant_array, int_attr, is_onnx
from seqlower.passes._trip_count import UNROLL_LIMIT
from seqlower.passes._types import TypeOracle, element_dtype

__all__ = ["UnrollRecurrentOps"]

#: Gates per op (rows of W and R in units of the hidden size) and activations per direction.
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_ACTIVATIONS = {"RNN": 1, "GRU": 2, "LSTM": 3}
_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
#: Activation -> (takes alpha, takes beta, default alpha, default beta), onnxruntime's table
#: (rnn_helpers.cc). None: no default both onnxruntime and the ONNX op agree on.
_PARAMETERS: dict[str, tuple[bool, bool, float | None, float | None]] = {
    "relu": (False, False, None, None),
    "tanh": (False, False, None, None),
    "sigmoid": (False, False, None, None),
    "softsign": (False, False, None, None),
    "softplus": (False, False, None, None),
    "affine": (True, True, None, None),
    "scaledtanh": (True, True, None, None),
    "thresholdedrelu": (True, False, None, None),
    "leakyrelu": (True, False, 0.01, None),
    "elu": (True, False, 1.0, None),
    "hardsigmoid": (True, True, 0.2, 0.5),
}
_FLOATS = {ir.DataType.FLOAT16, ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.BFLOAT16}
_INT32_MAX = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class _Activation:
    name: str  # lower case, as onnxruntime matches it
    alpha: float = 0.0
    beta: float = 0.0


@dataclasses.dataclass
class _Plan:
    op: str
    steps: int
    hidden: int
    layout: int
    reverse: tuple[bool, ...]  # per direction: whether it runs from the last step back
    activations: tuple[tuple[_Activation, ...], ...]  # per direction
    clip: float | None
    input_forget: bool
    linear_before_reset: bool
    dtype: np.dtype
    #: sequence_lens: None (absent, or every entry T: no masks), else the constant lengths
    #: (validated) or an empty array for lengths known only at run time.
    lens: np.ndarray | None


class UnrollRecurrentOps(NodeLoweringPass[_Plan]):
    """Every ``LSTM``, ``GRU`` and ``RNN`` of a static time length up to 256 steps as the ONNX
    ops of its equations, unrolled over time."""

    op_type = "LSTM"
    takes_all = False

    def __init__(self, *, peephole_lstms_only: bool = False) -> None:
        """``peephole_lstms_only``: only an ``LSTM`` with peepholes ``P``, which OpenVINO
        2026.4.1 computes wrong (ONNX's ``test_lstm_with_peepholes``: 0.45 off); one it cannot
        unroll (a time axis not static) is left to the check, which blames the runtime."""
        super().__init__()
        self.peephole_lstms_only = peephole_lstms_only

    def matches(self, node: ir.Node) -> bool:
        if not is_onnx(node) or node.op_type not in _GATES:
            return False
        if not self.peephole_lstms_only:
            return True
        peepholes = node.inputs[7] if len(node.inputs) > 7 else None
        return node.op_type == "LSTM" and peepholes is not None

    def _op_types(self) -> frozenset[str] | None:
        return frozenset(_GATES)

    def plan(self, site: Site, types: TypeOracle) -> _Plan | None:
        node = site.node
        why, plan = _plan(node, site.opset, types)
        if plan is None and not self.peephole_lstms_only:
            block(node, f"{node.op_type} not unrolled: {why}", CONVERTER_OPS)
        return plan

    def rewrite(self, plan: _Plan, ctx: Rewrite) -> None:
        node, op = ctx.node, ctx.before()
        inputs = [*node.inputs, *[None] * (8 - len(node.inputs))]
        x, w, r, bias, lens, h0, c0, peep = inputs
        assert x is not None and w is not None and r is not None
        masks, keep = _masks(op, plan, lens, x)
        ys, hs, cs = [], [], []
        for d, backwards in enumerate(plan.reverse):
            weights = _Weights.of(op, plan, d, x, w, r, bias, peep)
            h = None if h0 is None else _pick(op, plan, h0, d, "initial_h")
            c = None if c0 is None or plan.op != "LSTM" else _pick(op, plan, c0, d, "initial_c")
            rows: list[ir.Value] = [x] * plan.steps
            for t in reversed(range(plan.steps)) if backwards else range(plan.steps):
                step = _Step(op, plan, weights, d, t)
                new_h, new_c = step.cell(h, c)
                rows[t], h, c = step.masked(masks, new_h, new_c, h, c)
            ys.append(_stack_rows(op, plan, rows, d))
            hs.append(_final(op, plan, keep, h, f"y_h_{d}"))
            cs.append(_final(op, plan, keep, c, f"y_c_{d}"))
        axis = 1 if plan.layout else 0
        outputs = [
            _joined(op, ys, axis + 1, "y", stacked=True),
            _joined(op, hs, axis, "y_h"),
            _joined(op, cs, axis, "y_c"),
        ]
        finals: list[ir.Value | None] = []
        for old, new in zip(node.outputs, outputs, strict=False):
            if new is None or (not old.name and not old.uses()):
                finals.append(None)  # an omitted output
                continue
            new.type, new.shape = old.type or new.type, old.shape or new.shape
            finals.append(new)
        ctx.replace(finals, rename=True)


def _plan(node: ir.Node, opset: int, types: TypeOracle) -> tuple[str, _Plan | None]:
    """The plan of one node, or why it stays."""
    op = node.op_type
    inputs = list(node.inputs)
    why, reverse, layout = _directions(node, opset)
    if reverse is None:
        return why, None
    x, r = inputs[0], inputs[2]
    assert x is not None and r is not None
    dtype = element_dtype(types.type_of(x))
    if dtype not in _FLOATS:
        return f"X's element type is {'unknown' if dtype is None else dtype}", None
    assert dtype is not None
    shape = types.shape_of(x)
    steps = None if shape is None or len(shape) != 3 else shape[1 if layout else 0]
    if not isinstance(steps, int):
        return (
            "its time axis is not static (--overwrite-input-shape fixes the input shapes, "
            "then it is unrolled)"
        ), None
    if not 1 <= steps <= UNROLL_LIMIT:
        return f"{steps} time steps, not in [1, {UNROLL_LIMIT}] (one cell copy a step)", None
    hidden = _hidden_size(node, r, types)
    if hidden is None:
        return "its hidden size is unknown (no hidden_size, R's shape not static)", None
    why, activations = _activations(node, op, len(reverse))
    if activations is None:
        return why, None
    assert shape is not None
    batch = shape[0 if layout else 1]
    why, lens = _lengths(inputs[4] if len(inputs) > 4 else None, steps, batch)
    if why:
        return why, None
    clip = node.attributes.get("clip")
    mismatch = _shape_mismatch(op, inputs, len(reverse), hidden, layout, types)
    if mismatch:
        return mismatch, None
    return "", _Plan(
        op=op,
        steps=steps,
        hidden=hidden,
        layout=layout,
        reverse=reverse,
        activations=activations,
        clip=None if clip is None else clip.as_float(),
        input_forget=op == "LSTM" and bool(int_attr(node, "input_forget", 0)),
        linear_before_reset=op == "GRU" and bool(int_attr(node, "linear_before_reset", 0)),
        dtype=np.dtype(dtype.numpy()),
        lens=lens,
    )


def _directions(node: ir.Node, opset: int) -> tuple[str, tuple[bool, ...] | None, int]:
    """Whether each direction runs reversed (None: the node stays, and why) and the layout,
    from the node's inputs, attributes and opset."""
    if opset < 9:
        return f"opset {opset} has no Where or integer Less (9 on has)", None, 0
    inputs = list(node.inputs)
    if len(inputs) < 3 or any(v is None for v in inputs[:3]):
        return "X, W and R are required", None, 0
    direction = _string_attr(node, "direction", "forward")
    reverse = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}.get(
        direction or ""
    )
    if reverse is None:
        return f"direction {direction!r} is none of forward, reverse, bidirectional", None, 0
    layout = int_attr(node, "layout", 0)
    if layout not in (0, 1) or (layout and opset < 14):
        return f"layout {layout} is not 0 or 1 (1 from opset 14)", None, 0
    for name in ("output_sequence",):
        if name in node.attributes:
            return f"the opset-1 attribute {name} is not read", None, 0
    return "", reverse, layout


def _string_attr(node: ir.Node, name: str, default: str) -> str | None:
    attr = node.attributes.get(name)
    if attr is None:
        return default
    if attr.is_ref() or attr.type != ir.AttributeType.STRING:
        return None
    return attr.as_string()


def _hidden_size(node: ir.Node, r: ir.Value, types: TypeOracle) -> int | None:
    """``hidden_size``, else R's last dimension; None when they disagree or neither is known."""
    declared = int_attr(node, "hidden_size")
    shape = types.shape_of(r)
    known = shape[-1] if shape is not None and len(shape) == 3 else None
    if isinstance(known, int) and declared is not None and known != declared:
        return None
    if declared is not None:
        return declared if declared > 0 else None
    return known if isinstance(known, int) and known > 0 else None


def _shape_mismatch(
    op: str,
    inputs: list[ir.Value | None],
    directions: int,
    hidden: int,
    layout: int,
    types: TypeOracle,
) -> str:
    """An input whose static shape the spec rejects (W, R, B, P, the initial states), named:
    a direction's weights are picked by index, which would not fail on a wrong count."""
    gates = _GATES[op] * hidden
    expected: dict[int, tuple[str, tuple[int | None, ...]]] = {
        1: ("W", (directions, gates, None)),
        2: ("R", (directions, gates, hidden)),
        3: ("B", (directions, 2 * gates)),
        5: ("initial_h", (None, directions, hidden) if layout else (directions, None, hidden)),
        6: ("initial_c", (None, directions, hidden) if layout else (directions, None, hidden)),
        7: ("P", (directions, 3 * hidden)),
    }
    for k, (name, dims) in expected.items():
        value = inputs[k] if k < len(inputs) else None
        if value is None or (op != "LSTM" and k > 5):
            continue
        shape = types.shape_of(value)
        if shape is None:
            continue
        if len(shape) != len(dims) or any(
            isinstance(have, int) and want is not None and have != want
            for have, want in zip(shape, dims, strict=False)
        ):
            have = [d if isinstance(d, int) else "?" for d in shape]
            want = [d if d is not None else "?" for d in dims]
            return f"{name}'s shape {have} is not the {want} the spec asks"
    return ""


def _activations(
    node: ir.Node, op: str, directions: int
) -> tuple[str, tuple[tuple[_Activation, ...], ...] | None]:
    """Each direction's activations with their parameters, as onnxruntime reads them."""
    count = _ACTIVATIONS[op]
    attr = node.attributes.get("activations")
    if attr is None:
        names = [name.lower() for name in _DEFAULTS[op]] * directions
    elif attr.is_ref() or attr.type != ir.AttributeType.STRINGS:
        return "activations is not a list of names", None
    else:
        names = [name.lower() for name in attr.as_strings()]
    if len(names) != count * directions:
        return f"{len(names)} activations, not {count} per direction", None
    alphas, betas = (_floats(node, f"activation_{n}") for n in ("alpha", "beta"))
    if alphas is None or betas is None:
        return "activation_alpha/beta are not lists of floats", None
    chosen = []
    for name in names:
        if name not in _PARAMETERS:
            return f"activation {name!r} is not one the spec lists", None
        takes_alpha, takes_beta, alpha, beta = _PARAMETERS[name]
        if takes_alpha:
            alpha = alphas.pop(0) if alphas else alpha
        if takes_beta:
            beta = betas.pop(0) if betas else beta
        if (takes_alpha and alpha is None) or (takes_beta and beta is None):
            return f"{name} without activation_alpha/beta (defaults differ)", None
        chosen.append(_Activation(name, alpha or 0.0, beta or 0.0))
    return "", tuple(tuple(chosen[d * count : (d + 1) * count]) for d in range(directions))


def _floats(node: ir.Node, name: str) -> list[float] | None:
    attr = node.attributes.get(name)
    if attr is None:
        return []
    if attr.is_ref() or attr.type != ir.AttributeType.FLOATS:
        return None
    return list(attr.as_floats())


def _lengths(
    lens: ir.Value | None, steps: int, batch: int | ir.SymbolicDim
) -> tuple[str, np.ndarray | None]:
    """sequence_lens: None when absent or every entry is T, the constant lengths, or an empty
    array for lengths read at run time (and for constant ones of a batch size not static: their
    count is then checked at run time, as onnxruntime does)."""
    if lens is None:
        return "", None
    known = constant_array(lens)
    if known is None or not isinstance(batch, int):
        return "", np.zeros(0, dtype=np.int32)
    if known.shape != (batch,) or ((known < 0) | (known > steps)).any():
        return f"sequence_lens {known.tolist()} are not one per batch entry in [0, {steps}]", None
    return "", None if (known == steps).all() else known.astype(np.int32)


def _pick(op: Emitter, plan: _Plan, value: ir.Value, d: int, hint: str) -> ir.Value:
    """Direction ``d``'s [B, H] slice of an initial state ([D, B, H], layout 1 [B, D, H])."""
    index = op.int64s(d, hint="direction")
    return op.Gather(value, index, axis=1 if plan.layout else 0, _hint=f"{hint}_{d}")


def _scalar(op: Emitter, plan: _Plan, number: float, hint: str) -> ir.Value:
    return op.constant(np.array(number, dtype=plan.dtype), hint=hint)


@dataclasses.dataclass
class _Weights:
    """One direction's weights, shaped for the steps: every step's ``X W^T + Wb + Rb`` at once,
    ``R^T`` (GRU's in two: z and r, then h), what stays per step (GRU's ``Rbh`` with
    ``linear_before_reset``) and the peepholes."""

    inputs: ir.Value  # [T, B, G*H] (layout 1: [B, T, G*H])
    recurrent: ir.Value  # [H, G*H] (GRU without linear_before_reset: [H, 2H])
    recurrent_h: ir.Value | None = None  # GRU without linear_before_reset: [H, H]
    bias_h: ir.Value | None = None  # GRU with linear_before_reset: Rbh [H]
    peepholes: list[ir.Value] | None = None  # LSTM: P[i], P[o], P[f]

    @classmethod
    def of(
        cls,
        op: Emitter,
        plan: _Plan,
        d: int,
        x: ir.Value,
        w: ir.Value,
        r: ir.Value,
        bias: ir.Value | None,
        peep: ir.Value | None,
    ) -> _Weights:
        hidden, gates = plan.hidden, _GATES[plan.op] * plan.hidden
        index = op.int64s(d, hint="direction")
        w_t = op.Transpose(op.Gather(w, index, axis=0, _hint=f"w_{d}"), _hint=f"w_t_{d}")
        inputs = op.MatMul(x, w_t, _hint=f"x_w_{d}")
        r_t = op.Transpose(op.Gather(r, index, axis=0, _hint=f"r_{d}"), _hint=f"r_t_{d}")
        weights = cls(inputs, r_t)
        if plan.op == "GRU" and not plan.linear_before_reset:
            weights.recurrent, weights.recurrent_h = op.split(
                r_t, [2 * hidden, hidden], 1, hint=f"r_t_{d}"
            )
        if bias is not None:
            w_b, r_b = op.split(
                op.Gather(bias, index, axis=0, _hint=f"b_{d}"), [gates] * 2, 0, hint="b"
            )
            if plan.linear_before_reset:
                r_zr, weights.bias_h = op.split(r_b, [2 * hidden, hidden], 0, hint=f"r_b_{d}")
                zeros = op.constant(np.zeros(hidden, dtype=plan.dtype), hint="zero_bias")
                r_b = op.Concat(r_zr, zeros, axis=0, _hint=f"r_b_zr_{d}")
            folded = op.Add(w_b, r_b, _hint=f"bias_{d}")
            weights.inputs = op.Add(inputs, folded, _hint=f"x_w_b_{d}")
        if peep is not None and plan.op == "LSTM":
            p_d = op.Gather(peep, index, axis=0, _hint=f"p_{d}")
            weights.peepholes = op.split(p_d, [hidden] * 3, 0, hint=f"p_{d}")
        return weights


class _Step:
    """The cell at one time step of one direction, built by ``op``."""

    def __init__(self, op: Emitter, plan: _Plan, weights: _Weights, d: int, t: int) -> None:
        self.op, self.plan, self.weights, self.t = op, plan, weights, t
        self.acts = plan.activations[d]
        self.hint = f"{d}_{t}"
        index = op.int64s(t, hint="step")
        self.x = op.Gather(weights.inputs, index, axis=1 if plan.layout else 0, _hint=f"x_{d}_{t}")

    def cell(self, h: ir.Value | None, c: ir.Value | None) -> tuple[ir.Value, ir.Value | None]:
        """The new H (and C), from the state before (None: zeros)."""
        if self.plan.op == "LSTM":
            return self._lstm(h, c)
        if self.plan.op == "GRU":
            return self._gru(h), None
        return self._activate(self._with_recurrent(self.x, h, self.weights.recurrent), 0), None

    def _with_recurrent(self, x: ir.Value, h: ir.Value | None, r_t: ir.Value) -> ir.Value:
        if h is None:
            return x  # a zero state adds nothing
        op = self.op
        return op.Add(x, op.MatMul(h, r_t, _hint=f"h_r_{self.hint}"), _hint=f"gates_{self.hint}")

    def _activate(self, x: ir.Value, k: int, clip: bool = True) -> ir.Value:
        """Activation ``k`` of the direction on ``x``, its input clipped first (with
        ``clip``)."""
        op, plan, act = self.op, self.plan, self.acts[k]
        if plan.clip is not None and clip:
            if op.opset >= 11:
                low, high = (_scalar(op, plan, s * plan.clip, "clip") for s in (-1, 1))
                x = op.Clip(x, low, high, _hint=f"clipped_{self.hint}")
            else:
                x = op.Clip(x, min=-plan.clip, max=plan.clip, _hint=f"clipped_{self.hint}")
        return _activation(op, plan, act, x, f"{act.name}_{self.hint}")

    def _lstm(self, h: ir.Value | None, c: ir.Value | None) -> tuple[ir.Value, ir.Value]:
        op, plan, hint = self.op, self.plan, self.hint
        gates = self._with_recurrent(self.x, h, self.weights.recurrent)
        i, o, f, g = op.split(gates, [plan.hidden] * 4, 1, hint=f"iofc_{hint}")
        peep = self.weights.peepholes
        if peep is not None and c is not None:
            i = op.Add(i, op.Mul(peep[0], c, _hint=f"p_i_{hint}"), _hint=f"i_{hint}")
            f = op.Add(f, op.Mul(peep[2], c, _hint=f"p_f_{hint}"), _hint=f"f_{hint}")
        i = self._activate(i, 0)
        if plan.input_forget:
            f = op.Sub(_scalar(op, plan, 1.0, "one"), i, _hint=f"f_{hint}")
        else:
            f = self._activate(f, 0)
        new_c = op.Mul(i, self._activate(g, 1), _hint=f"i_c_{hint}")
        if c is not None:
            new_c = op.Add(op.Mul(f, c, _hint=f"f_c_{hint}"), new_c, _hint=f"c_{hint}")
        if peep is not None:
            o = op.Add(o, op.Mul(peep[1], new_c, _hint=f"p_o_{hint}"), _hint=f"o_{hint}")
        o = self._activate(o, 0)
        # h(Ct) unclipped: onnxruntime clips the gates' inputs only (the spec's "input of
        # activations" could be read to take Ct in; nothing else we run reads clip).
        return op.Mul(o, self._activate(new_c, 2, clip=False), _hint=f"h_{hint}"), new_c

    def _gru(self, h: ir.Value | None) -> ir.Value:
        op, plan, weights, hint = self.op, self.plan, self.weights, self.hint
        x_zr, x_h = op.split(self.x, [2 * plan.hidden, plan.hidden], 1, hint=f"x_zrh_{hint}")
        if plan.linear_before_reset:
            # h's part: r * (H Rh^T + Rbh); one MatMul for all three gates.
            h_r = None if h is None else op.MatMul(h, weights.recurrent, _hint=f"h_r_{hint}")
            zr = x_zr
            h_h = weights.bias_h
            if h_r is not None:
                h_zr, h_h = op.split(h_r, [2 * plan.hidden, plan.hidden], 1, hint=f"h_zrh_{hint}")
                zr = op.Add(x_zr, h_zr, _hint=f"zr_{hint}")
                if weights.bias_h is not None:
                    h_h = op.Add(h_h, weights.bias_h, _hint=f"h_rb_{hint}")
        else:
            zr = self._with_recurrent(x_zr, h, weights.recurrent)
        z, r = op.split(self._activate(zr, 0), [plan.hidden] * 2, 1, hint=f"zr_{hint}")
        if plan.linear_before_reset:
            pre = x_h if h_h is None else op.Add(x_h, op.Mul(r, h_h, _hint=f"r_h_{hint}"))
        elif h is None:
            pre = x_h
        else:
            assert weights.recurrent_h is not None
            reset = op.Mul(r, h, _hint=f"r_h_{hint}")
            pre = op.Add(x_h, op.MatMul(reset, weights.recurrent_h, _hint=f"r_h_r_{hint}"))
        candidate = self._activate(pre, 1)
        one = _scalar(op, plan, 1.0, "one")
        new = op.Mul(op.Sub(one, z, _hint=f"1_z_{hint}"), candidate, _hint=f"h_new_{hint}")
        return (
            new if h is None else op.Add(new, op.Mul(z, h, _hint=f"z_h_{hint}"), _hint=f"h_{hint}")
        )

    def masked(
        self,
        masks: list[ir.Value] | None,
        new_h: ir.Value,
        new_c: ir.Value | None,
        h: ir.Value | None,
        c: ir.Value | None,
    ) -> tuple[ir.Value, ir.Value, ir.Value | None]:
        """This step's row of Y and the states after it: a batch entry past its length keeps
        its states and gives a zero row."""
        if masks is None:
            return new_h, new_h, new_c
        op, plan, hint = self.op, self.plan, self.hint
        mask, zero = masks[self.t], _scalar(op, plan, 0.0, "zero")
        row = op.Where(mask, new_h, zero, _hint=f"y_{hint}")
        kept_h = op.Where(mask, new_h, zero if h is None else h, _hint=f"h_kept_{hint}")
        if new_c is None:
            return row, kept_h, None
        kept_c = op.Where(mask, new_c, zero if c is None else c, _hint=f"c_kept_{hint}")
        return row, kept_h, kept_c


def _activation(op: Emitter, plan: _Plan, act: _Activation, x: ir.Value, hint: str) -> ir.Value:
    """``act`` on ``x`` as ONNX ops (ThresholdedRelu as a ``Where``: onnx2torch lacks it)."""
    name = act.name
    simple = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softsign": "Softsign"}
    if name in simple:
        return op.build(simple[name], [x], {}, hint=hint)
    if name == "softplus":
        return op.Softplus(x, _hint=hint)
    if name == "leakyrelu":
        return op.LeakyRelu(x, alpha=act.alpha, _hint=hint)
    if name == "elu":
        return op.Elu(x, alpha=act.alpha, _hint=hint)
    if name == "hardsigmoid":
        return op.HardSigmoid(x, alpha=act.alpha, beta=act.beta, _hint=hint)
    alpha = _scalar(op, plan, act.alpha, "alpha")
    if name == "thresholdedrelu":
        zero = _scalar(op, plan, 0.0, "zero")
        return op.Where(op.Greater(x, alpha, _hint=f"{hint}_above"), x, zero, _hint=hint)
    beta = _scalar(op, plan, act.beta, "beta")
    if name == "affine":
        return op.Add(op.Mul(x, alpha, _hint=f"{hint}_scaled"), beta, _hint=hint)
    assert name == "scaledtanh"
    inner = op.Tanh(op.Mul(x, beta, _hint=f"{hint}_scaled"), _hint=f"{hint}_tanh")
    return op.Mul(inner, alpha, _hint=hint)


def _masks(
    op: Emitter, plan: _Plan, lens: ir.Value | None, x: ir.Value
) -> tuple[list[ir.Value] | None, ir.Value | None]:
    """Per step, which batch entries still run ([B, 1] booleans), and which have a length
    above 0 (their final states are kept; onnxruntime zeroes the others'); None without
    sequence_lens (or when every length is T)."""
    if plan.lens is None or lens is None:
        return None, None
    steps = plan.steps
    if plan.lens.size:  # constant lengths
        running = np.arange(steps)[:, None] < plan.lens[None, :]
        masks = [op.constant(running[t][:, None], hint="running") for t in range(steps)]
        return masks, op.constant((plan.lens > 0)[:, None], hint="not_empty")
    # Lengths outside [0, T] fail here (an out-of-range Gather), as onnxruntime refuses them.
    zero = op.constant(np.array(0, dtype=np.int32), hint="zero_length")
    past = op.constant(np.array(_INT32_MAX, dtype=np.int32), hint="past_any_length")
    moved = op.Where(op.Less(lens, zero, _hint="negative"), past, lens, _hint="lens_or_past")
    valid = op.constant(np.arange(steps + 1, dtype=np.int32), hint="valid_lengths")
    in_range = op.Gather(valid, moved, axis=0, _hint="lens_in_range")
    # One length per batch entry, or fail as onnxruntime does (a [1] would broadcast).
    batch = op.Gather(
        op.Shape(x), op.int64s([plan.layout ^ 1], hint="batch_axis"), axis=0, _hint="batch"
    )
    checked = op.Reshape(in_range, batch, _hint="lens_checked")
    column = op.unsqueeze(checked, [0], hint="lens_row")  # [1, B]
    times = op.constant(np.arange(steps, dtype=np.int32)[:, None], hint="times")  # [T, 1]
    stepping = op.unsqueeze(op.Less(times, column, _hint="running"), [2], hint="running")
    masks = [
        op.Gather(stepping, op.int64s(t, hint="step"), axis=0, _hint=f"running_{t}")
        for t in range(steps)
    ]
    not_empty = op.unsqueeze(op.Greater(checked, zero, _hint="not_empty"), [1], hint="not_empty")
    return masks, not_empty


def _final(
    op: Emitter, plan: _Plan, keep: ir.Value | None, state: ir.Value | None, hint: str
) -> ir.Value | None:
    """A final state as returned: zero for a length-0 entry (onnxruntime's)."""
    if state is None or keep is None:
        return state
    return op.Where(keep, state, _scalar(op, plan, 0.0, "zero"), _hint=hint)


def _stack_rows(op: Emitter, plan: _Plan, rows: list[ir.Value], d: int) -> ir.Value:
    """One direction's Y: the rows [B, H] as [T, 1, B, H] (layout 1: [B, T, 1, H])."""
    axes = [1, 2] if plan.layout else [0, 1]
    expanded = [op.unsqueeze(row, axes, hint=f"y_row_{d}") for row in rows]
    if len(expanded) == 1:
        return expanded[0]
    return op.Concat(*expanded, axis=axes[0], _hint=f"y_{d}")


def _joined(
    op: Emitter, pieces: Sequence[ir.Value | None], axis: int, hint: str, stacked: bool = False
) -> ir.Value | None:
    """The directions' outputs joined along the directions axis (final states unsqueezed to
    it first; ``stacked``: Y's rows are already)."""
    present = [piece for piece in pieces if piece is not None]
    if not present:
        return None
    if not stacked:
        present = [op.unsqueeze(piece, [axis], hint=f"{hint}_dir") for piece in present]
    if len(present) == 1:
        return present[0]
    return op.Concat(*present, axis=axis, _hint=hint)
