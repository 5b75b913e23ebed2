"""The rules the engine promises: one door for matrix products, float32 throughout, a complete map of each block."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
from shared_checks import Float64Alarm

import minitransformer
from conftest import with_weights_viewed_as
from minitransformer.engine.ledger import Phase
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY

GPT2 = GPT2_FAMILY.stage_table(GPT2Config())  # GPT-2's stages: every GPT-2 has the same
BLOCK, BLOCK_OPS, MATMUL_OPS = GPT2.block, GPT2.block_ops, GPT2.matmul_ops
PACKAGE = Path(minitransformer.__file__).parent
# NumPy's functions that compute products of arrays, wherever NumPy keeps them (np.x, np.linalg.x, ...).
PRODUCT_FUNCTIONS = {"matmul", "dot", "einsum", "tensordot", "inner", "vdot", "outer", "kron", "vecdot", "matvec",
                     "vecmat", "multi_dot", "matrix_power"}  # fmt: skip
MATMUL_OPERATORS = {"matmul", "imatmul", "__matmul__", "__imatmul__"}  # the operator module's `@` and `@=`
MATMUL_METHODS = {"__matmul__", "__rmatmul__", "__imatmul__"}  # what `@` calls on any object


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from: "np" for np.linalg.matmul; None for f().x."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def matrix_products_in(path: Path, root: Path | None = None) -> list[str]:
    """Every matrix product in a source file other than through the door, as "file:line what".

    Found: `a @ b` and `@=`; a NumPy product function (PRODUCT_FUNCTIONS) called or only referenced
    (`functools.reduce(np.matmul, ...)`), through whatever name NumPy or its modules are bound to
    (`import numpy as xp`, `import numpy.linalg as la`, `from numpy import linalg`, `backend = np`), or by
    getattr; its import (`from numpy import dot`, `from numpy.linalg import multi_dot`, `from numpy import *`);
    the operator module's matmul, the same ways; an array's method (`x.dot(y)`, `x.__matmul__(y)`), called
    or referenced. `tape.matmul(...)`, the door itself, is a method of ours, not NumPy's, and is allowed.
    `root` names the file by its path below it (engine/tape.py), else by its name.
    """
    where = path.relative_to(root).as_posix() if root else path.name
    tree = ast.parse(path.read_text(), filename=str(path))
    numpy, operator = {"np", "numpy"}, {"operator"}  # the names NumPy (or one of its modules) and operator go by
    found: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]  # `import numpy.linalg` binds numpy
                if alias.name.split(".")[0] == "numpy":
                    numpy.add(bound)
                elif alias.name == "operator":
                    operator.add(bound)
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] in (
                "numpy", "operator"):  # fmt: skip
            names = PRODUCT_FUNCTIONS if node.module.startswith("numpy") else MATMUL_OPERATORS
            for alias in node.names:
                if alias.name in names or alias.name == "*":
                    found.append((node, f"from {node.module} import {alias.name}"))
                elif node.module.startswith("numpy"):
                    numpy.add(alias.asname or alias.name)  # from numpy import linalg
    assigned = [(t.id, n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                if isinstance(t, ast.Name)]  # fmt: skip
    while new := {name for name, value in assigned if _root(value) in numpy} - numpy:  # backend = np
        numpy |= new
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            found.append((node, "@=" if isinstance(node, ast.AugAssign) else "@"))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name, start = node.attr, _root(node.value)
            if (
                name in MATMUL_METHODS
                or (start in numpy and name in PRODUCT_FUNCTIONS)
                or (start in operator and name in MATMUL_OPERATORS)
                or name in PRODUCT_FUNCTIONS - {"matmul"}
            ):
                found.append((node, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)):  # fmt: skip
            start, name = _root(node.args[0]), node.args[1].value
            if (start in numpy and name in PRODUCT_FUNCTIONS) or (start in operator and name in MATMUL_OPERATORS):
                found.append((node, ast.unparse(node)))
    found.sort(key=lambda hit: (hit[0].lineno, hit[0].col_offset))  # in the order the source reads
    return [f"{where}:{node.lineno} {what}" for node, what in found]


def test_the_counting_matmul_is_the_only_door_for_matrix_products():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in matrix_products_in(path, PACKAGE)]
    door = [hit for hit in found if hit.startswith("engine/tape.py:")]
    # np.matmul, and np.dot for the small blocks the threads make at once (threads.sized_for_threads says why), both
    # handed to the engine's threads on one line
    assert [hit.split()[-1] for hit in door] == ["np.matmul", "np.dot"], found
    assert found == door, f"matrix products outside Tape.matmul: {[h for h in found if h not in door]}"
    source = (PACKAGE / "engine" / "tape.py").read_text()
    tape = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Tape")
    methods = {n.name: n for n in tape.body if isinstance(n, ast.FunctionDef)}
    # the product itself sits in Tape._product, whose one caller is Tape.matmul, which records it
    product = methods["_product"]
    for hit in door:
        line = int(hit.split(":")[1].split()[0])
        assert product.lineno <= line <= product.end_lineno, (hit, product.lineno, product.end_lineno)
    callers = [name for name, node in methods.items() for call in ast.walk(node)
               if isinstance(call, ast.Attribute) and call.attr == "_product"]  # fmt: skip
    assert callers == ["matmul"], callers


SAMPLE = """\
import functools
import operator
import operator as op
import numpy as np
import numpy as xp
import numpy.linalg as la
from numpy import linalg
from numpy import inner
from numpy.linalg import multi_dot as chain
from operator import matmul
from numpy import float32, zeros


