"""Maze: walk a generated grid maze to its goal from what the walls around you show."""
