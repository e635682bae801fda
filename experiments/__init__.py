"""absl drivers, one per table or figure; each writes results/<name>/{results.json, table.md, *.png}."""
