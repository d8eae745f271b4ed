"""A small reader for the Nextflow/Groovy subset the pipelines in ``workflows/`` use, so the
tests can check them without Nextflow (which cannot be downloaded on the project's machines).

It reads a module's ``main.nf`` (its ``input:``, ``output:``, ``script:`` and ``stub:`` blocks),
evaluates the ``def NAME = EXPR`` lines and renders the triple-quoted GString of a script the way
Nextflow would, and reads ``nextflow.config``-style files (``params { }`` blocks and the
``ext.NAME = { EXPR }`` closures of ``withName:`` selectors).

Expressions: literals ('...', "GString ${...}", numbers, true/false/null, [lists]), names and
dotted properties (``task.ext.args``, ``meta.id``, ``params.x``), ``?:``, ``? :``, ``!``,
``&&``, ``||``, ``==``, ``!=``, ``in``, and the methods ``findAll { it }``, ``join(sep)``.
Anything else raises :class:`GroovyError`, so a construct the reader does not know cannot pass a
test unnoticed. The tests at the end check the reader itself.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest


class GroovyError(ValueError):
    pass


class Missing:
    """Groovy's null for absent map keys and unset ext properties."""


def truthy(v) -> bool:
    """Groovy truth."""
    if v is None:
        return False
    if isinstance(v, (bool, int, float)):
        return bool(v)
    if isinstance(v, (str, list, tuple, dict)):
        return len(v) > 0
    return True


def gstr(v) -> str:
    """How Groovy prints a value inside a GString."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (list, tuple)):
        return " ".join(gstr(x) for x in v)  # a list of staged paths renders space-separated
    return str(v)


# --------------------------------------------------------------------------- tokenizer

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>-?\d+(?:\.\d+)?)
  | (?P<sq>'(?:[^'\\]|\\.)*')
  | (?P<dq>"(?:[^"\\$]|\\.|\$\{(?:[^{}"']|'[^']*'|\{[^{}]*\})*\}|\$[A-Za-z_][\w.]*|\$)*")
  | (?P<op>\?:|\?|:|==|!=|&&|\|\||!|\.|,|\(|\)|\[|\]|\{|\})
  | (?P<name>[A-Za-z_]\w*)
""", re.X | re.S)


