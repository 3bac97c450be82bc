"""Test helper: one scrape of a Prometheus endpoint (`GET /metrics`), parsed with prometheus_client's parser."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> tuple[dict[str, str], Samples]:
    """The families (name -> type) and samples ((name, labels) -> value) of one scrape."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    families, samples = {}, {}
    for family in text_string_to_metric_families(text):
        families[family.name] = family.type
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return families, samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample, labelled), value in samples.items() if sample == name and wanted <= labelled)
