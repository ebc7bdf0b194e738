"""src/mxfp4 imports one way: every import of one mxfp4 module by another (module level or inside a
function, read from the source by ``ast``) is an edge, and the graph has no cycle."""
import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"


def module_files(root: pathlib.Path = SRC / "mxfp4") -> dict[str, tuple[pathlib.Path, bool]]:
    """Dotted module name: (file, whether it is a package's __init__)."""
    found = {}
    for file in sorted(root.rglob("*.py")):
        parts = list(file.relative_to(root.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (file, package)
    return found


def import_graph(modules: dict[str, tuple[pathlib.Path, bool]]) -> dict[str, set[str]]:
    """Edges module -> the mxfp4 modules it imports. ``from X import name`` is an edge to X.name where that
    is a module, else to X; the parent packages Python runs on the way are not edges (every module would
    meet the package's __init__)."""
    graph = {name: set() for name in modules}
    for name, (file, package) in modules.items():
        here = name.split(".") if package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - node.level + 1] + ([node.module] if node.module else [])
                    target = ".".join(base)
                else:
                    target = node.module or ""
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in modules:
                        graph[name].add(sub)
                    elif target in modules:
                        graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), each
    sorted; iterative Tarjan, so a deep graph cannot overflow the stack."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                part = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    part.append(w)
                    if w == v:
                        break
                if len(part) > 1 or v in graph[v]:
                    found.append(sorted(part))
    return found


def test_no_import_cycle_in_src():
    graph = import_graph(module_files())
    assert "mxfp4.ops" in graph and "mxfp4.tensor" in graph["mxfp4.ops"]  # the walk sees the package
    loops = cycles(graph)
    detail = "; ".join(" <-> ".join(f"{m} -> {sorted(graph[m] & set(c))}" for m in c) for c in loops)
    assert not loops, f"import cycles in src/mxfp4: {detail}"


def test_function_level_imports_count(tmp_path):
    """A cycle closed by an import inside a function is found, and so is the relative form of every import."""
    pkg = tmp_path / "mxfp4"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("def f():\n    from .sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\nimport mxfp4.sub\n")
    (pkg / "c.py").write_text("from mxfp4 import a\n")
    graph = import_graph(module_files(pkg))
    assert graph["mxfp4.a"] == {"mxfp4.sub.b"} and graph["mxfp4.sub.b"] == {"mxfp4.a", "mxfp4.sub"}
    assert graph["mxfp4"] == {"mxfp4.a"} and graph["mxfp4.c"] == {"mxfp4.a"}
    assert cycles(graph) == [["mxfp4.a", "mxfp4.sub.b"]]
    (pkg / "a.py").write_text("def f():\n    return 1\n")
    assert cycles(import_graph(module_files(pkg))) == []
