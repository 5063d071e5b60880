"""TextCraft: crafting Minecraft 1.16.1 items from real recipes; goals and splits in data/."""
