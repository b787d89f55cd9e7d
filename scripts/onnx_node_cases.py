#!/usr/bin/env python3
"""ONNX backend node tests for webfusion's op set, as a dependency-free data file.

Regenerate (the checked-in file was made with onnx 1.23.2, numpy 2.4.6):

    pip install onnx==1.23.2 numpy
    python3 scripts/onnx_node_cases.py > tests/data/onnx_node_cases.txt

The onnx wheel no longer ships the node test data (`backend/test/data/node`),
so the cases come from the package's own generators
(`onnx.backend.test.case.node.collect_testcases()`, the code that writes that
data): each case's single-node model, its one data set, and the runner's
tolerance (rtol 1e-3, atol 1e-7). The generators seed numpy with 0, so the
output is byte-identical for a given onnx and numpy. tests/onnx.rs runs them.

Kept: single-node models whose op maps onto webfusion's API, with float32,
int (int32 or int64 within int32, as int32) and bool data inputs, and
float32 / bool / int outputs (bool and int compared as floats). The ONNX semantics are resolved here, into webfusion's terms, so the
Rust side stays a plain interpreter:

  * variadic Max / Min / Sum fold `maximum` / `minimum` / `add`;
  * ReduceX axes (attribute before opset 18, second input from 18), keepdims
    (default 1) and noop_with_empty_axes (empty axes: identity when 1, all
    axes when 0);
  * Softmax / LogSoftmax axis (default -1 from opset 13; before 13 the input
    is coerced to 2-D at `axis`, kept only when that is the last axis);
  * Reshape's shape input with 0 meaning "copy the input dim" (allowzero=0);
    Flatten as a reshape to 2-D; Expand as broadcast_to the output shape;
  * Clip's min / max inputs (or pre-11 attributes) as clamp bounds, ±inf when
    absent; Where's bool condition as 0 / 1;
  * ArgMax with select_last_index=0 only (webfusion's first-wins ties), and
    keepdims as an expand_dims after it;
  * Unsqueeze axes, normalized against the output rank, applied ascending;
  * GatherElements as webfusion's gather (TF.js has no GatherElements):
    the axis moved last, every axis before it a batch dim;
  * Gather's and OneHot's negative indices counted from the end here
    (webfusion's, like TF.js's, take [0, dim)); OneHot on the last axis only;
  * Mod with fmod=0 (the floor mod; ONNX's float Mod is fmod=1, C's fmod,
    which webfusion does not have); Cast to float32, int32/int64 or bool;
  * CumSum's axis input, Tile's repeats, Pad's constant mode with its pads
    and value (and axes from opset 18);
  * Conv, ConvTranspose, MaxPool and AveragePool of 2-D NCHW images (the
    filter OIHW, read as webfusion's HWIO through a transposed view), their
    pads as TF.js takes them: VALID, SAME_UPPER (TF.js's same: the extra
    after) or explicit; ungrouped, no ceil_mode, pools and transposed
    convolutions undilated, AveragePool without counting its padding;
  * BatchNormalization in inference mode (its statistics per channel of
    NCHW, reshaped to broadcast), epsilon in f32 bits;
  * Resize of the height and width of 4-D NCHW images, modes nearest and
    linear (TF.js's resizeNearestNeighbor and resizeBilinear), where ONNX's
    coordinate transformation is one of TF.js's: asymmetric (both
    defaults), align_corners, half_pixel (linear) or tf_half_pixel_for_nn
    (nearest; half_pixel too, rounded, where no position is a tie);
    nearest by floor (or, aligned, rounding half up); scales
    only where in / out equals 1 / scale (TF.js works from the sizes).

Everything else is skipped and counted by reason; the counts are written into
the data file's header (and to stderr).

Format: '#' lines are comments. A case is

    case <onnx test name>
    op <webfusion op> [key=value ...]
    in [d0,d1,...] <f32 bits as 8 hex digits, space-separated>
    ...
    out [d0,...] <f32 bits ...>
    end
"""

from __future__ import annotations

import collections
import sys
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.backend.test.case import node as node_cases

