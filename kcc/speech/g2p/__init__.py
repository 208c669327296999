"""Text -> phonemes: the language backends (en, ja, intl for espeak-ng's languages, zh through misaki),
the English tokenizer, tagger and lexicon cache, the normaliser and the user's pronunciation overrides.
kcc.speech.g2p.g2p picks a backend per language; nothing here is imported until text is spoken."""
