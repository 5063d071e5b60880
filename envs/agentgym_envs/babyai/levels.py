"""BabyAI task ids: `data_idx` -> (level, seed), and the evaluation categories.

`LEVELS` is a fixed, alphabetically sorted list of 40 minigrid BabyAI level ids (Debug variants
and most size variants of the 96 registered ids are left out). Task `data_idx` plays level
`LEVELS[data_idx % 40]` generated with seed `data_idx // 40`. Never reorder this list: task ids
in shipped datasets depend on it.
"""

from __future__ import annotations

LEVELS: tuple[str, ...] = tuple(
    sorted(
        f"BabyAI-{name}-v0"
        for name in (
            "ActionObjDoor",
            "BlockedUnlockPickup",
            "BossLevel",
            "BossLevelNoUnlock",
            "FindObjS5",
            "FindObjS7",
            "GoTo",
            "GoToDoor",
            "GoToImpUnlock",
            "GoToLocal",
            "GoToObj",
            "GoToObjDoor",
            "GoToObjMaze",
            "GoToOpen",
            "GoToRedBall",
            "GoToRedBallGrey",
            "GoToRedBlueBall",
            "GoToSeq",
            "KeyCorridorS3R1",
            "KeyCorridorS3R3",
            "KeyInBox",
            "MiniBossLevel",
            "MoveTwoAcrossS5N2",
            "OneRoomS8",
            "OneRoomS20",
            "Open",
            "OpenDoor",
            "OpenDoorColor",
            "OpenDoorLoc",
            "OpenRedDoor",
            "OpenTwoDoors",
            "Pickup",
            "PickupLoc",
            "PutNextLocal",
            "PutNextS5N1",
            "Synth",
            "SynthLoc",
            "UnblockPickup",
            "Unlock",
            "UnlockPickup",
        )
    )
)
assert len(LEVELS) == 40

# Test categories (as the reference names them) -> the level each one evaluates.
CATEGORIES: dict[str, str] = {
    "ActionObjDoor": "BabyAI-ActionObjDoor-v0",
    "FindObjS7": "BabyAI-FindObjS7-v0",
    "GoTo": "BabyAI-GoTo-v0",
    "OneRoomS20": "BabyAI-OneRoomS20-v0",
    "Pickup": "BabyAI-Pickup-v0",
    "SynthLoc": "BabyAI-SynthLoc-v0",
}


def level_for(data_idx: int) -> tuple[str, int]:
    """The (level id, seed) task `data_idx` plays."""
    return LEVELS[data_idx % len(LEVELS)], data_idx // len(LEVELS)


def task_id(level: str, seed: int) -> int:
    """Inverse of `level_for`."""
    return seed * len(LEVELS) + LEVELS.index(level)
