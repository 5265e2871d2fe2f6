"""Each job's --help, rendered ahead of time into help.json so that printing it imports no Beam.

A job module imports apache_beam, which takes seconds (decode-clips: more), and `--help` should not
wait for it. `python -m dew.pipelines.metadata --write` renders every job's parser, plus the Beam
pipeline options it passes through, into help.json beside this module; `dew-preprocess JOB --help`
prints that text, and `--check` (a test runs it) fails when a parser changed and help.json did not.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

from dew.pipelines.jobs import JOBS, Job

HELP = Path(__file__).with_name("help.json")
WIDTH = 100
# The Beam options most launches set, shown with Beam's own help; the rest are listed by name.
COMMON_BEAM = (
    "--runner",
    "--project",
    "--region",
    "--temp_location",
    "--staging_location",
    "--service_account_email",
    "--sdk_container_image",
    "--num_workers",
    "--max_num_workers",
    "--machine_type",
    "--setup_file",
    "--requirements_file",
    "--direct_running_mode",
    "--direct_num_workers",
)


def beam_options() -> str:
    """The Beam pipeline options a job passes through: the common ones with their help, then every name."""
    from dew.pipelines import flags

    beam = flags.beam_parser()
    by_flag = {option: action for action in beam._actions for option in action.option_strings}
    lines = ["Beam pipeline options, passed through to Beam (`--runner DataflowRunner` runs on Dataflow):"]
    for flag in COMMON_BEAM:
        action = by_flag.get(flag)
        if action is not None:
            text = " ".join((action.help or "").split())
            lines += textwrap.wrap(f"{flag}: {text}", WIDTH, initial_indent="  ", subsequent_indent="      ")[:3]
    others = sorted({o for o in by_flag if o.startswith("--") and o not in COMMON_BEAM})
    lines += ["", f"and every other flag of Beam's PipelineOptions ({len(others)}):"]
    lines += textwrap.wrap(" ".join(others), WIDTH, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)


def render(job: Job, beam: str | None) -> str:
    """`job`'s --help as argparse prints it at WIDTH columns, with `beam` (the options text) after it."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        text = job.load().parser().format_help()
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return text if beam is None or not job.beam else f"{text}\n{beam}\n"


def rendered() -> str:
    beam = beam_options()
    return json.dumps({job.name: render(job, beam) for job in JOBS}, indent=1, ensure_ascii=False) + "\n"


def stored(name: str) -> str | None:
    """The help.json text of job `name`; None when the file is missing (a bare source tree)."""
    try:
        return json.loads(HELP.read_text())[name]
    except (OSError, ValueError, KeyError):
        return None
