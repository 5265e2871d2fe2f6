"""How the docs test cuts a page into steps (tests/docs/pages.py), on a page written here."""

from __future__ import annotations

from tests.docs.pages import Step, console_commands, steps

PAGE = """# A page

```python
a = 1
```

Prose between two python blocks keeps them one script.

```python title="pkg/hooks.py"
def hook(record):
    return record
```

```python
b = a + 1
```

```text
not run
```

```
not run either
```

```bash
echo shell
```

1. Indented, in a list:

   ```python
   c = 3
   ```

```console
$ echo one \\
    two
one two
$ echo $?
0
```
"""


def test_python_blocks_join_until_a_shell_block_and_titled_files_go_before_their_script() -> None:
    found = steps(PAGE, "page.md")
    assert [s.kind for s in found] == ["file", "python", "shell", "python", "console"]
    assert found[0] == Step("file", "def hook(record):\n    return record\n", 10, "pkg/hooks.py")
    assert found[1].code == "# --- page.md line 4\na = 1\n\n# --- page.md line 15\nb = a + 1\n"
    assert found[1].line == 4
    assert found[2].code == "echo shell\n"
    assert found[3].code == "# --- page.md line 33\nc = 3\n"  # dedented by its fence's indent


def test_console_commands_keep_continuations_and_the_lines_shown_under_them() -> None:
    console = steps(PAGE, "page.md")[-1].code
    assert console_commands(console) == [("echo one \\\n    two", ["one two"]), ("echo $?", ["0"])]