@decorator
def f(a, b, tape, arrays):
    c = a @ b
    c @= b
    tape.matmul('qkv', a, b, 'T D, D 3D -> T 3D')  # the door
    step = tape.matmul  # the door too, only named
    d = np.einsum('ij,jk', a, b) + a.dot(b) + np.matmul(a, b)
    d = np.linalg.matmul(a, b) + xp.matmul(a, b) + la.matmul(a, b) + linalg.matmul(a, b)
    d = np.vecdot(a, b) + np.matvec(a, b) + np.vecmat(a, b)
    d = operator.matmul(a, b) + op.imatmul(a, b) + a.__matmul__(b)
    d = np.linalg.multi_dot(arrays) + np.linalg.tensordot(a, b) + np.linalg.vecdot(a, b)
    d = functools.reduce(np.matmul, arrays) + functools.reduce(operator.matmul, arrays)
    backend = np
    d = backend.matmul(a, b) + getattr(np, "matmul")(a, b)
    return d * np.multiply(a, b).sum() + zeros(3, float32) + c.dot_products + step
"""


def test_the_scan_does_catch_products(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(SAMPLE)
    assert [h.split(maxsplit=1)[1] for h in matrix_products_in(sample)] == [
        "from numpy import inner", "from numpy.linalg import multi_dot", "from operator import matmul",
        "@", "@=", "np.einsum", "a.dot", "np.matmul",
        "np.linalg.matmul", "xp.matmul", "la.matmul", "linalg.matmul",
        "np.vecdot", "np.matvec", "np.vecmat",
        "operator.matmul", "op.imatmul", "a.__matmul__",
        "np.linalg.multi_dot", "np.linalg.tensordot", "np.linalg.vecdot",
        "np.matmul", "operator.matmul",
        "backend.matmul", "getattr(np, 'matmul')",
    ]  # fmt: skip


# The layers, top to bottom, each with the top-level names (modules or subpackages) it holds. A module imports its own
# layer and those below it, never one above, not even inside a function: a convenience a low object offers
# (model.generate, a ledger drawn in Jupyter) is registered by the layer above it. The package's __init__ (the public
# API, "" here), the modules beside it that name the API where the README finds it, and __main__ stand above every layer.
LAYERS = (("the package", ("", "__main__", "count", "html_report", "roofline")), ("cli", ("cli",)), ("views", ("views",)),
          ("verbs", ("verbs",)), ("models", ("models",)), ("families", ("families",)), ("engine", ("engine",)),
          ("the bottom", ("errors", "version", "text")))  # fmt: skip


def module_name(path: Path, root: Path = PACKAGE) -> str:
    """A source file's module below the package, dotted: "engine.tape", "cli"; "" for the package itself."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports(root: Path = PACKAGE, package_name: str = "minitransformer") -> dict[str, set[str]]:
    """module -> the package modules it imports anywhere in its source (inside functions too), by dotted name.

    `from ..views import report` imports the module views.report; `from .tape import Tape` the module tape of
    its own subpackage; `from .. import __version__` the package's own __init__ (""). Absolute imports of
    the package (`import minitransformer.views.report`, `from minitransformer import load_model`) count the
    same. The subpackages' own __init__ files, which Python runs on the way, hold only a docstring (a test below
    holds that) and are not edges.
    """
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    target = ".".join([*base, *([node.module] if node.module else [])])
                elif (node.module or "").split(".")[0] == package_name:
                    target = node.module.removeprefix(package_name).lstrip(".")
                else:
                    continue
                for alias in node.names:
                    inner = f"{target}.{alias.name}".lstrip(".")
                    found.add(inner if inner in modules else target)
            elif isinstance(node, ast.Import):
                found |= {a.name.removeprefix(package_name).lstrip(".") for a in node.names
                          if a.name.split(".")[0] == package_name}  # fmt: skip
        graph[name] = {m for m in found if m in modules} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as the path that closes it (["a", "b", "a"]), or None: a depth-first search that meets
    a node still on its own path has gone round."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for target in sorted(graph.get(node, ())):
            cycle = visit(target, path + [node])
            if cycle:
                return cycle
        done.add(node)
        return None

    return next(filter(None, (visit(node, []) for node in sorted(graph))), None)


