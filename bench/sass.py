"""A CUDA binary's SASS per function, through cuobjdump: the reader that bench/sass_*.py share.

cuobjdump comes from $CUOBJDUMP, else PATH, else the project's virtual environment (.venv, where
`make test` installs NVIDIA's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels). ARCH
(default sm_90) picks the SASS of one GPU architecture.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cuobjdump():
    """The cuobjdump to run, or None."""
    found = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if found:
        return found
    venv = sorted(glob.glob(os.path.join(ROOT, ".venv", "lib", "python3*", "site-packages",
                                         "nvidia", "cu*", "bin", "cuobjdump")))
    return venv[-1] if venv else None


def functions(binary, names=None):
    """{mangled name: [instruction text]} for every function cuobjdump disassembles (only the
    mangled `names` when given). Exits when there is no cuobjdump."""
    tool = cuobjdump()
    if not tool:
        raise SystemExit("no cuobjdump (set CUOBJDUMP or put it on PATH)")
    arch = os.environ.get("ARCH", "sm_90")
    cmd = [tool, "-sass", "-arch", arch] + (["-fun", ",".join(names)] if names else []) + [binary]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
        elif cur is not None and "/*" in line and ";" in line:
            cur.append(line.split("*/", 1)[1].split(";")[0].strip())
    return funcs


def check_or_list(tool, doc, check, line):
    """The command line of a tool that checks a binary or lists per function:
    `TOOL --check BINARY` returns check(BINARY); `TOOL BINARY REGEX` prints line(instructions, name)
    for every function whose mangled name matches REGEX (an error when none does)."""
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        return check(sys.argv[2])
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        sys.exit(doc)
    pattern = re.compile(sys.argv[2])
    found = False
    for name, instructions in functions(sys.argv[1]).items():
        if pattern.search(name):
            found = True
            print(line(instructions, name))
    if not found:
        sys.exit(f"{tool}: no function matches {pattern.pattern}")
    return 0
