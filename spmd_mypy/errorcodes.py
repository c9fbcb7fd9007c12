"""Error codes: every one a sub-code of ``spmd``.

So ``# type: ignore[spmd-partial-mul]`` silences one rule and
``--disable-error-code spmd`` (or ``# type: ignore[spmd]``) all of them.
The rule codes are the algebra's :class:`~spmd_stubs.core.Code`; the
plugin adds eleven of its own.
"""

from mypy.errorcodes import ErrorCode

from spmd_stubs.core import Code

SPMD = ErrorCode("spmd", "SPMD type checking", "SPMD")

BY_RULE: dict[Code, ErrorCode] = {
    code: ErrorCode(code.value, f"SPMD rule {code.value}", "SPMD", sub_code_of=SPMD) for code in Code
}

UNMODELLED = ErrorCode(
    "spmd-unmodelled", "An op the checker does not model got a typed tensor (strict)", "SPMD", sub_code_of=SPMD
)
MISSING_AXIS = ErrorCode(
    "spmd-missing-axis", "An operand does not mention an axis the others do (strict)", "SPMD", sub_code_of=SPMD
)
INTERNAL = ErrorCode(
    "spmd-internal", "The checker failed on this expression; please report it", "SPMD", sub_code_of=SPMD
)
AUTOGRAD = ErrorCode(
    "spmd-autograd", "An autograd Function's backward is not the dual of its forward", "SPMD", sub_code_of=SPMD
)
UNTYPED_BOUNDARY = ErrorCode(
    "spmd-untyped-boundary", "A typed value flows into a place that forgets its SPMD type (strict)", "SPMD",
    sub_code_of=SPMD,
)
CONFIGURATION = ErrorCode(
    "spmd-configuration", "A type is chosen by a flag that no configuration sets", "SPMD", sub_code_of=SPMD
)
SETTINGS = ErrorCode(
    "spmd-settings", "A [spmd_mypy] setting names a class the build does not have", "SPMD", sub_code_of=SPMD
)
RUNTIME_RULE = ErrorCode(
    "spmd-runtime-rule", "A spmd_types call whose run time accepts what the spec refuses (assert V as P, mutate_type)",
    "SPMD", sub_code_of=SPMD,
)
PLAN = ErrorCode(
    "spmd-plan", "A DTensor parallelize_module plan does not fit its modules' data flow", "SPMD", sub_code_of=SPMD
)
LOCAL_MAP = ErrorCode(
    "spmd-local-map", "A DTensor local_map's placements give its body no type, or types its body breaks", "SPMD",
    sub_code_of=SPMD
)
ASYNC = ErrorCode(
    "spmd-async", "A collective's buffer used, or its handle dropped, while it is in flight (async_op=True)", "SPMD",
    sub_code_of=SPMD
)
