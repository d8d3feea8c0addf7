"""The agent's Prometheus exporter (`agent --metrics` / `--textfile`): the collector of
a node's series (collector.py), the session it reads them from (export.py) and the
loopback HTTP endpoint or textfile that serves them (http.py). The metric names are
declared once in runtime/metric_names.py, which the cluster view reads too."""