def layer_of(module: str) -> int:
    """The module's layer, counted from the top (0: the package's __init__ and __main__)."""
    top = module.split(".")[0]
    layer = next((i for i, (_, names) in enumerate(LAYERS) if top in names), None)
    assert layer is not None, f"{module or 'the package'} is in no layer: add it to LAYERS"
    return layer


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module by one of a lower layer, both named with their layers."""

    def named(module: str) -> str:
        return f"{module or '__init__'} ({LAYERS[layer_of(module)][0]})"

    return sorted(f"{named(module)} imports {named(target)}" for module, targets in graph.items()
                  for target in targets if layer_of(target) < layer_of(module))  # fmt: skip


def test_the_package_imports_have_no_cycle():
    assert "count_passes" not in (PACKAGE / "verbs" / "generate.py").read_text()  # counting lives in count.py
    cycle = find_cycle(package_imports())
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_every_import_points_down_the_layers():
    graph = package_imports()
    assert "views.report" in graph["cli"] and "models.hub" in graph["models.registry"]  # lazy, and `from . import`
    upward = upward_imports(graph)
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """Relative at any level, absolute, inside a function, `from . import module`, `from .. import name`."""
    root = tmp_path / "pkg"
    files = {
        "__init__.py": "from .top import main\n",
        "top.py": "def main():\n    import pkg.low.b\n    from pkg.low import a\n",
        "low/__init__.py": '"""only a docstring"""\n',
        "low/a.py": "from . import b\nfrom .. import top\n",
        "low/b.py": "def f():\n    from ..low.a import g\n    from .. import VERSION\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    graph = package_imports(root, "pkg")
    assert graph == {"": {"top"}, "top": {"low.a", "low.b"}, "low": set(), "low.a": {"low.b", "top"},
                     "low.b": {"low.a", ""}}  # fmt: skip
    assert find_cycle(graph) == ["", "top", "low.a", "low.b", ""]


def test_the_cycle_finder_and_the_layer_check_find_what_they_look_for():
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None  # a diamond is no cycle
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"x": {"a"}, "a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    graph = {
        "engine.ledger": {"views.html_report", "engine.stages", "errors"},
        "views.html_report": {"engine.ledger"},
        "cli": {"views.report"},
        "text": {""},
    }
    assert upward_imports(graph) == ["engine.ledger (engine) imports views.html_report (views)",
                                     "text (the bottom) imports __init__ (the package)"]  # fmt: skip
    with pytest.raises(AssertionError, match="no layer"):
        layer_of("newcomer")


def test_the_subpackages_init_files_hold_only_a_docstring():
    """Python runs a subpackage's __init__ on the way to any module in it: it must import nothing (the import
    graph leaves these files out) and say what the layer is."""
    for path in sorted(PACKAGE.rglob("__init__.py")):
        if path.parent != PACKAGE:
            body = ast.parse(path.read_text()).body
            assert (
                len(body) == 1
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ), f"{path.relative_to(PACKAGE)} holds more than a docstring"


def names_used(path: Path) -> set[str]:
    """Names a source file reads: variables, attributes, imports; a function's own locals do not count."""
    tree = ast.parse(path.read_text(), filename=str(path))
    local = {n.id for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(f) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}  # fmt: skip
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in local:
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.alias):
            used.add(node.name.split(".")[-1])
    return used