def tokenize(text: str):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise GroovyError(f"cannot read {text[pos:pos + 30]!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "ws":
            out.append((kind, m.group()))
    out.append(("end", ""))
    return out


# --------------------------------------------------------------------------- evaluator


class Evaluator:
    """Evaluate an expression against ``env`` (a dict of names to values; dicts nest)."""

    def __init__(self, env: dict):
        self.env = env

    def eval(self, text: str):
        self.toks = tokenize(text)
        self.i = 0
        value = self.ternary()
        if self.peek()[0] != "end":
            raise GroovyError(f"unexpected {self.peek()[1]!r} in {text!r}")
        return value

    # -- token helpers
    def peek(self):
        return self.toks[self.i]

    def take(self, value=None):
        tok = self.toks[self.i]
        if value is not None and tok[1] != value:
            raise GroovyError(f"expected {value!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def at(self, value):
        return self.peek()[1] == value and self.peek()[0] in ("op", "name")

    # -- grammar
    def ternary(self):
        cond = self.elvis()
        if self.at("?"):
            self.take("?")
            a = self.ternary()
            self.take(":")
            b = self.ternary()
            return a if truthy(cond) else b
        return cond

    def elvis(self):
        left = self.orexpr()
        if self.at("?:"):
            self.take("?:")
            right = self.elvis()
            return left if truthy(left) else right
        return left

    def orexpr(self):
        v = self.andexpr()
        while self.at("||"):
            self.take()
            w = self.andexpr()
            v = truthy(v) or truthy(w)
        return v

    def andexpr(self):
        v = self.notexpr()
        while self.at("&&"):
            self.take()
            w = self.notexpr()
            v = truthy(v) and truthy(w)
        return v

    def notexpr(self):
        if self.at("!"):
            self.take()
            return not truthy(self.notexpr())
        return self.compare()

    def compare(self):
        left = self.postfix()
        if self.at("==") or self.at("!=") or self.at("in"):
            op = self.take()[1]
            right = self.postfix()
            if op == "==":
                return left == right
            if op == "!=":
                return left != right
            return left in right
        return left

    def postfix(self):
        v = self.primary()
        while self.at("."):
            self.take(".")
            name = self.take()[1]
            if self.at("("):
                self.take("(")
                args = []
                while not self.at(")"):
                    args.append(self.ternary())
                    if self.at(","):
                        self.take(",")
                self.take(")")
                v = self.call(v, name, args)
            elif self.at("{"):
                v = self.closure_call(v, name)
            else:
                if isinstance(v, dict):
                    v = v.get(name)
                elif v is None:
                    raise GroovyError(f"null.{name}")
                else:
                    v = getattr(v, name)
        return v

    def call(self, v, name, args):
        if name == "join" and isinstance(v, list):
            return args[0].join(gstr(x) for x in v)
        raise GroovyError(f"method {name} is not supported")

    def closure_call(self, v, name):
        self.take("{")
        start = self.i
        depth = 1
        while depth:
            tok = self.take()
            if tok[1] == "{":
                depth += 1
            elif tok[1] == "}":
                depth -= 1
            if tok[0] == "end":
                raise GroovyError("unclosed closure")
        body = self.toks[start:self.i - 1]
        if name != "findAll" or [t[1] for t in body] != ["it"]:
            raise GroovyError(f"closure call {name} {{ {' '.join(t[1] for t in body)} }} is not supported")
        return [x for x in v if truthy(x)]

    def primary(self):
        kind, text = self.take()
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "sq":
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        if kind == "dq":
            return render_gstring(text[1:-1], self.env)
        if text == "(":
            v = self.ternary()
            self.take(")")
            return v
        if text == "[":
            items = []
            while not self.at("]"):
                items.append(self.ternary())
                if self.at(","):
                    self.take(",")
            self.take("]")
            return items
        if kind == "name":
            if text in ("null", "true", "false"):
                return {"null": None, "true": True, "false": False}[text]
            if text not in self.env:
                raise GroovyError(f"unknown name {text!r}")
            return self.env[text]
        raise GroovyError(f"unexpected {text!r}")


def evaluate(text: str, env: dict):
    return Evaluator(env).eval(text)


_INTERP = re.compile(r"\$\{((?:[^{}\"']|\"[^\"]*\"|'[^']*'|\{[^{}]*\})*)\}|\$([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")


def render_gstring(body: str, env: dict) -> str:
    """A GString body (no quotes): ``\\`` escapes, ``$name.path`` and ``${expr}``."""
    out = []
    k = 0
    while k < len(body):
        c = body[k]
        if c == "\\" and k + 1 < len(body):
            nxt = body[k + 1]
            out.append({"n": "\n", "t": "\t", "\\": "\\", "$": "$", '"': '"', "'": "'"}.get(nxt, "\\" + nxt))
            k += 2
            continue
        if c == "$":
            m = _INTERP.match(body, k)
            if not m:
                raise GroovyError(f"bare $ in GString at {body[k:k + 20]!r}")
            expr = m.group(1) if m.group(1) is not None else m.group(2)
            out.append(gstr(evaluate(expr, env)))
            k = m.end()
            continue
        out.append(c)
        k += 1
    return "".join(out)


# --------------------------------------------------------------------------- main.nf


def _block(text: str, label: str, labels=("input", "output", "when", "script", "stub")) -> str:
    """The lines of a process section ``label:`` up to the next section or the end."""
    m = re.search(rf"^\s*{label}:\s*$", text, re.M)
    if not m:
        return ""
    rest = text[m.end():]
    nxt = re.search(r"^\s*(%s):\s*$" % "|".join(labels), rest, re.M)
    body = rest[: nxt.start()] if nxt else rest
    return body.rstrip().rstrip("}").rstrip() if not nxt else body


def _split_top(text: str, sep=","):
    """Split on ``sep`` outside brackets and quotes."""
    parts, depth, cur, quote = [], 0, [], None
    for c in text:
        if quote:
            cur.append(c)
            if c == quote:
                quote = None
            continue
        if c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


_QUAL = re.compile(r"^(val|path|env|eval|file|stdout)\((.*)\)$", re.S)


def _qualified(item: str):
    m = _QUAL.match(item.strip())
    if not m:
        raise GroovyError(f"not a qualified input/output: {item!r}")
    qual, inner = m.groups()
    args = _split_top(inner)
    first = args[0] if args else ""
    opts = {}
    for a in args[1:]:
        k, v = a.split(":", 1)
        opts[k.strip()] = v.strip().strip("'\"")
    if first.startswith(("'", '"')):
        first = first[1:-1]
    return {"qualifier": qual, "name": first, **opts}


def parse_channel_line(line: str):
    """``tuple val(meta), path(x), emit: name, optional: true`` -> dict."""
    parts = _split_top(line)
    items, opts = [], {}
    for p in parts:
        if re.match(r"^(emit|topic|optional)\s*:", p):
            k, v = p.split(":", 1)
            opts[k.strip()] = v.strip()
            continue
        if p.startswith("tuple "):
            p = p[len("tuple "):]
        items.append(_qualified(p))
    return {"items": items, **opts}


class Process:
    def __init__(self, path: str):
        self.path = path
        self.text = open(path, encoding="utf-8").read()
        m = re.search(r"^process\s+(\w+)\s*\{", self.text, re.M)
        if not m:
            raise GroovyError(f"{path}: no process")
        self.name = m.group(1)
        self.directives = self.text[m.end(): re.search(r"^\s*input:\s*$", self.text, re.M).start()]
        self.inputs = [parse_channel_line(line) for line in _logical_lines(_block(self.text, "input"))]
        self.outputs = [parse_channel_line(line) for line in _logical_lines(_block(self.text, "output"))]
        self.script = _block(self.text, "script")
        self.stub = _block(self.text, "stub")

    def labels(self):
        return re.findall(r"^\s*label\s+'([^']+)'", self.directives, re.M)

    def render(self, section: str, env: dict) -> str:
        """Evaluate the ``def`` lines of ``script``/``stub`` and render its command."""
        body = self.script if section == "script" else self.stub
        env = dict(env)
        m = re.search(r'"""(.*?)"""', body, re.S)
        if not m:
            raise GroovyError(f"{self.path}: {section} has no triple-quoted command")
        for line in body[: m.start()].splitlines():
            line = line.strip()
            if not line or line.startswith("//"):
                continue
            d = re.match(r"^def\s+(\w+)\s*=\s*(.+)$", line)
            if not d:
                raise GroovyError(f"{self.path}: unsupported statement {line!r}")
            env[d.group(1)] = evaluate(d.group(2), env)
        return render_gstring(m.group(1), env)


def _logical_lines(block: str):
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("//")]


# --------------------------------------------------------------------------- config files


def _matching_brace(text: str, open_at: int) -> int:
    depth, quote, k = 0, None, open_at
    while k < len(text):
        c = text[k]
        if quote:
            if c == "\\":
                k += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k
        k += 1
    raise GroovyError("unbalanced braces")


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(re.sub(r"(^|\s)//.*$", "", line) for line in text.splitlines())


def config_block(text: str, head: str) -> str | None:
    """The body of the first ``head {`` block (e.g. ``params``, ``withName: 'X'``)."""
    m = re.search(r"(^|\s)" + re.escape(head) + r"\s*\{", text)
    if not m:
        return None
    start = m.end() - 1
    return text[start + 1: _matching_brace(text, start)]


def config_assignments(block: str, env: dict) -> dict:
    """``name = value`` lines of a block, evaluated (one line each)."""
    out = {}
    for line in block.splitlines():
        m = re.match(r"^\s*(\w+)\s*=\s*(.+?)\s*$", line)
        if m:
            out[m.group(1)] = evaluate(m.group(2), env)
    return out


def ext_closures(block: str) -> dict:
    """``ext.NAME = { EXPR }`` closures of a ``withName:`` block, as expression texts."""
    out = {}
    for m in re.finditer(r"ext\.(\w+)\s*=\s*\{", block):
        start = m.end() - 1
        end = _matching_brace(block, start)
        out[m.group(1)] = block[start + 1: end].strip()
    return out


def publish_dir(block: str) -> str | None:
    m = re.search(r"publishDir\s*=\s*\[", block)
    if not m:
        return None
    depth, k = 0, m.end() - 1
    while True:
        if block[k] == "[":
            depth += 1
        elif block[k] == "]":
            depth -= 1
            if depth == 0:
                return block[m.end() - 1: k + 1]
        k += 1


# --------------------------------------------------------------------------- the pipelines

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOWS = os.path.join(ROOT, "workflows")
MODULES = os.path.join(WORKFLOWS, "modules", "local", "jaxrna")
SUBCOMMANDS = ("fold", "align", "targets", "interact")
PROCESS_DIRS = SUBCOMMANDS + ("targets_split", "targets_merge")


def module_process(name: str) -> Process:
    return Process(os.path.join(MODULES, name, "main.nf"))


def read_config(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return strip_comments(fh.read())


def pipeline_params(profile: str | None = None, **overrides) -> dict:
    """``params`` of nextflow.config, then of a profile's config file, then ``overrides``."""
    env = {"projectDir": WORKFLOWS, "launchDir": ROOT}
    params = config_assignments(config_block(read_config(os.path.join(WORKFLOWS, "nextflow.config")), "params"),
                                env)
    if profile == "test":
        test = read_config(os.path.join(WORKFLOWS, "conf", "test.config"))
        params.update(config_assignments(config_block(test, "params"), env))
    elif profile is not None:
        raise ValueError(profile)
    params.update(overrides)
    return params


def modules_config_block(process_name: str) -> str:
    text = read_config(os.path.join(WORKFLOWS, "conf", "modules.config"))
    block = config_block(text, f"withName: '{process_name}'")
    if block is None:
        raise GroovyError(f"conf/modules.config has no withName: '{process_name}'")
    return block


def task_ext(process_name: str, params: dict, meta: dict) -> dict:
    """The ``task.ext`` a task of ``process_name`` sees: conf/modules.config's closures."""
    closures = ext_closures(modules_config_block(process_name))
    env = {"params": params, "meta": meta}
    return {name: evaluate(expr, env) for name, expr in closures.items()}


def brace_expand(pattern: str) -> list:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",")
            for x in brace_expand(pattern[:m.start()] + alt + pattern[m.end():])]


