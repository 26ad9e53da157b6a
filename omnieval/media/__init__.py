"""Media decoding (PyAV in the hot path), synthesis helpers and the decode-once cache."""
