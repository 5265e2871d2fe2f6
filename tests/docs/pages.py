"""Every ```python, ```bash, ```sh, ```shell and ```console block of README.md and docs/*.md, as a page runs them.

A page is read top to bottom and cut into steps. Python blocks that follow one another (prose between them,
no shell block) are joined into one script, as a reader pasting them into one file would; a shell block
runs as a `bash -e` script; a console block runs each `$ ` line and checks that the lines it shows under
a command are in what that command printed. A block of any language with a `title="name"` (Material
shows it as the file's name) is a file the page shows: it is written to that name, so later blocks read
it (before the python script around it, which stays one script). Every step of a page runs in one
folder of its own, so a page reads the files its earlier blocks wrote. Non-runnable text is fenced as
```text (or another language, without a title).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell", "console": "console"}
_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S
)
_TITLE = re.compile(r'title="([^"]+)"')


@dataclasses.dataclass(frozen=True)
class Step:
    """One thing a page runs: `kind` is python, shell, console or file; `line` is where its first block starts;
    `name` is the file a file step writes."""

    kind: str
    code: str
    line: int
    name: str = ""


def pages() -> list[Path]:
    """The pages whose blocks run: README.md, then docs/*.md by name."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(text: str) -> list[tuple[str, str, int, str]]:
    """(language, code, first line, title) of each fenced block in page order, dedented by its fence's indent."""
    found = []
    for match in _FENCE.finditer(text):
        indent = len(match["indent"])
        body = "".join(line[indent:] for line in match["body"].splitlines(keepends=True))
        title = _TITLE.search(match["info"])
        found.append((match["lang"].lower(), body, text.count("\n", 0, match.start()) + 2, title[1] if title else ""))
    return found


def steps(text: str, page: str) -> list[Step]:
    """The page's runnable blocks as steps; consecutive python blocks become one script with line markers."""
    out: list[Step] = []
    for lang, code, line, title in blocks(text):
        if title:
            # Written before the python script it sits in, so the blocks around it stay one script.
            at = len(out) - 1 if out and out[-1].kind == "python" else len(out)
            out.insert(at, Step("file", code, line, title))
            continue
        kind = RUNNABLE.get(lang)
        if kind is None:
            continue
        if kind == "python":
            marked = f"# --- {page} line {line}\n{code}"
            if out and out[-1].kind == "python":
                out[-1] = Step("python", out[-1].code + "\n" + marked, out[-1].line)
                continue
            code = marked
        out.append(Step(kind, code, line))
    return out


def console_commands(code: str) -> list[tuple[str, list[str]]]:
    """(command, lines shown under it) for each `$ ` line of a console block; `\\` continues a command."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in code.splitlines():
        if pending:
            pending += "\n" + raw
            if not raw.endswith("\\"):
                commands.append((pending, []))
                pending = ""
        elif raw.startswith("$ "):
            if raw.endswith("\\"):
                pending = raw[2:]
            else:
                commands.append((raw[2:], []))
        elif raw.strip() and commands:
            commands[-1][1].append(raw.strip())
    if pending:
        commands.append((pending, []))
    return commands
