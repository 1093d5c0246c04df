"""The seeds' own APIs, with their names, as thin views over the engine: :class:`MSP` (seed 000,
MSP memory versioning; ``facades.msp``) and :class:`MemoryManager` (seed 002, SKYNET-SAFE memory;
``facades.skynet``). Both are also ``soulpass.MSP`` and ``soulpass.MemoryManager``."""
