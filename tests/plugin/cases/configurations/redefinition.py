"""Rebinding under allow_redefinition (the plugin's default) across branches a flag does not decide.

A branch that rebinds the input and returns must leave the next branch the
input as it came in, typed or unannotated: no narrowing of a returned branch
leaks into the next one (checked with mypy 2.4.1's flexible redefinition).
"""
import torch.nn.functional as F

import spmd_stubs as spmd
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import tp


class Linear:
    weight: Tensor[S(0)@tp]
    recompute: bool  # set by no configuration: both branches are checked everywhere

    def returned_then_rebound(self, input_):
        if self.recompute:
            input_ = spmd.all_gather(input_, tp, src=S(0), dst=R)
            return F.linear(input_, self.weight)
        input_ = spmd.convert(input_, tp, src=I, dst=R)
        return F.linear(input_, self.weight)

    def typed_returned_then_used(self, input_: Tensor[I@tp]) -> Tensor[S(-1)@tp]:
        if self.recompute:
            input_ = spmd.convert(input_, tp, src=I, dst=R)
            return F.linear(input_, self.weight)
        reveal_type(input_)  # N: Tensor[I@tp]
        return F.linear(spmd.convert(input_, tp, src=I, dst=R), self.weight)

    def elif_after_return(self, input_: Tensor[I@tp], gather: bool) -> Tensor[R@tp]:
        if self.recompute:
            input_ = spmd.convert(input_, tp, src=I, dst=R)
            return input_
        elif gather:
            return spmd.convert(input_, tp, src=I, dst=R)
        return spmd.convert(input_, tp, src=I, dst=R)

    def bound_in_both(self, input_) -> Tensor[P@tp]:
        if self.recompute:
            total = spmd.all_gather(input_, tp, src=S(0), dst=R)
        else:
            total = spmd.convert(input_, tp, src=I, dst=R)
        reveal_type(total)  # N: Tensor[R@tp]
        return spmd.reinterpret(F.linear(total, self.weight), tp, src=V, dst=P)
