"""Deep Search (Search-R1 style): search a passage corpus, answer by exact match; the generated
default knowledge base and splits are in data/ (make_data.py writes them)."""