def declared_matches(pattern: str, workdir: str, inputs: set) -> list:
    """Files of the task directory an output pattern captures (inputs excluded, as Nextflow does)."""
    found = set()
    for pat in brace_expand(pattern):
        for path in glob.glob(os.path.join(workdir, pat)):
            rel = os.path.relpath(path, workdir)
            if rel not in inputs and os.path.isfile(path):
                found.add(rel)
    return sorted(found)


@pytest.fixture(scope="session")
def jax_cache(tmp_path_factory):
    """A JAX compilation cache shared by the jaxrna runs of all test_nextflow_* files."""
    return str(tmp_path_factory.mktemp("jaxrna-cache"))


def tool_env(bin_dir: str) -> dict:
    """Environment in which `jaxrna` (this checkout) is on PATH: the only command the tasks run."""
    os.makedirs(bin_dir, exist_ok=True)
    shim = os.path.join(bin_dir, "jaxrna")
    if not os.path.exists(shim):
        with open(shim, "w") as fh:
            fh.write(f'#!/bin/sh\nexec "{sys.executable}" -m jaxrna "$@"\n')
        os.chmod(shim, 0o755)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


class Task:
    """One rendered and executed task of a module, in its own work directory."""

    def __init__(self, process: Process, section: str, workdir: str, inputs: dict, meta: dict,
                 ext: dict, env: dict, timeout: int = 600):
        self.process = process
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.staged = set()
        binding = {"meta": meta, "task": {"process": process.name, "ext": ext, "cpus": 1, "attempt": 1}}
        for name, value in inputs.items():
            # inputs: name -> source path, or list of (staged name, source path)
            if isinstance(value, list):
                names = []
                for staged, src in value:
                    self._stage(staged, src)
                    names.append(staged)
                binding[name] = names
            else:
                staged = os.path.basename(value)
                self._stage(staged, value)
                binding[name] = staged
        self.when = truthy(evaluate(_when_expr(process), binding))
        self.command = process.render(section, binding)
        with open(os.path.join(workdir, ".command.sh"), "w", encoding="utf-8") as fh:
            fh.write("#!/bin/bash -euo pipefail\n" + self.command)
        self.result = subprocess.run(["bash", "-euo", "pipefail", ".command.sh"], cwd=workdir, env=env,
                                     capture_output=True, text=True, timeout=timeout)

    def _stage(self, staged: str, src: str):
        dest = os.path.join(self.workdir, staged)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        os.symlink(os.path.abspath(src), dest)
        self.staged.add(staged)

    def produced(self) -> set:
        out = set()
        for dirpath, _, files in os.walk(self.workdir):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), self.workdir)
                if rel not in self.staged and not rel.startswith(".command"):
                    out.add(rel)
        return out

    def outputs(self) -> dict:
        """emit name -> files its path patterns capture."""
        result = {}
        for channel in self.process.outputs:
            files = []
            for item in channel["items"]:
                if item["qualifier"] == "path":
                    files += declared_matches(item["name"], self.workdir, self.staged)
            result[channel.get("emit")] = files
        return result


