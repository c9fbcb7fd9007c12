"""spmd_types' vocabulary read statically (docs/spec.md#spmd_types-vocabulary).

=============================  ===================================================
module                         what
=============================  ===================================================
:mod:`.reading`                a type expression (dict, bare type, PartitionSpec,
                               ``get_local_type``, ``get_partition_spec``) -> the
                               checker's TensorType
:mod:`.assignments`            a name followed to the one assignment it holds
:mod:`.asserting`              ``assert_type`` / ``assert_local_type``,
                               ``assert_type_like`` / ``assert_local_type_like``
:mod:`.mutating`               ``mutate_type``: the relabels that are a reinterpret
:mod:`.narrowing`              those calls as statements narrow their argument
:mod:`.axis_loops`             a loop over written-out axes around those calls,
                               unrolled
:mod:`.unchecked`              ``no_typecheck()`` blocks: quiet, not trusted after
:mod:`.unchecked_functions`    ``@no_typecheck`` functions: their body such a block
:mod:`.collectives`            the collectives and casts, as rows of the table
:mod:`.functions`              ``typecheck_forward`` read as a Function's signature
:mod:`.local_map`              ``local_map(in_types=, out_types=)`` boundaries
:mod:`.spelling`               how a module spells spmd_types' calls; fixes in that
                               spelling
:mod:`.api_boundary`           the untyped ``@api_boundary`` functions typed: any
                               function as a value, their own parameters at a call
=============================  ===================================================
"""