def test_every_function_is_used_and_every_constant_has_one_home():
    root = PACKAGE.parent
    readers = [
        *PACKAGE.rglob("*.py"),
        *root.glob("tests/**/*.py"),
        *root.glob("scripts/*.py"),
        *root.glob("examples/*.py"),
    ]
    used = set().union(*(names_used(path) for path in readers))
    defined: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        # Each family's folder answers the same questions under the same names (families/architecture.py):
        # its PRESETS, KINDS, PREFIX... are one per family, and the family's folder is their one home.
        home = path.relative_to(PACKAGE).as_posix()
        family = home.startswith("families/") and home.count("/") == 2
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                defined.setdefault(node.name, []).append(home)
            elif isinstance(node, ast.Assign) and not family:
                for target in (t for t in node.targets if isinstance(t, ast.Name) and t.id.isupper()):
                    defined.setdefault(target.id, []).append(home)
    unused = sorted(f"{homes[0]}:{name}" for name, homes in defined.items() if name not in used and "__" not in name)
    assert not unused, f"defined and never used: {unused}"
    twice = {name: homes for name, homes in defined.items() if len(homes) > 1 and name.isupper()}
    assert not twice, f"constants defined in more than one module: {twice}"


def test_no_float64_anywhere_in_the_forward_pass(small_gpt2):
    model = with_weights_viewed_as(small_gpt2, Float64Alarm)
    seen = []
    logits = model.run(np.array([464, 3139, 286]), all_positions=True,
                       watcher=lambda name, value, record: seen.append((name, value.dtype)) or value)  # fmt: skip
    assert logits.dtype == np.float32 and isinstance(logits, Float64Alarm)
    assert seen and all(dtype == np.float32 for _, dtype in seen)
    result = model.generate("The capital", max_new_tokens=3, stop_at_eos=False)
    assert len(result.new_tokens) == 3

    # The alarm itself works: a float64 array promotes under every NumPy; a float64 scalar only since
    # NumPy 2 (NEP 50; before, its value decided and float32 stayed float32), where it must ring too.
    with pytest.raises(AssertionError, match="float64"):
        np.zeros(3, np.float32).view(Float64Alarm) * np.ones(3, np.float64)
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        with pytest.raises(AssertionError, match="float64"):
            np.zeros(3, np.float32).view(Float64Alarm) * np.float64(2.0)


def test_every_activation_is_float32(tmp_path):
    from conftest import write_gpt2
    from minitransformer import load_model
    from minitransformer.families.keys import SUPPORTED_ACTIVATIONS

    for activation in SUPPORTED_ACTIVATIONS:
        model = load_model(write_gpt2(tmp_path / activation, vocab_size=50, activation_function=activation))
        assert model.logits(np.arange(5)).dtype == np.float32, activation