def _when_expr(process: Process) -> str:
    lines = _logical_lines(_block(process.text, "when"))
    return lines[0] if lines else "true"


# --------------------------------------------------------------------------- the reader's tests


@pytest.mark.parametrize("expr,env,expected", [
    ("task.ext.args ?: ''", {"task": {"ext": {}}}, ""),
    ("task.ext.args ?: ''", {"task": {"ext": {"args": "-f tsv"}}}, "-f tsv"),
    ('task.ext.prefix ?: "${meta.id}"', {"task": {"ext": {}}, "meta": {"id": "s1"}}, "s1"),
    ("meta.chunk ?: meta.id", {"meta": {"id": "s1"}}, "s1"),
    ("x in [ 'a', 'b' ] ? 'txt' : x", {"x": "tsv"}, "tsv"),
    ("x in [ 'a', 'b' ] ? 'txt' : x", {"x": "a"}, "txt"),
    ("[ 'a', '', null, \"b ${n}\" ].findAll { it }.join(' ')", {"n": 3}, "a b 3"),
    ("!(a || b)", {"a": 0, "b": None}, True),
    ("p != null ? \"--m ${p}\" : ''", {"p": 0}, "--m 0"),
    ("p != null ? \"--m ${p}\" : ''", {"p": None}, ""),
])
def test_expressions(expr, env, expected):
    assert evaluate(expr, env) == expected


