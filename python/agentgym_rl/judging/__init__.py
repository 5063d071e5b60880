"""Rewards from a judge model: what it reads (`rubric`), how it is asked (`client`, `judge`),
how its scores rescore a group (`groups`) and where the judges come from (`serving`)."""
