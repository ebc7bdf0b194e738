"""The public GEMM: backend choice, dispatch, and the torch op with its fake (its argument checks: checks.py)."""
from __future__ import annotations

import functools
import warnings

import torch

from . import plan, reference
from .checks import _FLOATS, validate, validate_bias
from .device import cuda_supported, sm_count
from .formats import ScaleRule
from .tensor import Layout, MXFP4Tensor, dequantize

BACKENDS = ("auto", "cuda", "reference")


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return plan.load_table()


def add_bias(total: torch.Tensor, bias: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """The kernels' float32 ``total`` plus ``bias``, added in float32 (one rounding), rounded once to bf16 (to
    nearest even) and converted to ``out_dtype``: the kernels' biased output (see :func:`gemm_a4w4`)."""
    y = (total + bias.to(torch.float32)).to(torch.bfloat16)
    return y if out_dtype is torch.bfloat16 else y.to(out_dtype)


def select_backend(a: torch.Tensor, w: MXFP4Tensor, backend: str = "auto") -> str:
    """Which backend a call takes. 'auto': the CUDA kernels on a Hopper GPU, the reference elsewhere."""
    _check_backend(backend)
    if backend == "reference":
        return backend
    if not cuda_supported(a.device):
        if backend == "cuda":
            raise ValueError(f"backend='cuda' needs a Hopper GPU (sm_90); a is on {a.device}")
        if a.is_cuda:
            _warn_once(f"mxfp4: no CUDA kernel for {torch.cuda.get_device_name(a.device)} (Hopper, sm_90, "
                       "only); running the exact reference, which is slow")
        return "reference"
    unsupported = _kernel_rule_broken(a, w)
    if unsupported is None:
        return "cuda"
    if backend == "auto":
        _warn_once(f"mxfp4: {unsupported}; running the exact reference, which is slow")
        return "reference"
    raise ValueError(unsupported)


def _check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")


def _kernel_rule_broken(a: torch.Tensor, w: MXFP4Tensor) -> str | None:
    """The first rule of the CUDA kernels that the operands break (None: they take them)."""
    if w.layout is not Layout.AITER_SHUFFLED:
        return "the CUDA kernels read the weight in aiter's shuffled layout: prepare it once with mxfp4.prepare(w)"
    if w.scale_rule is not ScaleRule.AITER:
        return f"the CUDA kernels quantize A with ScaleRule.AITER; w uses {w.scale_rule.name} (pass backend='reference')"
    return None


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def params_for(problem: plan.Problem, device: torch.device) -> plan.KernelParams:
    """The kernel parameters a call of shape ``problem`` on ``device`` gets (``plan.choose``)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _params(problem.m, problem.n, problem.k, index)


def _params(m: int, n: int, k: int, index: int, out_f32: bool = False) -> plan.KernelParams:
    params = _chosen.get((m, n, k, index, out_f32))
    if params is None:
        params = plan.choose(plan.Problem(m, n, k), _table(), sm_count(index))
        if out_f32:
            params = plan.float32_output(params)
        _chosen[(m, n, k, index, out_f32)] = params
    return params


_chosen: dict[tuple[int, int, int, int, bool], plan.KernelParams] = {}
"""plan.choose's answer per (m, n, k, device index, float32 output): a pure function of the shipped
table and the device (3.7 us of Python to rebuild), remembered for :func:`params_for` (a tensor-parallel layer
asks it every forward) and for ``_launches``' misses (a shape's first call, or another A dtype)."""

_launches: dict[tuple[int, int, int, torch.dtype, int, bool], object] = {}
"""The launch (``mxfp4.cuda.launch``) of :func:`_params`' answer per (m, N16, K64, A's dtype, device index, float32
output): an eager call's one lookup from its shape to its launch (``cuda.ops.launch_for`` and ``_params`` took 1 us
of Python a call on the CPU)."""


def gemm_a4w4(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None = None, *,
              out_dtype: torch.dtype | None = None, backend: str = "auto",
              params: plan.KernelParams | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """C = dequant(quant(a)) @ dequant(w)^T (+ bias) [..., N]; ``a`` [..., K] quantized per 1x32 block.

    ``a`` may be bf16, fp16 or float32 (quantized by the same rule from its values). The output is
    the exact product rounded once to bf16 (the kernels: within their bound, docs/design.md), in
    ``out_dtype`` (bf16 by default; fp16 or float32: that bf16 value converted, docs/design.md) or
    in ``out``'s dtype. On a Hopper GPU: the CUDA kernels (one or two launches, plan.choose), which
    read ``w`` as stored (aiter's shuffled layout, see :func:`mxfp4.prepare`; any N and K, padded
    there) and ``a`` in its dtype, and keep nothing between calls. Elsewhere the exact reference. ``params`` forces a
    kernel variant (``SmallParams``: the short-K kernel, ``StreamParams``: the streaming GEMM,
    ``BandParams``: the banded GEMM, ``DecodeParams``: the two-launch decode kernels, ``WgmmaParams``: the
    large-M kernels); by default
    ``plan.choose`` picks.

    ``bias`` (bf16, fp16 or float32 [N], on a's device) is added before the one rounding, as Quark computes
    ``x @ W^T + b``: the reference gives ``round_bf16(exact(quant(a) @ w^T) + bias)`` exactly; the kernels
    write their unrounded float32 total (the ``out_f32`` variant of the chosen kernel), the bias is added
    to it in float32 and the sum rounded once to bf16 (:func:`add_bias`), within
    ``ulp_bf16(exact + b) + (K/32) * 2**-24 * sum|a_k w_k| + 2**-24 * |exact + b|`` of the exact biased
    value (the kernels' contract and one float32 rounding of the biased total; docs/design.md). Its
    gradient, when it requires grad, is the output's gradient summed over the rows.

    When ``a`` requires grad (and grad mode is on) the call goes through ``torch.ops.mxfp4.gemm_a4w4``,
    which has the gradient with respect to ``a`` (docs/design.md, Autograd).
    When N % 16 != 0 the result (``out`` aside) is a view of N columns of a row of N16 = the next
    multiple of 16 (no copy): call ``.contiguous()`` where that matters.
    """
    m, n, k = validate(a, w, out)
    if bias is not None:
        validate_bias(bias, n, a.device)
    if params is not None:
        if not isinstance(params, plan.KERNEL_PARAMS):
            raise TypeError(f"params must be a mxfp4.plan.SmallParams, StreamParams, BandParams, DecodeParams or "
                            f"WgmmaParams, got {type(params).__name__}")
        if params.out_f32:
            raise ValueError("params.out_f32 variants write the unrounded float32 total (ops.gemm_a4w4_partial), "
                             "not gemm_a4w4's bf16 output")
    if out_dtype is not None:
        if out_dtype not in _FLOATS:
            raise TypeError(f"out_dtype must be torch.bfloat16, float16 or float32, got {out_dtype!r}")
        if out is not None and out.dtype is not out_dtype:
            raise ValueError(f"out ({out.dtype}) and out_dtype ({out_dtype}) disagree: pass one")
    if (a.requires_grad or (bias is not None and bias.requires_grad)) and torch.is_grad_enabled():
        if out is not None or backend != "auto" or params is not None:
            raise ValueError("a or bias requires grad: out=, backend= and params= are not differentiable; call "
                             "under torch.no_grad() or leave them out")
        return gemm_a4w4_op(a, w, out_dtype, bias)
    return _run(a, w, out, out_dtype or torch.bfloat16, backend, params, m, n, k, bias)


def _run(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None, out_dtype: torch.dtype, backend: str,
         params: plan.KernelParams | None, m: int, n: int, k: int, bias: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`gemm_a4w4` after its checks (the op's implementation too)."""
    if a.device.type == "meta":  # shapes only (a model built on the meta device): the output as the op's fake
        _check_backend(backend)
        return out if out is not None else a.new_empty((*a.shape[:-1], n), dtype=out_dtype)
    chosen = select_backend(a, w, backend)
    if chosen == "reference":
        result = reference.gemm_a4w4(a, w, scale_rule=w.scale_rule, bias=bias)
        if out is None:
            return result if out_dtype is torch.bfloat16 else result.to(out_dtype)
        return out.copy_(result)
    if bias is None:
        return _on_kernels(a, w, out, out_dtype, params, m, n, k)
    total = _on_kernels(a, w, None, torch.float32, None if params is None else plan.float32_output(params), m, n, k,
                        unrounded=True)
    result = add_bias(total, bias, out_dtype)
    return result if out is None else out.copy_(result)


def gemm_a4w4_partial(a: torch.Tensor, w: MXFP4Tensor) -> torch.Tensor:
    """float32 [..., N]: ``quant(a) @ dequant(w)^T`` before its rounding to bf16, for a row-parallel
    rank's partial sum (``mxfp4.distributed``); inference only, no autograd.

    On a Hopper GPU the kernels' own total (the ``out_f32`` variant of the kernel ``plan.choose``
    picks), within ``(K/32) * 2**-24 * sum|a w|`` of the exact product (docs/design.md, Tensor
    parallel). Elsewhere the exact product rounded once to float32.
    """
    m, n, k = validate(a, w, None)
    if a.device.type == "meta":
        return a.new_empty((*a.shape[:-1], n), dtype=torch.float32)
    if select_backend(a, w) == "reference":
        return reference.gemm_a4w4(a, w, scale_rule=w.scale_rule, out_dtype=None).to(torch.float32)
    return _on_kernels(a, w, None, torch.float32, None, m, n, k, unrounded=True)


_cuda_ops_module = None


def _cuda_ops():
    """mxfp4.cuda.ops, imported on the first kernel call (not at import: the CPU path never needs it)."""
    global _cuda_ops_module
    if _cuda_ops_module is None:
        from .cuda import ops as module

        _cuda_ops_module = module
    return _cuda_ops_module


def _on_kernels(a: torch.Tensor, w: MXFP4Tensor, out: torch.Tensor | None, out_dtype: torch.dtype,
                params: plan.KernelParams | None, m: int, n: int, k: int,
                unrounded: bool = False) -> torch.Tensor:
    """The kernels' launch for :func:`gemm_a4w4` (bf16 output, converted to ``out_dtype``) or, with
    ``unrounded``, for :func:`gemm_a4w4_partial` (the float32 total; ``out`` and ``params`` None)."""
    n16, k2 = w.data.shape  # the weight as the kernels read it: N16 rows, K64 / 2 bytes
    k64 = 2 * k2
    two_d = a.dim() == 2
    bf16_out = out is not None and n16 == n and out.dtype is torch.bfloat16  # the kernel writes out itself
    if not bf16_out:
        buf = a.new_empty((m, n16), dtype=torch.float32 if unrounded else torch.bfloat16)
    else:
        buf = out if out.dim() == 2 else out.view(m, n)
    if m and n:
        cuda_ops = _cuda_ops()
        if params is None:
            key = (m, n16, k64, a.dtype, a.get_device(), unrounded)
            launch = _launches.get(key)
            if launch is None:
                launch = _launches[key] = cuda_ops.launch_for(_params(m, n16, k64, key[4], unrounded), m, n16, k64,
                                                              a.dtype, a.device)
        else:
            params.check()
            if not params.fits(plan.Problem(m, n16, k64)):
                raise ValueError(f"params {params} do not fit the problem {m}x{n16}x{k64} (split at most "
                                 f"K / 32; DecodeParams: M at most 8 * mt, shared memory at most {plan.SMEM_LIMIT}; "
                                 f"SmallParams: kb = K / 32, M at most {plan.MAX_GRID_Y} tiles of 8 * mt rows; "
                                 f"StreamParams: M at most 8 * mt; BandParams: M at most 8 * mt, K at most "
                                 f"{plan.BAND_MAX_K})")
            launch = cuda_ops.launch_for(params, m, n16, k64, a.dtype, a.device)
        launch(a if two_d else a.reshape(m, k), w.data, w.scales, buf)
    if out is not None:
        if not bf16_out:
            out.view(m, n).copy_(buf[:, :n])
        return out
    result = buf if n16 == n else buf[:, :n]
    if out_dtype is not result.dtype:
        result = result.to(out_dtype)
    return result if two_d else result.view(*a.shape[:-1], n)


# ---- torch.library: torch.compile sees one opaque op; CUDA graphs capture its launch -------------
# Defined through torch.library.Library rather than the custom_op decorator: its Python wrapper
# took 14 us of a no-op call on the CPU, the Library op 3 us (7 us with register_autograd's formula).

_lib = torch.library.Library("mxfp4", "DEF")
_lib.define("gemm_a4w4(Tensor a, Tensor w_data, Tensor w_scales, SymInt n, SymInt k, bool shuffled, "
            "bool floor_rule, ScalarType? out_dtype=None, Tensor? bias=None) -> Tensor")


def _op_weight(w_data, w_scales, n, k, shuffled, floor_rule) -> MXFP4Tensor:
    return MXFP4Tensor(w_data, w_scales, (n, k), Layout.AITER_SHUFFLED if shuffled else Layout.PLAIN,
                       ScaleRule.FLOOR if floor_rule else ScaleRule.AITER)


def _op_impl(a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype=None, bias=None):
    w = _op_weight(w_data, w_scales, n, k, shuffled, floor_rule)
    m, n, k = validate(a, w, None)
    if out_dtype is not None and out_dtype not in _FLOATS:
        raise TypeError(f"out_dtype must be torch.bfloat16, float16 or float32, got {out_dtype!r}")
    if bias is not None:
        validate_bias(bias, n, a.device)
    out = _run(a, w, None, out_dtype or torch.bfloat16, "auto", None, m, n, k, bias)
    return out if out.is_contiguous() else out.contiguous()  # the op's output is dense, as its fake


def _op_fake(a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype=None, bias=None):
    return a.new_empty((*a.shape[:-1], n), dtype=out_dtype or torch.bfloat16)


class _OpGrad(torch.autograd.Function):
    """The op's autograd node: the forward runs the op below autograd, the backward the gradient of ``a``."""

    @staticmethod
    def forward(ctx, keyset, a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype, bias):
        ctx.save_for_backward(w_data, w_scales)
        ctx.meta = (n, k, shuffled, floor_rule, a.dtype, None if bias is None else bias.dtype)
        with torch._C._AutoDispatchBelowAutograd():
            return _OP.redispatch(keyset & _AFTER_AUTOGRAD, a, w_data, w_scales, n, k, shuffled, floor_rule,
                                  out_dtype, bias)

    @staticmethod
    def backward(ctx, grad):
        """d(loss)/d(a) = grad @ dequant(w): the activation's quantization passes the gradient straight
        through; the weight is frozen (its bytes are uint8 and cannot require grad). d(loss)/d(bias) =
        grad summed over the rows."""
        if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
            raise RuntimeError("mxfp4.gemm_a4w4: the MXFP4 weight is frozen (no gradient for w_data / w_scales); "
                               "train a float adapter beside it (e.g. LoRA)")
        w_data, w_scales = ctx.saved_tensors
        n, k, shuffled, floor_rule, dtype, bias_dtype = ctx.meta
        grad_a = grad_bias = None
        if ctx.needs_input_grad[1]:
            w = dequantize(_op_weight(w_data, w_scales, n, k, shuffled, floor_rule))  # float32 [N, K], exact
            grad_a = (grad.to(torch.float32) @ w).to(dtype)
        if ctx.needs_input_grad[9]:
            grad_bias = grad.to(torch.float32).reshape(-1, n).sum(0).to(bias_dtype)
        return None, grad_a, None, None, None, None, None, None, None, grad_bias


def _op_autograd(keyset, a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype=None, bias=None):
    """The op's Autograd kernel. With no gradient to record and plain CPU / CUDA tensors (nothing below
    autograd but the backend) it runs the implementation itself: register_autograd's kernel
    redispatched to it, the dispatch then took 7.9 us of a call against 3.6 us (CPU). Fake, functional
    and other wrapped tensors (torch.compile) take the redispatch, a gradient the autograd.Function."""
    if (a.requires_grad or (bias is not None and bias.requires_grad)) and torch.is_grad_enabled():
        return _OpGrad.apply(keyset, a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype, bias)
    if keyset.raw_repr() in _PLAIN_KEYSETS:
        return _op_impl(a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype, bias)
    with torch._C._AutoDispatchBelowAutograd():
        return _OP.redispatch(keyset & _AFTER_AUTOGRAD, a, w_data, w_scales, n, k, shuffled, floor_rule, out_dtype,
                              bias)


def _plain_keyset(backend: str) -> int:
    """The keyset (as its integer) the Autograd kernel sees for ``backend``'s tensors with nothing else
    to dispatch to: the backend and its autograd key."""
    key, keyset = torch._C.DispatchKey, torch._C.DispatchKeySet
    return (keyset(getattr(key, backend)) | keyset(getattr(key, "Autograd" + backend))).raw_repr()


_AFTER_AUTOGRAD = torch._C._after_autograd_keyset
_PLAIN_KEYSETS = frozenset((_plain_keyset("CPU"), _plain_keyset("CUDA")))

_lib.impl("gemm_a4w4", _op_impl, "CompositeExplicitAutograd")
_lib.impl("gemm_a4w4", _op_autograd, "Autograd", with_keyset=True)
torch.library.register_fake("mxfp4::gemm_a4w4", _op_fake, lib=_lib)
_OP = torch.ops.mxfp4.gemm_a4w4.default


def gemm_a4w4_op(a: torch.Tensor, w: MXFP4Tensor, out_dtype: torch.dtype | None = None,
                 bias: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`gemm_a4w4` through the registered op ``torch.ops.mxfp4.gemm_a4w4`` (torch.compile,
    autograd: the gradients with respect to ``a`` and ``bias``, docs/design.md)."""
    validate(a, w, None)
    if bias is not None:
        validate_bias(bias, w.shape[0], a.device)
    return _OP(a, w.data, w.scales, w.shape[0], w.shape[1], w.layout is Layout.AITER_SHUFFLED,
               w.scale_rule is ScaleRule.FLOOR, out_dtype, bias)
