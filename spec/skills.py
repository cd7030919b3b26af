"""Skills (`skills:`), read where the spec is loaded from its file, never by a worker.

strands-cli reads a skill's SKILL.md (or README.md), or `module.md` for
`Skill("skill-id/module")`, from the skill's directory when an agent asks for it, the
path relative to the spec's file. A worker of this fleet must never read a path a spec
names (a spec could read the fleet's secrets that way), so the loader reads every
Markdown file of each skill directory up front, on the submitter's machine, and carries
them inside the spec (`Spec.skill_library`, never written by a user); the worker's
`Skill` tool serves from that. What is read joins the spec's hash, as `$ref` agents do.

Reading is bounded: skills per spec, directory entries walked, Markdown files per skill,
bytes per file and in all. Hidden entries are skipped; a symlink that leads out of its
skill directory is refused; a symlinked directory inside it is not followed. A skill
directory that does not exist is not an error here (strands-cli loads such a spec too):
the Skill tool answers as strands-cli does when the agent asks for it.

A spec sent as text (the HTTP API) has no file to read skills relative to: one with
skills is refused, like a `$ref` agent.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path, PurePosixPath

from strands_durable.errors import SpecError
from strands_durable.settings import Limits
from strands_durable.spec.model import Spec
from strands_durable.spec.sections import SkillFiles, SkillLibrary

__all__ = [
    "LIBRARY_FIELD",
    "MAX_SKILLS",
    "MAX_SKILLS_TOTAL_BYTES",
    "MAX_SKILL_ENTRIES",
    "MAX_SKILL_FILES",
    "MAX_SKILL_FILE_BYTES",
    "SkillFiles",
    "SkillLibrary",
    "attach_skills",
    "check_notes_file",
    "read_skill_dir",
    "skill_library",
]

# The effective spec's field (a spec itself cannot hold it: the schema forbids it).
LIBRARY_FIELD = "skill_library"
MAX_SKILLS = 64
MAX_SKILL_ENTRIES = 2_000  # directory entries walked per skill
MAX_SKILL_DEPTH = 4  # directory levels below the skill's own
MAX_SKILL_FILES = 64  # Markdown files carried per skill
MAX_SKILL_FILE_BYTES = 256 * 1024
MAX_SKILLS_TOTAL_BYTES = 1024 * 1024


def skill_library(spec: Spec) -> SkillLibrary:
    """The skills' files carried in `spec` (empty for a spec without skills)."""
    return spec.skill_library or SkillLibrary()


def attach_skills(spec: Spec, spec_path: Path | None, source: str, limits: Limits,
                  digest: str = "") -> tuple[Spec, str]:
    """`spec` with its skills' files attached, and `digest` (the `$ref` agents') joined
    with a digest of what was read. Also checks the notes file's path (it is written
    as an artifact). A spec with skills but no file to resolve them from is refused."""
    check_notes_file(spec, source)
    if not spec.skills:
        return spec, digest
    if spec_path is None:
        raise SpecError(source, "skills", "skills are read from directories relative to "
                        "the spec's file: load the spec from its file (durable run / "
                        "durable submit FILE); a spec sent as text has no files")
    if len(spec.skills) > MAX_SKILLS:
        raise SpecError(source, "skills", f"{len(spec.skills)} skills; at most {MAX_SKILLS}")
    library: dict[str, SkillFiles] = {}
    total = 0
    for i, skill in enumerate(spec.skills):
        where = f"skills[{i}]"
        if skill.id in library:
            raise SpecError(source, f"{where}.id", f"skill id {skill.id!r} is defined twice")
        files = read_skill_dir(spec_path.parent / skill.path, source, f"{where}.path")
        total += sum(len(text.encode("utf-8")) for text in files.files.values())
        if total > MAX_SKILLS_TOTAL_BYTES:
            raise SpecError(source, f"{where}.path", f"the skills' Markdown files pass "
                            f"{MAX_SKILLS_TOTAL_BYTES:,} bytes in all")
        library[skill.id] = files
    attached = SkillLibrary(skills=library)
    payload = attached.model_dump(mode="json")
    read = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
    joined = hashlib.sha256(f"{digest}\0{read}".encode()).hexdigest() if digest else read
    return spec.model_copy(update={LIBRARY_FIELD: attached}), joined


def read_skill_dir(path: Path, source: str, where: str) -> SkillFiles:
    """Every Markdown file under the skill directory `path`, within the limits."""
    if not path.is_dir():
        return SkillFiles(found=False)
    root = path.resolve()
    files: dict[str, str] = {}
    entries = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        with os.scandir(directory) as listing:  # counted as read: a huge directory stops early
            for entry in listing:
                entries += 1
                if entries > MAX_SKILL_ENTRIES:
                    raise SpecError(source, where, f"the skill directory holds more than "
                                    f"{MAX_SKILL_ENTRIES:,} entries")
                if entry.name.startswith("."):
                    continue
                relative = Path(entry.path).relative_to(root).as_posix()
                if entry.is_symlink():
                    _check_link(Path(entry.path), root, relative, source, where)
                    if not entry.is_file():  # a linked directory is not followed
                        continue
                elif entry.is_dir():
                    if depth < MAX_SKILL_DEPTH:
                        stack.append((Path(entry.path), depth + 1))
                    continue
                if entry.name.endswith(".md") and entry.is_file():
                    if len(files) >= MAX_SKILL_FILES:
                        raise SpecError(source, where, f"the skill holds more than "
                                        f"{MAX_SKILL_FILES} Markdown files")
                    files[relative] = _read_markdown(Path(entry.path), relative, source,
                                                     where)
    return SkillFiles(files=dict(sorted(files.items())))


def _check_link(link: Path, root: Path, relative: str, source: str, where: str) -> None:
    target = link.resolve()
    if not target.is_relative_to(root):
        raise SpecError(source, where, f"{relative!r} is a symlink that leads out of the "
                        "skill directory")


def _read_markdown(path: Path, relative: str, source: str, where: str) -> str:
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise SpecError(source, where, f"{relative!r} is not a regular file")
    if info.st_size > MAX_SKILL_FILE_BYTES:
        raise SpecError(source, where, f"{relative!r} is {info.st_size:,} bytes; a skill "
                        f"file may be at most {MAX_SKILL_FILE_BYTES:,}")
    with path.open("rb") as handle:
        data = handle.read(MAX_SKILL_FILE_BYTES + 1)
    if len(data) > MAX_SKILL_FILE_BYTES:  # it grew since stat
        raise SpecError(source, where, f"{relative!r} is over {MAX_SKILL_FILE_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(source, where, f"{relative!r} is not UTF-8 text") from None


def check_notes_file(spec: Spec, source: str) -> None:
    """The notes file is written as an artifact: the artifact path rules apply."""
    notes = spec.context_policy.notes if spec.context_policy else None
    if notes is None:
        return
    name = notes.file.replace("\\", "/")
    where = "context_policy.notes.file"
    if not name.strip() or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise SpecError(source, where, "expected a file name without control characters")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise SpecError(source, where, f"{notes.file!r}: the notes file is written with "
                        "the artifacts (durable run --out DIR), so its path must be "
                        "relative and may not contain '..'")
    if not path.parts:  # '.' or './': no file name left to write the notes to
        raise SpecError(source, where, f"{notes.file!r}: expected a file name, "
                        "e.g. notes.md")
