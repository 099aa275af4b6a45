"""dtrain-report: a study's runs as CSV tables, PNG plots and one HTML page (docs/studies.md)."""
