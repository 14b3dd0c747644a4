"""Reading /metrics as a scraper does: the text exposition parsed by prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

TOKEN = "metrics-token-for-tests"


def parse(text: str) -> dict[tuple[str, frozenset], float]:
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


class Scrape:
    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = parse(text)

    def value(self, name: str, **labels: str) -> float:
        """The sample's value (0 when the series does not exist yet: a counter never incremented)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def has(self, name: str, **labels: str) -> bool:
        return (name, frozenset(labels.items())) in self.samples

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for sample_name, labels in self.samples if sample_name == name]


def scrape(client) -> Scrape:
    """GET /metrics with the test token through Django's test client (the settings must carry TOKEN)."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return Scrape(response.content.decode())
