"""The ground floor: where lethe-lab reads and writes (`paths`: LETHE_HOME, its write check, the input size limit),
file locks (`locking`), cache writes on a disk that may fill up (`storage`), the plotly style (`figures`).
Imports nothing else of lethe_core."""
