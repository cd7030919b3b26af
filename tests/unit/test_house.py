"""The shape of the house (docs/architecture.md): one import name mapped from the role
folders, every package registered, no import by a generic top-level name, and modules and
functions small enough to read in one sitting."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
ROLE_FOLDERS = {"core": "strands_durable", "store": "strands_durable.store",
                "metrics": "strands_durable.metrics", "spec": "strands_durable.spec",
                "patterns": "strands_durable.patterns", "planning": "strands_durable.planning",
                "sessions": "strands_durable.sessions", "scheduler": "strands_durable.scheduler",
                "worker": "strands_durable.worker", "api": "strands_durable.api",
                "client": "strands_durable.client"}
# Names a module of ours must never be imported by: they are folders here, not packages.
FOLDER_NAMES = set(ROLE_FOLDERS)
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def package_folders() -> dict[str, Path]:
    """Every package of the distribution, by dotted name, from the folders on disk."""
    found: dict[str, Path] = {}
    for folder, name in ROLE_FOLDERS.items():
        root = REPO / folder
        for init in root.rglob("__init__.py"):
            relative = init.parent.relative_to(root).parts
            found[".".join((name, *relative))] = init.parent
    return found


def sources() -> Iterator[Path]:
    for folder in (*ROLE_FOLDERS, "bench", "tests"):
        yield from (REPO / folder).rglob("*.py")


def test_the_package_dir_maps_the_role_folders_onto_one_import_name() -> None:
    mapping = SETUPTOOLS["package-dir"]
    assert mapping == {name: folder for folder, name in ROLE_FOLDERS.items()}


def test_every_package_folder_is_listed_for_the_build_and_nothing_else() -> None:
    assert sorted(SETUPTOOLS["packages"]) == sorted(package_folders())


def test_no_module_imports_a_role_folder_as_a_top_level_name() -> None:
    offenders = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO)}:{node.lineno} imports {name}"
                          for name in names if name.split(".")[0] in FOLDER_NAMES]
    assert not offenders, "\n".join(offenders)


def test_modules_and_functions_stay_small() -> None:
    too_long = []
    for folder in ROLE_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            where = path.relative_to(REPO)
            if text.count("\n") > MAX_MODULE_LINES:
                too_long.append(f"{where}: {text.count(chr(10))} lines")
            for node in ast.walk(ast.parse(text, str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        too_long.append(f"{where}:{node.lineno} {node.name}(): {length} lines")
    assert not too_long, "\n".join(too_long)


def our_modules() -> Iterator[tuple[str, Path]]:
    """(dotted name, file) of every module of the package."""
    for name, folder in package_folders().items():
        for path in folder.glob("*.py"):
            yield (name if path.stem == "__init__" else f"{name}.{path.stem}"), path


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {name for name in found if name.startswith("strands_durable")}


# Who may import whom: each room, the rooms it may import (the kernel, `core`, imports
# nothing of ours). The spec format and its patterns are one format in two rooms: the
# spec's model holds each pattern's typed config, each pattern reads the spec's steps.
# Pure rooms (spec, patterns, planning) reach the store only for its pure data modules.
PURE_STORE_MODULES = ("strands_durable.store.keys", "strands_durable.store.records")
PURE_ROOMS = ("spec", "patterns", "planning")
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "store": {"core"},
    "metrics": {"core", "store"},
    "spec": {"core", "patterns", "store"},
    "patterns": {"core", "spec"},
    "planning": {"core", "spec", "patterns", "store"},
    "sessions": {"core", "store", "metrics", "spec", "patterns", "planning"},
    "scheduler": {"core", "store", "metrics", "spec", "patterns", "planning", "sessions"},
    "worker": {"core", "store", "metrics", "spec", "patterns", "planning", "sessions"},
    "api": set(ROLE_FOLDERS) - {"client"},
    # The client speaks the API's own models and, without a server, its operations.
    "client": set(ROLE_FOLDERS) - {"worker", "scheduler"},
}
# The public surface (strands_durable/__init__.py) names what users import from every
# room; it imports them lazily (on first use), so it may name any room.
PUBLIC_SURFACE = "strands_durable"


def room_of(module: str) -> str:
    """The folder a dotted module name of ours lives in."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ROLE_FOLDERS and parts[1] != "core":
        return parts[1]
    return "core"


def test_every_room_has_a_rule() -> None:
    assert set(MAY_IMPORT) == set(ROLE_FOLDERS)


def test_imports_flow_one_way_and_the_planners_stay_pure() -> None:
    wrong = []
    for module, path in our_modules():
        room = room_of(module)
        if module == PUBLIC_SURFACE:
            continue
        for imported in imports_of(path):
            target = room_of(imported)
            if target == room:
                continue
            if target not in MAY_IMPORT[room]:
                wrong.append(f"{module} ({room}) imports {imported} ({target})")
            elif (room in PURE_ROOMS and target == "store"
                  and imported not in PURE_STORE_MODULES):
                wrong.append(f"{module} (pure) imports {imported}")
    assert not wrong, "\n".join(wrong)


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (no packages under tests/): two of one
    name in different folders stop the whole run at collection."""
    seen: dict[str, Path] = {}
    clashes = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        if path.name in seen:
            clashes.append(f"{seen[path.name].relative_to(REPO)} and {path.relative_to(REPO)}")
        seen.setdefault(path.name, path)
    assert not clashes
