"""The `lethe-lab` command (`main`) and its argument checks (`checks`), run before any expensive work."""
