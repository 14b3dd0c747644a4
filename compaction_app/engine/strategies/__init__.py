"""The four compaction implementations (spec §4.1-§4.4)."""
