"""An axis the declared type does not mention is unconstrained at every boundary, not only at calls.

A value is accepted wherever the declared type agrees with it on every axis
both mention, in both directions; a disagreement on a mentioned axis is still
mypy's own error at that boundary.
"""
from spmd_stubs import I, P, R, S, Tensor, V
from spmd_stubs.axes import dp, tp


def returned(x: Tensor[V@dp, I@tp]) -> Tensor[I@tp]:
    return x


def returned_with_fewer_axes(x: Tensor[I@tp]) -> Tensor[V@dp, I@tp]:
    return x


def assigned(x: Tensor[V@dp, I@tp]) -> None:
    y: Tensor[I@tp] = x
    reveal_type(y)  # N: Tensor[I@tp]


def container_items(x: Tensor[V@dp, I@tp], s: Tensor[S(0)@tp, R@dp]) -> None:
    by_name: dict[str, Tensor[I@tp]] = {"x": x}
    items: list[Tensor[I@tp]] = [x]
    shards: list[Tensor[V@tp]] = [s]


class Holder:
    weight: Tensor[I@tp]

    def store(self, x: Tensor[V@dp, I@tp]) -> None:
        self.weight = x


def disagrees_on_a_mentioned_axis(x: Tensor[V@dp, P@tp], holder: Holder) -> Tensor[I@tp]:
    y: Tensor[I@tp] = x  # E: assignment "Tensor[V@dp, P@tp]", variable has type "Tensor[I@tp]"
    by_name: dict[str, Tensor[I@tp]] = {"x": x}  # E: dict-item "Tensor[V@dp, P@tp]"
    items: list[Tensor[I@tp]] = [x]  # E: list-item "Tensor[V@dp, P@tp]"
    holder.weight = x  # E: assignment "Tensor[V@dp, P@tp]"
    return x  # E: return-value (got "Tensor[V@dp, P@tp]", expected "Tensor[I@tp]")


def disagrees_on_the_unmentioned_side(x: Tensor[V@dp, I@tp]) -> Tensor[R@dp]:
    return x  # E: return-value (got "Tensor[V@dp, I@tp]", expected "Tensor[R@dp]")
