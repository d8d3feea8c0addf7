"""The folder a command launched with `python:` probes gets first on its PYTHONPATH: its
sitecustomize.py times the probed functions' calls (kinds/python.py)."""
