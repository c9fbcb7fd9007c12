"""spmd-settings: a [spmd_mypy] modules entry names a class the build does not have; the read keeps mypy's type."""
# Checked with these entries (tests/plugin/cases/runtime_classes/_extra.ini), M this module's full name:
#     modules =
#         M.Model.missing_class: M.NoSuchLayer
#         M.Model.missing_module: nowhere.layers.ColumnParallelLinear
#         M.Modle.proj: M.Layer
#         M.Model.plain[*]: M.Layer
#         M.Model.layer: M.Layer
from torch import nn


class Layer(nn.Module):
    pass


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.missing_class = nn.Linear(4, 4)
        self.missing_module = nn.Linear(4, 4)
        self.proj = nn.Linear(4, 4)
        self.plain = nn.Linear(4, 4)
        self.layer = nn.Linear(4, 4)


def wrong(model: Model) -> None:
    reveal_type(model.missing_class)  # E: spmd-settings Model.missing_class: plugin.cases.runtime_classes.spmd_settings.NoSuchLayer names no class # N: Linear
    reveal_type(model.missing_module)  # E: spmd-settings nowhere.layers.ColumnParallelLinear is not in the build # N: Linear
    reveal_type(model.proj)  # E: spmd-settings the owner plugin.cases.runtime_classes.spmd_settings.Modle names no class # N: Linear
    reveal_type(model.plain)  # E: spmd-settings plain[*]: [*] declares the items of an nn.ModuleList # N: Linear


def fixed(model: Model) -> None:
    reveal_type(model.layer)  # N: Layer
