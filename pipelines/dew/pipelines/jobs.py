"""Every dew-preprocess job, each declared once, by its own module.

A job is a module of dew.pipelines with `parser()`, `main(argv)` and, at its top level, one declaration
`JOB = Job(name=..., place=..., summary=...)`. `JOBS` collects them: the console script's usage, the flex
template's `--job` parameter and metadata (dew.pipelines.metadata), the Dataflow launcher's choices, the
worker image's extras and the job tables in the docs all read it, so a new job is its module and nothing
else. The declarations are read from the modules' source, not by importing them: a job module imports
apache_beam, and `dew-preprocess` lists the jobs and prints a job's --help without it. A test imports
every job module and checks that its `JOB` is what this module read.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import pkgutil
import re
from types import ModuleType

_DECLARES_A_JOB = re.compile(r"^JOB = Job\(", re.MULTILINE)  # at the start of a line, as ruff formats it


@dataclasses.dataclass(frozen=True, kw_only=True)
class Job:
    """One job: the name users type (`dew-preprocess NAME`, `--job NAME`), the module that runs it, and
    what it turns into what, in one line.

    Args:
        name: What users type: `dew-preprocess NAME`, the flex template's `--job NAME`.
        place: Where the job stands among the others in every listing; the lowest is the flex template's
            default, run when `--job` is not given.
        summary: What the job turns into what, in one line.
        beam: Whether the job runs a Beam pipeline and passes Beam's options through (inspect does neither);
            the dew-preprocess program shows a progress line for a Beam job from its start.
        extras: The dew extras the job's workers import on demand: the worker image must install them.
        module: The module that declares the job; filled in by `JOBS`, never written in a declaration.

    Examples:
        >>> from dew.pipelines.jobs import find
        >>> find("tokenize").module
        'dew.pipelines.tokenize_job'
    """

    name: str
    place: int
    summary: str
    beam: bool = True
    extras: tuple[str, ...] = ()
    module: str = ""

    def load(self) -> ModuleType:
        """The job's module, with `parser()` and `main(argv)`; importing it imports apache_beam, except inspect's.

        Returns:
            The imported module.
        """
        return importlib.import_module(self.module)


def declared(package: str = "dew.pipelines") -> tuple[Job, ...]:
    """Every job the modules of `package` declare, by their `place`.

    Args:
        package: The package whose modules are read.

    Returns:
        The jobs, the default first.

    Examples:
        >>> [job.name for job in declared()][:2]
        ['tokenize', 'clean']
    """
    jobs = []
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__, f"{package}."):
        loader = getattr(importlib.util.find_spec(info.name), "loader", None)
        get_source = getattr(loader, "get_source", None)
        source = get_source(info.name) if get_source is not None else None
        declaration = _DECLARES_A_JOB.search(source) if isinstance(source, str) else None
        if isinstance(source, str) and declaration is not None:
            # The statement alone, to its closing parenthesis at the start of a line: parsing whole job
            # modules would cost the program's start most of what not importing them saves.
            end = source.find("\n)", declaration.start())
            jobs.append(_read(source[declaration.start() : end + 2 if end >= 0 else None], info.name))
    for key in ("name", "place"):
        taken: dict[object, str] = {}
        for job in jobs:
            if taken.setdefault(getattr(job, key), job.module) != job.module:
                raise ValueError(f"jobs {taken[getattr(job, key)]} and {job.module} declare the same {key}")
    return tuple(sorted(jobs, key=lambda job: job.place))


def _read(source: str, module: str) -> Job:
    """The `JOB = Job(...)` statement of a module; its arguments must be literals, as a listing reads them."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        body = []
    for node in body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["JOB"]:
            call = node.value
            if not (isinstance(call, ast.Call) and not call.args and ast.unparse(call.func) == "Job"):
                break
            try:
                fields = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
            except ValueError:
                raise ValueError(f"{module}: JOB = Job(...) takes literal keyword arguments only") from None
            if "module" in fields:
                raise ValueError(f"{module}: a job's module is where it is declared, not a field to give")
            if "extras" in fields:
                fields["extras"] = tuple(fields["extras"])
            return Job(**fields, module=module)
    raise ValueError(f"{module}: a job is declared by one top-level `JOB = Job(name=..., ...)`")


# The first job is what the flex template runs when --job is not given.
JOBS: tuple[Job, ...] = declared()


def find(name: str) -> Job | None:
    """The job users call `name`.

    Args:
        name: A job's name, as typed after `dew-preprocess`.

    Returns:
        The job, or None when no job has that name.

    Examples:
        >>> find("inspect").beam
        False
    """
    return next((job for job in JOBS if job.name == name), None)
