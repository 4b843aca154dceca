# The README's first Python example prints what the README shows (its hashes come from variants
# that give the same bits on any CPU and thread count, so the printed lines are exact).
import os
import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def first_example():
    """The first ```python block of the README and the ``` block after it (its output)."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"```python\n(.*?)```\s*\n```\n(.*?)```", text, re.S)
    assert m, "the README has no python example followed by its output"
    return m.group(1), m.group(2)


def test_the_first_example_prints_what_the_readme_shows():
    code, shown = first_example()
    # a fresh process: nothing another test set (a mode, a level, torch's flag) leaks in
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == shown.splitlines()