BINARY = {
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Pow": "pow",
    "Equal": "equal",
    "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
    "Less": "less",
    "LessOrEqual": "less_equal",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
}
VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add"}
UNARY = {
    "Abs": "abs",
    "Neg": "neg",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Relu": "relu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Sin": "sin",
    "Cos": "cos",
    "Identity": "identity",
    "Not": "logical_not",
}
REDUCE = {
    "ReduceSum": "sum",
    "ReduceMean": "mean",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceLogSumExp": "log_sum_exp",
    "ReduceProd": "prod",
}
OTHER = {
    "Softmax",
    "LogSoftmax",
    "MatMul",
    "Transpose",
    "Reshape",
    "Flatten",
    "Concat",
    "Where",
    "Clip",
    "ArgMax",
    "Gelu",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "ArgMin",
    "Gather",
    "GatherElements",
    "OneHot",
    "CumSum",
    "Tile",
    "Pad",
    "Mod",
    "Cast",
    "Conv",
    "ConvTranspose",
    "MaxPool",
    "AveragePool",
    "BatchNormalization",
    "Resize",
}
SUPPORTED = set(BINARY) | set(VARIADIC) | set(UNARY) | set(REDUCE) | OTHER


class Skip(Exception):
    pass


def as_array(x) -> np.ndarray:
    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.generic):  # a 0-d input given as a numpy scalar
        return np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise Skip("non-tensor input or output (sequence / optional / map)")
    return x


def attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def ints(a) -> list[int]:
    return [int(v) for v in np.asarray(a).reshape(-1)]


def fmt_shape(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def fmt_tensor(kind: str, a: np.ndarray) -> str:
    """A float32 as `in`/`out`, an int32 as `in.int32`, a bool as `in.bool`
    (words: f32 bits, two's complement, 0 or 1)."""
    if a.dtype == np.int32:
        kind, words = kind + ".int32", np.array(a, dtype=np.int32, order="C").reshape(-1).view(np.uint32)
    elif a.dtype == np.bool_:
        kind, words = kind + ".bool", np.array(a, dtype=np.uint32, order="C").reshape(-1)
    else:
        a = np.array(a, dtype=np.float32, order="C")  # not ascontiguousarray: it makes 0-d 1-d
        words = a.reshape(-1).view(np.uint32)
    return " ".join([kind, fmt_shape(a.shape)] + [f"{b:08x}" for b in words])


INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)


def data_input(a: np.ndarray, allow_bool: bool = False, allow_int: bool = False) -> np.ndarray:
    if a.dtype == np.float32:
        return a
    if a.dtype == np.bool_:
        if allow_bool:
            return a
        raise Skip("bool data where webfusion takes numbers")
    if allow_int and a.dtype in INTS:
        if a.size and (a.min() < -(2**31) or a.max() > 2**31 - 1):
            raise Skip("integers past int32")
        return a.astype(np.int32)
    raise Skip(f"non-float32 data: {a.dtype}")


def window_pad(at: dict) -> str:
    """A convolution's or pool's padding as the harness reads it: `valid`,
    `same`, or `top:bottom,left:right`."""
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto == "VALID":
        return "valid"
    if auto == "SAME_UPPER":
        return "same"
    if auto == "SAME_LOWER":
        raise Skip("auto_pad SAME_LOWER: the extra padding before (TF.js's same puts it after)")
    t, l, b, r = [int(p) for p in at.get("pads", [0, 0, 0, 0])]
    return f"{t}:{b},{l}:{r}"


def windows(at: dict, op: str, x: np.ndarray, dilated: bool) -> str:
    """The attributes a 2-D window op shares, checked, as `key=value`s."""
    if x.ndim != 4:
        raise Skip(f"{op} of other than 2-D images")
    if at.get("group", 1) != 1:
        raise Skip(f"grouped {op}")
    if at.get("ceil_mode", 0):
        raise Skip(f"{op} ceil_mode=1")
    strides = [int(v) for v in at.get("strides", [1, 1])]
    dilations = [int(v) for v in at.get("dilations", [1, 1])]
    if max(dilations) > 1 and not dilated:
        raise Skip(f"dilated {op}: webfusion's takes no dilations")
    if max(strides) > 1 and max(dilations) > 1:
        raise Skip(f"{op} with strides and dilations both above 1 (TF.js refuses it)")
    return f"strides={','.join(map(str, strides))} dilations={','.join(map(str, dilations))} pad={window_pad(at)}"


