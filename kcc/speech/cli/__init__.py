"""The terminal's doors: `kcc say`, the shared command-line arguments, Ctrl-C handling, progress bars."""
