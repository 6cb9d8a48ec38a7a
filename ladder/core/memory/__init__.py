"""The memory model kept across sweeps: a line per device fitted to every stored trial of a case, profile,
trainer code and machine (`model`), each card's answer from it (`cards`), and a later sweep's first launches
(`first`). Pure: storage reads the trials (`ladder.storage.history`)."""
