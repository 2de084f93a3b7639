"""Parses Prometheus text exposition from stdin with prometheus_client's
parser (the reference Python implementation) and prints, as JSON, each
family's type and samples: {family: {"type": t, "samples": [[name,
labels, value], ...]}}. A malformed exposition raises (exit status 1)."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

families = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = {
        "type": family.type,
        "help": family.documentation,
        "samples": [[s.name, s.labels, s.value] for s in family.samples],
    }
json.dump(families, sys.stdout)
