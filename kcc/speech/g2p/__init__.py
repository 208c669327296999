"""Text -> phonemes: the language backends (en, ja, intl for espeak-ng's languages, zh through misaki),
the English tokenizer, tagger and lexicon cache, the normaliser and the user's pronunciation overrides.
kcc.speech.g2p.g2p picks a backend per language; nothing here is imported until text is spoken."""

# The backends a user can name (--g2p, the server's g2p setting): here, in the package's light
# entry, so a command line lists them without importing a backend (kcc.speech.g2p.g2p re-exports it).
G2P_BACKENDS = ("auto", "lexicon", "misaki", "espeak")
