"""The README's Python examples run and print what their comments say."""

import contextlib
import io
import os
import re

import pytest

from conftest import ROOT


def python_blocks():
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.slow
def test_readme_python_examples_run_and_match_their_comments():
    blocks = python_blocks()
    assert blocks
    for block in blocks:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "README.md", "exec"), {})
        printed = out.getvalue().splitlines()
        expected = [line.split("# ", 1)[1] for line in block.splitlines()
                    if line.lstrip().startswith("print(") and "# " in line and "pairs are" not in line]
        for want in expected:
            assert want in printed, (want, printed)