FLOAT64_TRUTHS = {  # each activation in float64, from its definition (math.erf, math.tanh, math.exp), one number
    "gelu": lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2))),
    "gelu_fast": lambda x: 0.5 * x * (1 + math.tanh(0.7978845608 * x * (1 + 0.044715 * x * x))),
    "gelu_new": lambda x: 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "quick_gelu": lambda x: x / (1 + math.exp(min(-1.702 * x, 700))),
    "sigmoid": lambda x: 1 / (1 + math.exp(min(-x, 700))),
    "silu": lambda x: x / (1 + math.exp(min(-x, 700))),
}


@pytest.mark.parametrize("name", sorted(FLOAT64_TRUTHS))
def test_an_activation_in_blocks_of_rows_is_its_definition_to_float32s_rounding(name):
    """The activations computed in place, a block of rows at a time (ops.rowwise): within a few of float32's roundings
    of the definition in float64, and the same bits for a row whether it is computed alone or in a block."""
    from minitransformer.engine.ops import ACTIVATIONS

    rng = np.random.default_rng(7)
    x = (rng.standard_normal((600, 1000)) * rng.choice([0.01, 1.0, 4.0, 40.0], size=(600, 1000))).astype(np.float32)
    with np.errstate(over="ignore"):
        y = ACTIVATIONS[name](x)
    assert y.dtype == np.float32 and y.shape == x.shape
    rows = x[::97]
    truth = np.vectorize(FLOAT64_TRUTHS[name], otypes=[np.float64])(rows.astype(np.float64))
    # float32's rounding of the result, and of x carried through the function (where 1 + tanh or exp's argument
    # cancels or grows, the error is x's rounding, as torch's float32 has it)
    allowed = 8e-7 * np.abs(truth) + 1.2e-7 * np.abs(rows)
    excess = np.abs(y[::97] - truth) / allowed
    worst = np.unravel_index(np.argmax(excess), rows.shape)
    assert excess.max() <= 1, (name, rows[worst], y[::97][worst], truth[worst])
    alone = ACTIVATIONS[name](x[5:6])  # one row: one call, no blocks
    assert np.array_equal(alone.view(np.uint32), y[5:6].view(np.uint32)), name


def test_a_block_is_mapped_completely_in_the_order_the_equations_run(small_gpt2):
    phase = Phase("prefill", 0, 5, 5)
    small_gpt2.run(np.arange(5), phase=phase)
    ops = [r.op for r in phase.records]
    n = small_gpt2.config.n_layer
    assert ops == ["embed", *BLOCK_OPS * n, "ln_f", "last", "logits"]
    assert [r.name for r in phase.layer_records(1)][:3] == ["blocks.1.ln_1", "blocks.1.attn.qkv", "blocks.1.attn.q"]
    for r in phase.records:
        assert (r.dot_products > 0) == (r.op in MATMUL_OPS), r.op
    kinds = {s.kind for s in BLOCK}
    assert {"norm", "scale", "mask", "softmax", "activation", "residual", "reshape"} <= kinds


def test_shapes_are_checked_not_just_commented(small_gpt2):
    from minitransformer.engine.tape import Dims, Tape

    tape = Tape(Dims(T=5, t=5, D=16, H=2, F=64, V=50257, R=1))
    with pytest.raises(AssertionError, match=r"\[T, D\] = \[5, 16\]"):
        tape.stage("ln_1", np.zeros((5, 17), np.float32), "T D")
    with pytest.raises(AssertionError):
        tape.matmul("qkv", np.zeros((5, 16), np.float32), np.zeros((16, 47), np.float32), "T D, D 3D -> T 3D")


