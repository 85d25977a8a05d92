"""A Linear layer whose CPU matrix products are taken in the order the BLAS computes fast.

The CPU BLAS torch ships (MKL) is several times slower on a product whose result has a few columns (2 to 31) and many
rows than on the same product transposed: with 4,096 rows on one thread, the weight gradient of a 4-input layer
takes 444 µs as (64 x 4096) @ (4096 x 4) and 55 µs as ((4 x 4096) @ (4096 x 64))^T, and a 2-logit head's forward
95 µs against 63 µs. Such products sit in every small-input MLP (CartPole's 4 numbers) and every few-action policy
head, in each minibatch. `Linear` computes those products transposed (the same numbers up to float rounding); every
other product, and every product off the CPU, is torch's own.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

NARROW = 32  # results with 2 to NARROW - 1 columns (and more rows than columns) are computed transposed


def narrow(rows: int, cols: int) -> bool:
    """Whether a product with a (rows x cols) result is faster computed as its transpose."""
    return 1 < cols < NARROW and rows > cols


def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b, as (b^T @ a^T)^T where its result is narrow."""
    return (b.t() @ a.t()).t() if narrow(a.shape[0], b.shape[1]) else a @ b


def affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight^T + bias, the product in its fast order (a narrow output comes as the transpose of a contiguous
    (out, rows) tensor)."""
    if not narrow(x.shape[0], weight.shape[0]):
        return F.linear(x, weight, bias)
    if bias is None:
        return (weight @ x.t()).t()
    return torch.addmm(bias[:, None], weight, x.t()).t()


class _Affine(torch.autograd.Function):
    """`affine` with its gradients' products in their fast order too."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return affine(x, weight, bias)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = product(grad, weight) if ctx.needs_input_grad[0] else None
        grad_w = product(grad.t(), x) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


class Linear(nn.Linear):
    """nn.Linear (same parameters, init and state dict) whose CPU float32 products on (rows, features) batches are
    ordered for the BLAS (see the module's docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.is_cuda or x.dtype != torch.float32:
            return F.linear(x, self.weight, self.bias)
        rows, (out, inp) = x.shape[0], self.weight.shape
        if not (narrow(rows, out) or narrow(rows, inp) or narrow(out, inp)):
            return F.linear(x, self.weight, self.bias)
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            return _Affine.apply(x, self.weight, self.bias)
        return affine(x, self.weight, self.bias)


def log_softmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """Log-softmax over each row of (rows, categories) logits. Over few categories torch's CPU kernel is several times
    faster along the first dimension of the transposed layout (24 µs against 156 µs for 4,096 x 2, and so its
    gradient), the layout a narrow `Linear` head gives already, so it is taken that way."""
    if logits.dim() != 2 or logits.is_cuda or not narrow(*logits.shape):
        return torch.log_softmax(logits, dim=-1)
    return torch.log_softmax(logits.t().contiguous(), dim=0).t()
