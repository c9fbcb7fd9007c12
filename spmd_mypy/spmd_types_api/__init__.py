"""spmd_types' vocabulary read statically (docs/spec.md#spmd_types-vocabulary).

=======================  ===================================================
module                   what
=======================  ===================================================
:mod:`.reading`          a type expression (dict, bare type, PartitionSpec,
                         ``get_local_type``) -> the checker's TensorType
=======================  ===================================================
"""