def test_gstring_escapes_and_paths():
    env = {"meta": {"id": "m"}, "reports": ["chunks/a.txt", "chunks/b.txt"], "p": "x"}
    assert render_gstring(r"a \\\n $meta.id ${p}.fa \$HOME $reports", env) == \
        "a \\\n m x.fa $HOME chunks/a.txt chunks/b.txt"


@pytest.mark.parametrize("expr", ["foo.bar()", "x.collect { it * 2 }", "undefined_name", "a + b"])
def test_unsupported_constructs_are_errors(expr):
    with pytest.raises(GroovyError):
        evaluate(expr, {"x": [1], "foo": {"bar": 1}, "a": 1, "b": 2})


def test_channel_lines():
    line = ('tuple val("${task.process}"), val(\'jaxrna\'), eval("jaxrna --version | sed \'s/^jaxrna //\'"), '
            "emit: versions_jaxrna, topic: versions")
    parsed = parse_channel_line(line)
    assert parsed["emit"] == "versions_jaxrna" and parsed["topic"] == "versions"
    assert [i["qualifier"] for i in parsed["items"]] == ["val", "val", "eval"]
    assert parsed["items"][2]["name"] == "jaxrna --version | sed 's/^jaxrna //'"
    parsed = parse_channel_line("tuple val(meta), path(reports, stageAs: 'chunks/*'), path(manifest)")
    assert parsed["items"][1] == {"qualifier": "path", "name": "reports", "stageAs": "chunks/*"}
