"""spmd_types' vocabulary read statically (docs/spec.md#spmd_types-vocabulary).

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.reading`          a type expression (dict, bare type, PartitionSpec,
                         ``get_local_type``) -> the checker's TensorType
:mod:`.asserting`        ``assert_type`` / ``assert_local_type``
:mod:`.mutating`         ``mutate_type``: the relabels that are a reinterpret
:mod:`.narrowing`        those calls as statements narrow their argument
:mod:`.unchecked`        ``no_typecheck()`` blocks: quiet, not trusted after
:mod:`.collectives`      the collectives and casts, as rows of the table
:mod:`.functions`        ``typecheck_forward`` read as a Function's signature
:mod:`.local_map`        ``local_map(in_types=, out_types=)`` boundaries
:mod:`.spelling`         fixes in spmd_types' spelling where the code speaks it
=======================  ===================================================
"""
