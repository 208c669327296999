"""Samples -> what a user keeps: the audio formats table and its encoders, WAV, where output goes,
word timestamps and the caption (SRT / VTT) writer."""
