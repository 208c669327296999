"""The speech product: text -> phonemes (g2p), `kcc say`, the server and batch front-ends."""
