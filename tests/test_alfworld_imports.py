"""The ALFWorld env package imports without cycles."""


def _alfworld_import_graph() -> dict[str, set[str]]:
  """{module: alfworld modules it imports} for rla_jax/envs/alfworld/*.py,
  counting imports inside functions too (the package __init__ excluded)."""
  import ast
  import pathlib

  import rla_jax.envs.alfworld as package

  pkg = package.__name__
  folder = pathlib.Path(package.__file__).parent
  modules = {f.stem for f in folder.glob("*.py")} - {"__init__"}
  graph = {}
  for name in modules:
    deps = set()
    tree = ast.parse((folder / f"{name}.py").read_text())
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and node.module == pkg:
        deps.update(a.name for a in node.names if a.name in modules)
      elif isinstance(node, ast.ImportFrom) and node.module:
        if node.module.startswith(pkg + "."):
          deps.add(node.module[len(pkg) + 1 :].split(".")[0])
      elif isinstance(node, ast.Import):
        deps.update(
          a.name[len(pkg) + 1 :].split(".")[0]
          for a in node.names
          if a.name.startswith(pkg + ".")
        )
    graph[name] = deps - {name}
  return graph


def test_alfworld_modules_have_no_import_cycle():
  graph = _alfworld_import_graph()
  # the backends subclass BatchedEnv from its own module; env.make_env
  # imports the backends
  assert graph["env"] >= {"native_env", "textworld_backend", "batched_env"}
  assert "env" not in graph["native_env"] | graph["textworld_backend"]

  def cycle_from(start, node, path):
    for dep in sorted(graph.get(node, ())):
      if dep == start:
        return [*path, dep]
      if dep not in path:
        found = cycle_from(start, dep, [*path, dep])
        if found:
          return found
    return None

  cycles = [c for m in sorted(graph) if (c := cycle_from(m, m, [m]))]
  assert not cycles, f"import cycles: {cycles}"
