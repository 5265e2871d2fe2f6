"""dew.pipelines: job launchers over dew.preprocess, one module per job (tokenize, pack, plan_mixture, inspect).

Each job parses its own flags first and hands the rest to Beam's PipelineOptions; `dew-preprocess JOB`
and `python -m dew.pipelines.JOB` run the same code.
"""
