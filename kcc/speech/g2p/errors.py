"""The G2P's named error, alone so that a light module (the request's declarations, read by every
`--help`) can name it without the vocabulary or a backend."""


class G2PError(ValueError):
    """Text cannot be turned into phonemes; the message says what and where."""
