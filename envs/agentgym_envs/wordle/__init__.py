"""Wordle: guess a five-letter English word (wordfreq's list) from per-letter feedback."""
