"""Configurations: the run-time flags a layer tests, declared once and checked in every setting.

Real tensor-parallel layers choose their layout with a flag inside one
method (``if self.sequence_parallel:``).  The mypy config names sets of
flag values (``[tool.spmd_mypy.configurations]``, :mod:`.declared`); in a
run for one configuration the plugin decides every condition on those
flags before mypy analyses the module (:mod:`.conditions`, :mod:`.pruning`),
reading a flag by its name, through the module's assignments
(``self.mode = config.tp_mode``, :mod:`.following`) and, for a flag set to
an enum member qualified by its class, by that class (a member the class
lacks is reported, :mod:`.members`),
so each branch is checked only in the configurations that run it, and a
type alias chosen by a flag (``Activation = Tensor[S[0, tp]] if
spmd.flags.sequence_parallel else Tensor[I[tp]]``) is one type per
configuration; a flag no configuration sets is reported where such an
alias reads it (:mod:`.unset_flags`).  ``spmd-check`` (:mod:`.cli`) runs
mypy once per configuration and prints each diagnostic once, labelled with
the configurations it occurs in (:mod:`.merge`).  A literal passed to a parameter named after
a flag decides it for that call or for the object a constructor builds,
whose calls are then judged only in the configurations that agree
(:mod:`.instances`, :mod:`.receivers`).

:mod:`.declared` and :mod:`.merge` import nothing from mypy; :mod:`.cli` and :mod:`.report` read
mypy's options and write through mypy's own output code.
"""
