#!/usr/bin/env python3
"""Local-memory instructions (STL, LDL: spilled registers or arrays indexed at run time) in a CUDA
binary's SASS, per function, through bench/sass.py. The short scatters' hot kernels must have
none: a spilled value is stored right after its load, which waits for the load, and a batch's
loads then stop being in flight together (the fixed-point cluster kernel that kept its sites
beside the general path spilled that way).

    python3 bench/sass_local.py BINARY REGEX       the count for each function matching REGEX
    python3 bench/sass_local.py --check BINARY     none in the kernels below (CTest)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sass import check_or_list, cuobjdump, functions  # noqa: E402

LOCAL = re.compile(r"^(@!?U?P\w+\s+)?(STL|LDL)\b")

# --check: every instance of these kernels (mangled-name patterns), and how many must exist.
MUST_HAVE_NONE = [
    (r"pull_group_kernel", 20),
    (r"pull_thread_kernel", 10),
    (r"fixed_cluster_kernelILb1E", 1),
]


def local_instructions(instructions):
    return sum(1 for i in instructions if LOCAL.match(i))


def check(binary):
    if cuobjdump() is None:
        print("sass_local: no cuobjdump (make test installs it into .venv): skipped")
        return 77
    funcs = functions(binary)
    if not funcs:
        print(f"sass_local: no {os.environ.get('ARCH', 'sm_90')} SASS in {binary}: skipped")
        return 77
    failed = 0
    for pattern, at_least in MUST_HAVE_NONE:
        names = [n for n in funcs if re.search(pattern, n)]
        if len(names) < at_least:
            print(f"FAIL {pattern}: {len(names)} instances in {binary}, expected {at_least} or more")
            failed += 1
        for name in names:
            count = local_instructions(funcs[name])
            failed += count != 0
            print(f"{'ok  ' if count == 0 else 'FAIL'} {count:4d} local-memory instructions  {name}")
    return 1 if failed else 0


def main():
    return check_or_list(
        "sass_local", __doc__, check,
        lambda ins, name: f"{local_instructions(ins):5d} local-memory instructions  {name}")


if __name__ == "__main__":
    sys.exit(main())