def test_weights_are_memory_mapped_not_copied(small_gpt2):
    wte = small_gpt2.params.wte.weight
    assert type(wte) is np.ndarray and not wte.flags.owndata and not wte.flags.writeable
    base = wte
    while base.base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap) or "mmap" in type(base).__name__


def test_kv_cache_is_preallocated_and_written_in_place(small_gpt2):
    cache = small_gpt2.new_cache(capacity=10)
    buffers = [id(k) for k in cache.keys]
    small_gpt2.run(np.arange(4), cache=cache)
    small_gpt2.run(np.arange(1), cache=cache)
    assert [id(k) for k in cache.keys] == buffers and cache.length == 5


def test_a_cache_too_small_for_the_pass_is_refused_in_words(small_gpt2):
    """A ValueError from inside the cache before; the API's bad input is a UserError that says what to do."""
    from minitransformer import UserError

    for capacity, ids in ((3, np.arange(4)), (0, np.arange(1))):
        with pytest.raises(UserError, match=rf"this cache holds {capacity} positions and {len(ids)} are needed"):
            small_gpt2.run(ids, cache=small_gpt2.new_cache(capacity=capacity))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_the_fast_paths_give_exactly_the_plain_numbers(family, tmp_path, monkeypatch):
    """Unwatched, attention stages write in place; big row-wise stages (softmax, activations, RMSNorm) run on
    several threads. Watched and on one thread, every stage makes a new array. The numbers must not differ
    by a bit."""
    from conftest import write_gpt2, write_llama
    from minitransformer import load_model
    from minitransformer.engine import ops, row_chunks, threads

    shape = dict(n_layer=2, n_head=4, n_embd=64, n_positions=512, vocab_size=300)
    if family == "gpt2":
        model = load_model(write_gpt2(tmp_path / "m", **shape))
    else:  # grouped-query: 4 query heads over 2 key/value heads; the [400, 1024] norms and MLP are split among threads
        model = load_model(write_llama(tmp_path / "m", n_kv_head=2, n_inner=1024, **{**shape, "n_embd": 1024}))
        assert 400 * 1024 >= ops.PARALLEL_MIN_SIZE
    monkeypatch.setattr(
        row_chunks, "ROW_CHUNK", 1000
    )  # both dense: a watched pass is never chunked (test_row_chunks.py)
    ids = np.arange(400) % 300
    assert 4 * 400 * 400 >= ops.PARALLEL_MIN_SIZE  # the scores are big enough to be split among threads
    fast = model.logits(ids)
    monkeypatch.setattr(threads, "THREADS", 1)
    plain = model.run(ids, all_positions=True, watcher=lambda name, tensor, record: tensor)
    assert np.array_equal(fast, plain)


@pytest.mark.parametrize(
    "a_shape, b_shape, folds",
    [
        ((7, 5), (5, 3), False),  # one product, nothing to fold
        ((4, 7, 5), (5, 3), True),  # a weight shared by a batch
        ((2, 3, 7, 5), (5, 3), True),
        ((2, 3, 7, 5), (2, 1, 5, 4), True),  # keys shared by the 3 query heads of each of 2 groups
        ((4, 2, 3, 1, 5), (4, 2, 1, 5, 6), True),  # the same in a batch, one decode row
        ((3, 7, 5), (4, 1, 5, 2), True),  # b broadcast over a's axis and with one of its own
        ((1, 3, 7, 5), (4, 1, 5, 2), True),
        ((2, 3, 7, 5), (2, 3, 5, 4), False),  # b not shared: no fold
        ((7, 5), (3, 5, 2), False),
    ],
)
def test_folding_the_axes_a_factor_is_shared_over_gives_np_matmul_exactly(a_shape, b_shape, folds):
    """Small whole numbers: every sum is exact, so any order of the BLAS's additions gives the same bits."""
    from minitransformer.engine.tape import fold_shared_axes

    rng = np.random.default_rng(0)
    a = rng.integers(-8, 9, (*a_shape[:-2], a_shape[-2] + 2, a_shape[-1])).astype(np.float32)[..., 1:-1, :]  # strided
    b = rng.integers(-8, 9, b_shape).astype(np.float32)
    a_rows, b_rows, out_shape = fold_shared_axes(a, b)
    out = np.matmul(a_rows, b_rows)
    out = out if out_shape is None else out.reshape(out_shape)
    assert np.array_equal(out, np.matmul(a, b))
    assert (out_shape is not None) == folds