def convert(case) -> tuple[str, list[np.ndarray], np.ndarray]:
    """The case as (op line, float32 inputs, expected output)."""
    graph = case.model.graph
    if len(graph.node) != 1:
        raise Skip("multi-node model (an *_expanded function body)")
    node = graph.node[0]
    if node.domain not in ("", "ai.onnx"):
        raise Skip(f"op domain {node.domain}")
    op = node.op_type
    if op not in SUPPORTED:
        raise Skip("op outside webfusion's op set")
    opset = max(
        (o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")),
        default=0,
    )
    inputs, outputs = case.data_sets[0]
    if len(outputs) != 1:
        raise Skip("more than one output")
    # Positional inputs, None where an optional input is left empty ("").
    given = iter(as_array(x) for x in inputs)
    ins = [None if name == "" else next(given) for name in node.input]
    out = as_array(outputs[0])
    if out.dtype == np.bool_ or out.dtype in INTS:
        if out.dtype in INTS and out.size and (out.min() < -(2**31) or out.max() > 2**31 - 1):
            raise Skip("integers past int32")
        out = out.astype(np.float32)
    elif out.dtype != np.float32:
        raise Skip(f"non-float32 data: {out.dtype}")
    at = attrs(node)

    if op == "Div" and ins[0].dtype in INTS and np.any(np.floor_divide(ins[0], ins[1]) != out):
        raise Skip("Div of negative ints: ONNX truncates, webfusion's (TF.js's) floors")
    if op in BINARY:
        logical = op in ("And", "Or", "Xor")
        xs = [data_input(x, allow_bool=logical, allow_int=not logical) for x in ins]
        if len({x.dtype for x in xs}) > 1:
            raise Skip("operands of two dtypes")
        return BINARY[op], xs, out
    if op in VARIADIC:
        return VARIADIC[op], [data_input(x) for x in ins], out
    if op in UNARY:
        return UNARY[op], [data_input(ins[0], allow_bool=op == "Not")], out
    if op == "Gelu":
        approx = at.get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else approx
        if approx != "tanh":
            raise Skip("Gelu approximate=none (erf): webfusion has the tanh form only")
        return "gelu", [data_input(ins[0])], out
    if op in ("Softmax", "LogSoftmax"):
        x = data_input(ins[0])
        name = "softmax" if op == "Softmax" else "log_softmax"
        if opset >= 13:
            axis = at.get("axis", -1)
        else:
            axis = at.get("axis", 1)
            if axis % max(x.ndim, 1) != x.ndim - 1:
                raise Skip("pre-13 Softmax coerced to 2-D at a non-last axis")
        return f"{name} axis={axis}", [x], out
    if op in REDUCE:
        x = data_input(ins[0])
        keep = at.get("keepdims", 1)
        if len(ins) > 1 and ins[1] is not None:
            axes = ints(ins[1])
        else:
            axes = [int(a) for a in at.get("axes", [])]
        if not axes:
            if at.get("noop_with_empty_axes", 0):
                return "identity", [x], out
            return f"{REDUCE[op]} axes=all keep={keep}", [x], out
        return f"{REDUCE[op]} axes={','.join(map(str, axes))} keep={keep}", [x], out
    if op in ("ArgMax", "ArgMin"):
        if at.get("select_last_index", 0):
            raise Skip("ArgMax/ArgMin select_last_index=1: webfusion's ties go to the first")
        return (
            f"{op.lower()} axis={at.get('axis', 0)} keep={at.get('keepdims', 1)}",
            [data_input(ins[0], allow_int=True)],
            out,
        )
    if op == "Gather":
        x = data_input(ins[0], allow_int=True)
        axis = at.get("axis", 0)
        axis = axis + x.ndim if axis < 0 else axis
        idx = data_input(ins[1], allow_int=True)
        idx = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int32)
        return f"gather axis={axis}", [x, idx], out
    if op == "GatherElements":
        x = data_input(ins[0], allow_int=True)
        axis = at.get("axis", 0)
        axis = axis + x.ndim if axis < 0 else axis
        idx = data_input(ins[1], allow_int=True)
        idx = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int32)
        return f"gather_elements axis={axis}", [x, idx], out
    if op == "OneHot":
        if at.get("axis", -1) != -1:
            raise Skip("OneHot on an axis other than the last")
        idx = ins[0]
        if idx.dtype == np.float32:
            if np.any(idx != np.floor(idx)):
                raise Skip("fractional OneHot indices")
            idx = idx.astype(np.int64)
        depth = int(np.asarray(ins[1]).reshape(-1)[0])
        idx = data_input(idx, allow_int=True)
        idx = np.where(idx < 0, idx + depth, idx).astype(np.int32)
        off, on = [float(v) for v in np.asarray(ins[2]).reshape(-1)]
        b = lambda v: f"{np.asarray(v, dtype=np.float32).reshape(1).view(np.uint32)[0]:08x}"
        return f"one_hot depth={depth} on={b(on)} off={b(off)}", [idx], out
    if op == "CumSum":
        x = data_input(ins[0], allow_int=True)
        axis = int(np.asarray(ins[1]).reshape(-1)[0])
        return (
            f"cumsum axis={axis} exclusive={at.get('exclusive', 0)} reverse={at.get('reverse', 0)}",
            [x],
            out,
        )
    if op == "Tile":
        x = data_input(ins[0], allow_int=True)
        return f"tile reps={','.join(map(str, ints(ins[1])))}", [x], out
    if op == "Pad":
        mode = at.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode != "constant":
            raise Skip(f"Pad mode {mode}: webfusion pads with a constant")
        x = data_input(ins[0], allow_int=True)
        pads = ints(ins[1]) if len(ins) > 1 else [int(p) for p in at["pads"]]
        value = 0.0
        if len(ins) > 2 and ins[2] is not None:
            value = float(np.asarray(ins[2]).reshape(-1)[0])
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(x.ndim))
        axes = [a + x.ndim if a < 0 else a for a in axes]
        before, after = [0] * x.ndim, [0] * x.ndim
        for k, a in enumerate(axes):
            before[a], after[a] = pads[k], pads[k + len(axes)]
        if min(before + after) < 0:
            raise Skip("negative pads (a crop)")
        pairs = ",".join(f"{b}:{e}" for b, e in zip(before, after))
        return f"pad paddings={pairs} value={value!r}", [x], out
    if op == "Mod":
        if at.get("fmod", 0):
            raise Skip("Mod fmod=1 (C's fmod): webfusion's mod is the floor mod")
        xs = [data_input(x, allow_int=True) for x in ins]
        return "mod", xs, out
    if op == "Cast":
        to = at["to"]
        names = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.INT32: "int32",
                 onnx.TensorProto.INT64: "int32", onnx.TensorProto.BOOL: "bool"}
        if to not in names:
            raise Skip("Cast to a type webfusion does not have")
        x = data_input(ins[0], allow_bool=True, allow_int=True)
        if np.issubdtype(x.dtype, np.floating) and names[to] != "float32" and not np.all(np.isfinite(x)):
            raise Skip("Cast of a non-finite float to an int (undefined in ONNX)")
        return f"cast to={names[to]}", [x], out
    if op in ("Conv", "ConvTranspose"):
        x, w = data_input(ins[0]), data_input(ins[1])
        line = windows(at, op, x, dilated=op == "Conv")
        bias = [data_input(ins[2])] if len(ins) > 2 and ins[2] is not None else []
        if op == "Conv":
            return f"conv {line}", [x, w] + bias, out
        if "output_shape" in at or any(at.get("output_padding", [0, 0])):
            raise Skip("ConvTranspose with output_shape or output_padding: webfusion's takes the shape a conv2d maps back")
        if "=same" in line:
            raise Skip("ConvTranspose auto_pad SAME_UPPER")
        n, c, h, w_ = out.shape
        return f"conv_transpose {line} out={n},{h},{w_},{c}", [x, w] + bias, out
    if op == "BatchNormalization":
        if at.get("training_mode", 0):
            raise Skip("BatchNormalization training_mode=1")
        x, scale, b, mean, var = [data_input(a) for a in ins[:5]]
        eps = np.float32(at.get("epsilon", 1e-5))
        bits = f"{np.asarray(eps, dtype=np.float32).reshape(1).view(np.uint32)[0]:08x}"
        return f"batch_norm epsilon={bits}", [x, scale, b, mean, var], out
    if op == "Resize":
        x = data_input(ins[0])
        if x.ndim != 4:
            raise Skip("Resize of other than 4-D images")
        mode = at.get("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        ct = at.get("coordinate_transformation_mode", b"half_pixel")
        ct = ct.decode() if isinstance(ct, bytes) else ct
        nearest = at.get("nearest_mode", b"round_prefer_floor")
        nearest = nearest.decode() if isinstance(nearest, bytes) else nearest
        if mode not in ("nearest", "linear"):
            raise Skip(f"Resize mode={mode}")
        if at.get("antialias", 0) or at.get("exclude_outside", 0):
            raise Skip("Resize with antialias or exclude_outside")
        axes = sorted(a % 4 for a in at.get("axes", [0, 1, 2, 3]))
        if axes not in ([0, 1, 2, 3], [2, 3]):
            raise Skip("Resize along axes other than the height and width")
        if tuple(out.shape[:2]) != tuple(x.shape[:2]):
            raise Skip("Resize of the batch or channel dims")
        scales = ins[2] if len(ins) > 2 and ins[2] is not None and ins[2].size else None
        if scales is not None:
            h, w = x.shape[2:]
            oh, ow = out.shape[2:]
            sh, sw = scales[-2:]
            if not (np.float32(h / oh) == np.float32(1 / sh) and np.float32(w / ow) == np.float32(1 / sw)):
                raise Skip("Resize scales whose 1 / scale is not in / out (TF.js works from the sizes)")
        corner = {"asymmetric": "0,0", "align_corners": "1,0"}
        if mode == "linear":
            corner["half_pixel"] = "0,1"
            if ct not in corner:
                raise Skip(f"Resize linear coordinate_transformation_mode={ct}")
            line = "resize_bilinear"
        else:
            corner["tf_half_pixel_for_nn"] = "0,1"
            rule = "round_prefer_ceil" if ct == "align_corners" else "floor"
            if ct == "half_pixel" and nearest in ("round_prefer_floor", "round_prefer_ceil"):
                # TF.js's half-pixel nearest, floor((o + 0.5) * in / out), is
                # ONNX's half_pixel rounded half up: the same where no
                # source position is a tie.
                ties = any(
                    ((o + 0.5) * n / m - 0.5) % 1 == 0.5
                    for n, m in zip(x.shape[2:], out.shape[2:])
                    for o in range(m)
                )
                if ties and nearest == "round_prefer_floor":
                    raise Skip("Resize nearest half_pixel with ties, which ONNX rounds down (TF.js up)")
                ct, rule = "tf_half_pixel_for_nn", nearest
            if ct not in corner:
                raise Skip(f"Resize nearest coordinate_transformation_mode={ct}")
            if nearest != rule:
                raise Skip(f"Resize nearest_mode={nearest} with {ct} (TF.js's is {rule})")
            line = "resize_nearest"
        oh, ow = out.shape[2:]
        return f"{line} size={oh},{ow} corners={corner[ct]}", [x], out
    if op in ("MaxPool", "AveragePool"):
        x = data_input(ins[0])
        line = windows(at, op, x, dilated=False)
        if op == "AveragePool" and at.get("count_include_pad", 0) and "pad=valid" not in line and "pad=0:0,0:0" not in line:
            raise Skip("AveragePool count_include_pad=1: webfusion's (TF.js's) mean leaves the padding out")
        name = "max_pool" if op == "MaxPool" else "avg_pool"
        return f"{name} size={','.join(str(int(v)) for v in at['kernel_shape'])} {line}", [x], out
    if op == "MatMul":
        return "matmul", [data_input(x) for x in ins], out
    if op == "Transpose":
        x = data_input(ins[0], allow_int=True)
        perm = at.get("perm")
        perm = list(range(x.ndim))[::-1] if perm is None else list(perm)
        return f"transpose perm={','.join(map(str, perm))}", [x], out
    if op == "Reshape":
        x = data_input(ins[0])
        shape = ints(ins[1])
        if not at.get("allowzero", 0):
            shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return f"reshape shape={','.join(map(str, shape))}", [x], out
    if op == "Flatten":
        x = data_input(ins[0])
        axis = at.get("axis", 1)
        axis = axis + x.ndim if axis < 0 else axis
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        cols = int(np.prod(x.shape[axis:], dtype=np.int64))
        return f"reshape shape={rows},{cols}", [x], out
    if op == "Concat":
        return f"cat axis={at['axis']}", [data_input(x) for x in ins], out
    if op == "Where":
        c = data_input(ins[0], allow_bool=True)
        a, b = data_input(ins[1], allow_int=True), data_input(ins[2], allow_int=True)
        return "where", [c, a, b], out
    if op == "Clip":
        x = data_input(ins[0])
        if opset < 11:
            lo = at.get("min", -np.inf)
            hi = at.get("max", np.inf)
        else:
            lo = -np.inf if len(ins) < 2 or ins[1] is None else data_input(ins[1])
            hi = np.inf if len(ins) < 3 or ins[2] is None else data_input(ins[2])
        lo, hi = np.float32(lo), np.float32(hi)
        if lo > hi:
            raise Skip("Clip with min > max: webfusion's clamp refuses it (ONNX gives max)")
        b = lambda v: f"{np.asarray(v, dtype=np.float32).reshape(1).view(np.uint32)[0]:08x}"
        return f"clamp min={b(lo)} max={b(hi)}", [x], out
    if op == "Squeeze":
        x = data_input(ins[0])
        if len(ins) > 1 and ins[1] is not None:
            axes = ints(ins[1])
        else:
            axes = [int(a) for a in at.get("axes", [])]
        if not axes:
            return "squeeze axes=all", [x], out
        return f"squeeze axes={','.join(map(str, axes))}", [x], out
    if op == "Unsqueeze":
        x = data_input(ins[0])
        axes = ints(ins[1]) if len(ins) > 1 else [int(a) for a in at["axes"]]
        rank = x.ndim + len(axes)
        axes = sorted(a + rank if a < 0 else a for a in axes)
        return f"unsqueeze axes={','.join(map(str, axes))}", [x], out
    if op == "Expand":
        x = data_input(ins[0])
        return f"broadcast_to shape={','.join(map(str, out.shape))}", [x], out
    raise AssertionError(op)


def main() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()
    skipped: collections.Counter = collections.Counter()
    outside: collections.Counter = collections.Counter()
    blocks = []
    considered = 0
    for case in sorted(cases, key=lambda c: c.name):
        graph = case.model.graph
        ops = {n.op_type for n in graph.node}
        # The op set's cases: single-node models of a supported op. The rest
        # are counted, not converted.
        if len(graph.node) != 1:
            outside["multi-node model (a function-expanded test, any op)"] += 1
            continue
        if graph.node[0].op_type not in SUPPORTED:
            outside["single-node model of an op outside webfusion's op set"] += 1
            continue
        considered += 1
        try:
            op_line, ins, out = convert(case)
        except Skip as e:
            skipped[str(e)] += 1
            continue
        assert (case.rtol, case.atol) == (1e-3, 1e-7), case.name
        lines = [f"case {case.name}", f"op {op_line}"]
        lines += [fmt_tensor("in", x) for x in ins]
        lines += [fmt_tensor("out", out), "end"]
        blocks.append("\n".join(lines))
    header = [
        "# ONNX backend node tests for webfusion's op set.",
        f"# Generated by scripts/onnx_node_cases.py from onnx {onnx.__version__}"
        f" (numpy {np.__version__}); do not edit by hand.",
        "#   python3 scripts/onnx_node_cases.py > tests/data/onnx_node_cases.txt",
        f"# node test cases in onnx: {len(cases)}",
    ]
    header += [f"#   {n:4} {reason}" for reason, n in sorted(outside.items())]
    header += [
        f"# single-node cases of the op set: {considered}; converted: {len(blocks)}",
        "# skipped, by reason:",
    ]
    header += [f"#   {n:4} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1])]
    sys.stdout.write("\n".join(header + blocks) + "\n")
    print(
        f"onnx {onnx.__version__}: {len(cases)} node cases, {considered} of the op set,"
        f" {len(blocks)} converted",
        file=sys.stderr,
    )
    for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n:4}: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
