"""dew.pipelines: job launchers over dew.preprocess, one module per job, declared once in dew.pipelines.jobs.

Each job parses its own flags plus Beam's (anything else is refused, dew.pipelines.flags) and hands
Beam's to its PipelineOptions; `dew-preprocess JOB` and `python -m <the job's module>` run the same code.
"""
