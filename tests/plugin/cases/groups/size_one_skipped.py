"""A branch that runs only where an axis has more ranks: the value that skipped it ran on one rank."""
from typing import Any

import torch
import torch.distributed as dist

from spmd_stubs import Group, R, Tensor, V
from spmd_stubs.axes import ep, tp


def gather(x: Tensor[V@tp], group: Group[tp]) -> Tensor[R@tp]:
    raise NotImplementedError


def scale(x: Tensor[V@tp], group: Group[tp]) -> Tensor[V@tp]:
    raise NotImplementedError


def untyped_sort(x: Any) -> torch.Tensor:
    raise NotImplementedError


class Dispatcher:
    """megatron's MoEAlltoAllTokenDispatcher.dispatch_postprocess: the gather over tp only where tp > 1."""

    tp_size: int
    tp_group: Group[tp]
    num_local_experts: int
    drop_and_pad: bool

    def dispatch_postprocess(self, tokens: Tensor[V@tp, V@ep], probs: Tensor[V@tp, V@ep],
                             ) -> tuple[Tensor[R@tp, V@ep], Tensor[R@tp, V@ep]]:
        if self.tp_size > 1:
            tokens = gather(tokens, self.tp_group)
            probs = gather(probs, self.tp_group)
        if self.num_local_experts > 1:
            if self.drop_and_pad:
                tokens = tokens.view(-1).contiguous()
            else:
                tokens = untyped_sort(tokens)
        return tokens, probs


def one_rank_in_the_else(x: Tensor[V@tp], group: Group[tp]) -> Tensor[R@tp]:
    if group.size() == 1:
        pass
    else:
        x = gather(x, group)
    return x


def the_branch_binds_the_wrong_type(x: Tensor[V@tp], group: Group[tp]) -> Tensor[R@tp]:
    if dist.get_world_size(group) > 1:
        x = scale(x, group)
    return x  # E: return-value got "Tensor[V@tp]", expected "Tensor[R@tp]"


def rebound_outside_the_branch(x: Tensor[V@tp], y: Tensor[V@tp], group: Group[tp]) -> Tensor[R@tp]:
    if group.size() > 1:
        x = gather(x, group)
    x = x + y
    return x  # E: return-value got "Tensor[V@tp]", expected "Tensor[R@tp]"


def rebound_before_the_return_outside(x: Tensor[V@tp], y: Tensor[V@tp], flag: bool,
                                      group: Group[tp]) -> Tensor[R@tp]:
    if group.size() > 1:
        x = gather(x, group)
    if flag:
        x = y
    return x  # E: return-value got "Tensor[V@tp] | Tensor[R@tp]", expected "Tensor[R@tp]"


def the_branch_may_not_bind(x: Tensor[V@tp], flag: bool, group: Group[tp]) -> Tensor[R@tp]:
    if group.size() > 1:
        if flag:
            x = gather(x, group)
    return x  # E: return-value got "Tensor[V@tp] | Tensor[R@tp]", expected "Tensor[R@tp]"


def the_test_may_not_run(x: Tensor[V@tp], flag: bool, group: Group[tp]) -> Tensor[R@tp]:
    if flag:
        if group.size() > 1:
            x = gather(x, group)
    return x  # E: return-value got "Tensor[V@tp] | Tensor[R@tp]", expected "Tensor[R@tp]"