def test_no_module_outside_the_families_asks_which_family_a_model_is():
    """A family is decided by its one table (families/table.py): no comparison with a family's name or model_type
    (`config.family == "llama"`, `model_type in ("mistral", ...)`) elsewhere: each question is a field of the
    family's record. ("gpt2" as a model's name, PRESETS["gpt2"], is not a family's.)"""
    from minitransformer.families.table import ARCHITECTURES, model_types

    names = set(ARCHITECTURES) | set(model_types())
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        home = path.relative_to(PACKAGE).as_posix()
        if home.startswith("families/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=home)):
            strings = []
            if isinstance(node, ast.Compare):
                strings = [n for n in [node.left, *node.comparators] for n in ast.walk(n)]
            hits = {n.value for n in strings if isinstance(n, ast.Constant) and n.value in names}
            # `x.family == "..."` or `... in x.family`: a family's name compared as text (`is None` is no such test)
            named = any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in strings)
            if named and any(isinstance(n, ast.Attribute) and n.attr == "family" for n in strings):
                hits.add(".family")
            found += [f"{home}:{node.lineno} {hit}" for hit in sorted(hits)]
    assert not found, f"a family decided outside its table: {found}"


def test_the_shape_language_has_rows_that_depend_on_the_data():
    """A product over the tokens a router sent to one expert has as many rows as the data says: the symbol Te,
    sized per call, is checked like any other, and the ledger records the product's true shapes."""
    from minitransformer.engine.tape import Dims, Tape
    from minitransformer.families.table import ARCHITECTURES, PRESETS

    phase = Phase("prefill", 0, 5, 5)
    tape = Tape(
        Dims(T=5, t=5, D=8, H=2, F=12, V=50, R=1),
        phase,
        stage_table=ARCHITECTURES["llama"].stage_table(PRESETS["llama3.2-1b"]),
    ).layer(0)
    h, w = np.ones((3, 8), np.float32), np.ones((8, 12), np.float32)
    out = tape.with_sizes(Te=3).matmul("mlp.up", h, w, "Te D, D F -> Te F")
    assert out.shape == (3, 12) and (out == 8).all()
    record = phase.records[-1]
    assert (record.a_shape, record.out_shape, record.dot_products, record.macs) == ((3, 8), (3, 12), 36, 288)
    with pytest.raises(AssertionError, match=r"\[Te, D\] = \[2, 8\]"):
        tape.with_sizes(Te=2).matmul("mlp.up", h, w, "Te D, D F -> Te F")
    with pytest.raises(AttributeError):  # a data-dependent size must be named, never guessed
        tape.matmul("mlp.up", h, w, "Te D, D F -> Te F")


def test_views_render_what_the_verbs_computed():
    """A view shows what a verb computed and runs nothing itself: no forward pass (the pass generator, Model.run,
    run_with_cache, logits) and no count. The trace view watches generate's loop, which verbs/trace.py hands it."""
    computing = {"forward_passes", "placeholder_passes", "count_passes", "count_folded", "count_generation",
                 "sweep_per_token", "decode_at", "run_with_cache", "prompt_rows"}  # fmt: skip
    found = []
    for path in sorted((PACKAGE / "views").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if isinstance(node, ast.alias):
                name = node.name.split(".")[-1]
            model_pass = isinstance(node, ast.Attribute) and name in ("run", "logits") and _root(node) == "model"
            if name in computing or model_pass:
                found.append(f"views/{path.name}:{node.lineno} {name}")
    assert not found, f"views that compute: {found}"
